//! How a [`Coprocess`] ends: closed gracefully (stdin, SIGTERM, SIGKILL), or
//! killed at once when its stream can no longer be trusted; and the short,
//! bounded waits for its exit that let an error say how it ended.

use std::time::Duration;

use kennel::{Exit, ExitStatus};
use nix::sys::signal::Signal;

use serde_json::Value;

use super::rpc;
use super::{Coprocess, Open, Phase};
use crate::error::ProcessError;
use crate::framing::Framing;

/// How long to wait for the exit status after the worker closed its stdout,
/// so that an error can say how the worker ended.
const EXIT_STATUS_WAIT: Duration = Duration::from_millis(200);

/// How long to wait, after killing a broken worker, until it has been reaped
/// and its exit published. SIGKILL takes effect at once, unless the process
/// is stuck in the kernel; then the error is returned without waiting more.
const REAP_WAIT: Duration = Duration::from_secs(1);

/// How long to wait, once the worker has been reaped, for the last of its
/// stderr to be read, so that its exit and an error carry its last words
/// (often the lines it wrote just before it died). Its stderr closes when
/// the last process of its group has ended; one that left the group and
/// keeps the pipe open only costs this wait.
pub(super) const LAST_WORDS_WAIT: Duration = Duration::from_millis(200);

impl Coprocess {
    /// Ends the worker gracefully and returns how it ended. In the
    /// `content-length` framing (a language server), if sound and running,
    /// it first sends LSP's `shutdown` and, once answered, `exit`, the two
    /// within the [`close_grace`]. Then it closes the worker's stdin (a
    /// well-behaved worker exits at the end of its input), waits up to the
    /// grace, sends SIGTERM to the whole process group, waits up to the
    /// grace again, then sends SIGKILL. Whatever is left in the group when
    /// the worker exits is killed.
    ///
    /// # Cancel safety
    ///
    /// Dropping this future drops the coprocess, which kills its process
    /// group at once.
    ///
    /// [`close_grace`]: crate::CoprocessSpec::close_grace
    pub async fn close(mut self) -> Exit {
        let grace = self.spec.close_grace;
        // Sound and running: `can_cancel` says so.
        if self.spec.framing == Framing::ContentLength
            && self.can_cancel()
            && tokio::time::timeout(grace, self.shut_down()).await.is_err()
        {
            event!(
                debug,
                self,
                "worker did not answer shutdown within the grace"
            );
        }
        drop(self.stdin.take());
        let exited = self.exited();
        tokio::pin!(exited);
        if let Ok(exit) = tokio::time::timeout(grace, &mut exited).await {
            return exit;
        }
        event!(
            debug,
            self,
            "worker did not exit after stdin closed; sending SIGTERM"
        );
        self.group.signal(Signal::SIGTERM);
        if let Ok(exit) = tokio::time::timeout(grace, &mut exited).await {
            return exit;
        }
        event!(
            warn,
            self,
            "worker did not exit after SIGTERM; sending SIGKILL"
        );
        self.group.signal(Signal::SIGKILL);
        exited.await
    }

    /// LSP's end: `shutdown`, its answer awaited (the worker's requests
    /// meanwhile answered, other messages skipped), then `exit`. A worker
    /// that breaks the stream or ends on the way is left to the steps
    /// after.
    async fn shut_down(&mut self) {
        let framing = self.spec.framing;
        let id = self.next_id;
        self.next_id += 1;
        let shutdown = rpc::message(framing, Some(id), "shutdown", None);
        if self.write(&shutdown).await.is_err() {
            return;
        }
        let open = Open {
            id,
            carries_id: false,
            token: Value::Null,
        };
        self.phase = Phase::InFlight;
        self.open = Some(open.clone());
        match self.rpc_reply(&open, None, &mut |_| {}).await {
            Ok(_) | Err(ProcessError::Worker { .. }) => {
                let _ = self.write(&rpc::message(framing, None, "exit", None)).await;
            }
            Err(_) => {}
        }
    }

    /// Marks the stream broken, kills the group, and waits (a bounded time)
    /// until the exit is published, so that when the error reaches the caller
    /// the process is gone and [`exited`](Self::exited) has resolved.
    /// Returns `err`, after logging it.
    pub(super) async fn break_stream(&mut self, err: ProcessError) -> ProcessError {
        event!(warn, self, %err, "killing the worker: its output can no longer be trusted");
        self.phase = Phase::Broken;
        if self.watched
            && let ProcessError::Protocol { message, .. } = err
        {
            // A pool watches this worker's end: it kills a worker that is no
            // longer alive as soon as the job returns. Killed here, under
            // the job, the end would race the job's own error and the job
            // could fail as a crash instead of with what the worker said.
            return ProcessError::Protocol {
                message,
                stderr: self.tail.lines(),
            };
        }
        // Kill first: a worker that saw its stdin close could exit by itself
        // in between, and the exit would not show that it was killed.
        self.group.signal(Signal::SIGKILL);
        self.stdin = None;
        self.wait_for_exit(REAP_WAIT).await;
        let mut err = err;
        if let ProcessError::Protocol { stderr, .. }
        | ProcessError::Crashed { stderr, .. }
        | ProcessError::NotReady { stderr, .. } = &mut err
        {
            *stderr = self.last_words().await;
        }
        if let ProcessError::NotReady { status, .. } = &mut err {
            *status = self.status_now();
        }
        err
    }

    /// The worker broke the protocol, as `message` says: the error, once
    /// the stream is broken (see [`break_stream`](Self::break_stream)).
    pub(super) async fn protocol_error(&mut self, message: String) -> ProcessError {
        let stderr = Vec::new();
        self.break_stream(ProcessError::Protocol { message, stderr })
            .await
    }

    /// The worker refused its warm-up, as `reason` says: the error, once
    /// the stream is broken.
    pub(super) async fn not_ready(&mut self, reason: String) -> ProcessError {
        let (status, stderr) = (None, Vec::new());
        self.break_stream(ProcessError::NotReady {
            reason,
            status,
            stderr,
        })
        .await
    }

    /// The worker closed its stdout (or a pipe failed): waits a moment for
    /// it to exit by itself, so that the error can say how it ended, then
    /// marks the stream broken, kills the group and waits (a bounded time)
    /// for the exit.
    pub(super) async fn break_after_eof(&mut self, what: &str) -> Option<ExitStatus> {
        event!(warn, self, "worker failed before responding: {what}");
        self.phase = Phase::Broken;
        self.stdin = None;
        if let Some(status) = self.wait_for_exit(EXIT_STATUS_WAIT).await {
            return Some(status);
        }
        self.group.signal(Signal::SIGKILL);
        self.wait_for_exit(REAP_WAIT).await
    }

    /// Waits at most `limit` for the exit; returns its status if it came.
    pub(super) async fn wait_for_exit(&self, limit: Duration) -> Option<ExitStatus> {
        let exit = tokio::time::timeout(limit, self.exit.exited()).await;
        exit.ok().map(|exit| exit.status)
    }

    /// The tail of the worker's stderr, once the stream has closed (or after
    /// a bounded wait): call it after the worker has been killed or reaped.
    pub(super) async fn last_words(&self) -> Vec<String> {
        let _ = tokio::time::timeout(LAST_WORDS_WAIT, self.tail.closed()).await;
        self.tail.lines()
    }

    pub(super) fn status_now(&self) -> Option<ExitStatus> {
        self.exit.try_exited().map(|exit| exit.status)
    }

    pub(super) fn crashed_now(&self) -> ProcessError {
        ProcessError::Crashed {
            status: self.status_now(),
            stderr: self.tail.lines(),
        }
    }
}
