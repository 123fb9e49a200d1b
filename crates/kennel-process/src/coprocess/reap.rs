//! The task that owns a [`Coprocess`](super::Coprocess)'s child: it waits
//! for the child, kills what is left of its group and records the exit.

use std::os::unix::process::ExitStatusExt;
use std::sync::Arc;

use kennel::{ExitSignal, ExitStatus};
use tokio::process::Child;

use super::Label;
use super::ending::LAST_WORDS_WAIT;
use super::stderr::StderrTail;
use crate::group::ProcessGroup;

/// Owns the child, waits for it, kills what is left of its group and
/// records the exit with the worker's last words.
pub(super) async fn wait_for_exit(
    mut child: Child,
    group: Arc<ProcessGroup>,
    exit: ExitSignal,
    label: Label,
    pid: u32,
    tail: StderrTail,
) {
    // Stopped before the child was reaped (its runtime shut down): the end
    // is recorded all the same, so no `exited()` waits for ever.
    let stopped = ExitOnDrop(exit);
    let waited = child.wait().await;
    group.leader_reaped();
    let status = match waited {
        _ if group.was_killed_by_switch() => ExitStatus::Killed,
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => ExitStatus::Code(code),
            (None, Some(signal)) => ExitStatus::Signal(signal),
            (None, None) => ExitStatus::Other(status.to_string()),
        },
        Err(err) => ExitStatus::Other(format!("could not wait for the worker: {err}")),
    };
    let _ = tokio::time::timeout(LAST_WORDS_WAIT, tail.closed()).await;
    let exit = &stopped.0;
    exit.exit_with(status, tail.lines());
    if let Some(exit) = exit.try_exited() {
        tracing::debug!(pool = label.pool.as_deref(), slot = label.slot, pid, status = %exit.status, ran_for = ?exit.ran_for, "worker ended");
    }
}

/// Records that the task waiting for the worker stopped, unless the worker's
/// end was recorded first.
struct ExitOnDrop(ExitSignal);

impl Drop for ExitOnDrop {
    fn drop(&mut self) {
        self.0.exit(ExitStatus::Other(
            "the task waiting for the worker was stopped".into(),
        ));
    }
}
