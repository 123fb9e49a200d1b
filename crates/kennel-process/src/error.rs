//! The errors of this crate: one enum per worker type.

use std::io;

use kennel::ExitStatus;

/// The message of an error reply that carries none.
pub(crate) const NO_MESSAGE: &str = "worker returned an error with no message";

/// What went wrong with a [`Coprocess`](crate::Coprocess).
///
/// After [`Protocol`](Self::Protocol), [`Crashed`](Self::Crashed) or
/// [`NotReady`](Self::NotReady) the stream can no longer be trusted: the
/// process group was killed and reaped (waited for up to a second), so
/// [`Coprocess::exited`](crate::Coprocess::exited) has resolved, and every
/// later request fails at once with `Crashed`. After the others the worker
/// stays usable ([`worker_is_usable`](Self::worker_is_usable)).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProcessError {
    /// The program could not be started.
    #[error("cannot run `{program}`: {source}")]
    Spawn {
        /// The program, as given in the argv.
        program: String,
        /// Why the operating system refused.
        #[source]
        source: io::Error,
    },
    /// The worker replied `{"error":true,"message":"…"}` (JSON lines) or
    /// with a JSON-RPC error object: a failure it reports itself.
    #[error("worker reported an error: {message}")]
    Worker {
        /// The worker's message, or "worker returned an error with no
        /// message".
        message: String,
        /// The error's other fields as the worker wrote them: in JSON lines
        /// every key but `error` and `message` (`{"status":422,
        /// "code":"too_long"}`); in JSON-RPC the fields of its `data` (or
        /// `{"data": …}` when `data` is not an object).
        fields: serde_json::Map<String, serde_json::Value>,
        /// The JSON-RPC error's `code` (-32000 and the like); `None` in JSON
        /// lines.
        rpc_code: Option<i64>,
    },
    /// The job cannot be sent in this framing: in JSON-RPC without a pool
    /// method, a job must be `{"method": "…", "params": …}`. Nothing was
    /// sent.
    #[error("the job is not a method call: {message}")]
    NotACall {
        /// What is wrong with it.
        message: String,
    },
    /// The worker broke the protocol (see
    /// [Bad output](crate::Coprocess#bad-output)). It was killed.
    #[error("worker broke the protocol: {message}{}", last_line(stderr))]
    Protocol {
        /// What was wrong, with a short excerpt of the offending output.
        message: String,
        /// The worker's last words: the tail of its stderr (see
        /// [`StderrTail`](crate::StderrTail)).
        stderr: Vec<String>,
    },
    /// The worker ended (or closed its stdout) before it replied, or it had
    /// already been killed. The worker was killed if it still ran.
    #[error("worker failed before responding{}{}", status_note(status.as_ref()), last_line(stderr))]
    Crashed {
        /// How the process ended, when that was known at the time.
        status: Option<ExitStatus>,
        /// The worker's last words: the tail of its stderr.
        stderr: Vec<String>,
    },
    /// The worker ended, closed its stdout or reported an error before it
    /// wrote its ready line. The worker was killed if it still ran.
    #[error("the worker ended its warm-up: {reason}{}", last_line(stderr))]
    NotReady {
        /// What happened, e.g. "exited with code 3" or the message of the
        /// error line the worker wrote.
        reason: String,
        /// How the process ended, when that was known at the time.
        status: Option<ExitStatus>,
        /// The worker's last words: the tail of its stderr.
        stderr: Vec<String>,
    },
    /// The request could not be written as JSON (e.g. a map with keys that
    /// are not strings). Nothing was sent.
    #[error("request could not be encoded as JSON: {source}")]
    Encode {
        /// The serializer's error.
        #[source]
        source: serde_json::Error,
    },
    /// The reply was valid JSON but did not match the type asked for by
    /// [`Coprocess::call`](crate::Coprocess::call).
    #[error("reply does not match the expected type: {source}")]
    Decode {
        /// The deserializer's error.
        #[source]
        source: serde_json::Error,
    },
}

/// `; last stderr line: …`, or nothing when the worker wrote none.
fn last_line(stderr: &[String]) -> String {
    stderr
        .last()
        .map(|line| format!("; last stderr line: {line}"))
        .unwrap_or_default()
}

fn status_note(status: Option<&ExitStatus>) -> String {
    status.map(|s| format!(" ({s})")).unwrap_or_default()
}

impl ProcessError {
    /// The worker's last words carried by a failed warm-up, a crash or a
    /// protocol error: the tail of its stderr, oldest line first (at most
    /// [`STDERR_TAIL_LINES`](crate::STDERR_TAIL_LINES) lines and
    /// [`STDERR_TAIL_BYTES`](crate::STDERR_TAIL_BYTES) bytes). Empty for
    /// the other errors, and when the worker wrote nothing on stderr.
    pub fn stderr(&self) -> &[String] {
        match self {
            Self::Protocol { stderr, .. }
            | Self::Crashed { stderr, .. }
            | Self::NotReady { stderr, .. } => stderr,
            _ => &[],
        }
    }

    /// Whether the worker can take another request after this error.
    pub fn worker_is_usable(&self) -> bool {
        matches!(
            self,
            Self::Worker { .. } | Self::Encode { .. } | Self::Decode { .. } | Self::NotACall { .. }
        )
    }

    /// The HTTP status a worker asked for with its error's `status` field
    /// (400 to 599), if any.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Worker { fields, .. } => fields
                .get("status")
                .and_then(serde_json::Value::as_u64)
                .and_then(|s| u16::try_from(s).ok())
                .filter(|s| (400..=599).contains(s)),
            _ => None,
        }
    }
}

/// What went wrong with a [`ThreadWorker`](crate::ThreadWorker).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ThreadError {
    /// The thread could not be started.
    #[error("failed to start worker thread: {source}")]
    Spawn {
        /// Why the operating system refused.
        #[source]
        source: io::Error,
    },
    /// The job panicked. The worker has ended: its state may be half
    /// updated, so it is dropped.
    #[error("worker failed before responding: job panicked: {message}")]
    Crashed {
        /// The panic's message, or a note that it had none.
        message: String,
    },
    /// The worker's state could not be built: the init function returned an
    /// error or panicked.
    #[error("worker warm-up failed: {message}")]
    WarmupFailed {
        /// The init function's error or panic message.
        message: String,
    },
    /// The worker had already ended (killed, closed, crashed, or its warm-up
    /// failed) when the job was sent, or it was killed while the job ran.
    #[error("worker has ended: {status}")]
    Ended {
        /// How it ended.
        status: ExitStatus,
    },
}
