//! Starting a [`Coprocess`]: the child in a process group of its own, with
//! piped stdin, stdout and stderr, and the tasks that forward its stderr
//! and own the child (wait for it, kill what is left of its group, record
//! the exit).

use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::sync::Arc;

use kennel::{ExitSignal, ExitStatus};
use tokio::process::{Child, Command};

use super::ending::LAST_WORDS_WAIT;
use super::stderr::{StderrTail, forward_stderr};
use super::{Coprocess, Phase};
use crate::error::ProcessError;
use crate::frames::Frames;
use crate::group::ProcessGroup;
use crate::spec::{CoprocessSpec, ReadyMode};

/// The kernel's bit set for a pinned worker's CPUs (those it can hold).
#[cfg(target_os = "linux")]
fn cpu_set(cpus: Option<&[usize]>) -> Option<nix::sched::CpuSet> {
    let cpus = cpus?;
    let mut set = nix::sched::CpuSet::new();
    let mut any = false;
    for &cpu in cpus {
        any |= set.set(cpu).is_ok();
    }
    any.then_some(set)
}

impl Coprocess {
    pub(crate) fn spawn(spec: &CoprocessSpec) -> Result<Self, ProcessError> {
        let Some((first, rest)) = spec.argv.split_first() else {
            return Err(ProcessError::Spawn {
                program: String::new(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "the argv is empty"),
            });
        };
        let program = first.to_string_lossy().into_owned();
        let mut command = Command::new(first);
        command
            .args(rest)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        if spec.env_clear {
            command.env_clear();
        }
        for key in &spec.env_remove {
            command.env_remove(key);
        }
        command.envs(spec.env.iter().map(|(k, v)| (k, v)));
        if let Some(dir) = &spec.current_dir {
            command.current_dir(dir);
        }
        #[cfg(target_os = "linux")]
        crate::deathsig::die_with_parent(&mut command, cpu_set(spec.cpus.as_deref()));
        // Started now: the exit counts how long the worker ran from here.
        let (exit, _) = ExitSignal::new();
        let mut child = command.spawn().map_err(|source| ProcessError::Spawn {
            program: program.clone(),
            source,
        })?;
        let pid = child
            .id()
            .expect("a child that was just spawned has not been reaped");
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            unreachable!("stdin, stdout and stderr were all set to piped");
        };

        let group = Arc::new(ProcessGroup::new(pid));
        let tail = StderrTail::new();
        tokio::spawn(forward_stderr(stderr, spec.clone(), pid, tail.clone()));
        tokio::spawn(wait_for_exit(
            child,
            Arc::clone(&group),
            exit.clone(),
            spec.clone(),
            pid,
            tail.clone(),
        ));
        tracing::debug!(pool = spec.pool.as_deref(), slot = spec.slot, pid, %program, "worker started");

        Ok(Self {
            pid,
            group,
            stdin: Some(stdin),
            stdout: Frames::new(stdout, spec.framing, spec.max_line_bytes),
            spec: spec.clone(),
            next_id: 1,
            echoes_ids: false,
            watched: false,
            open: None,
            handshake_sent: false,
            handshake_result: None,
            about: None,
            heartbeat: kennel::Heartbeat::new(),
            exit,
            // The warm-up of a JSON-RPC worker is its handshake, if any.
            phase: if spec.framing.is_rpc() && spec.handshake.is_some()
                || !spec.framing.is_rpc() && spec.ready == ReadyMode::Line
            {
                Phase::Warming
            } else {
                Phase::Idle
            },
            tail,
        })
    }
}

/// Owns the child, waits for it, kills what is left of its group and
/// records the exit with the worker's last words.
async fn wait_for_exit(
    mut child: Child,
    group: Arc<ProcessGroup>,
    exit: ExitSignal,
    spec: CoprocessSpec,
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
        tracing::debug!(pool = spec.pool.as_deref(), slot = spec.slot, pid, status = %exit.status, ran_for = ?exit.ran_for, "worker ended");
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
