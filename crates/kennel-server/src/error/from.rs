//! From the errors of the pool and of the worker to the service's answers.

use kennel_process::ProcessError;

use super::{ApiError, RETRY_AFTER_SECS};

/// `; last stderr line: …`, as [`ProcessError`]'s messages end, or nothing.
fn last_line(stderr: &[String]) -> String {
    stderr
        .last()
        .map(|line| format!("; last stderr line: {line}"))
        .unwrap_or_default()
}

/// Whole seconds, rounded up, at least 1.
pub(super) fn whole_secs(d: std::time::Duration) -> u64 {
    (d.as_secs() + u64::from(d.subsec_nanos() > 0)).max(1)
}

/// The answer to a pool's error, with the last words of the worker it is
/// about when the error does not carry them itself: the worker that
/// crashed under the job or failed its warm-up (a pool that saw the end
/// first has only its exit status), or the worker whose start failed last
/// (a broken pool's error has only its message). Other errors, and errors
/// that carry their own, are answered as [`From`] does.
pub(crate) fn with_last_words(error: kennel::Error, words: Vec<String>) -> ApiError {
    let mut answer = ApiError::from(error);
    if let ApiError::Crashed { message, stderr }
    | ApiError::WarmupFailed { message, stderr }
    | ApiError::Unavailable {
        last_failure: message,
        stderr,
        ..
    } = &mut answer
        && stderr.is_empty()
        && !words.is_empty()
    {
        if !message.ends_with(&last_line(&words)) {
            message.push_str(&last_line(&words));
        }
        *stderr = words;
    }
    answer
}

impl From<kennel::Error> for ApiError {
    fn from(e: kennel::Error) -> Self {
        match e {
            kennel::Error::Rejected { reason } => Self::Rejected {
                reason,
                retry_after: RETRY_AFTER_SECS,
            },
            kennel::Error::TenantLimit { retry_after, .. } => Self::TenantLimit {
                message: e.to_string(),
                retry_after: whole_secs(retry_after).min(super::MAX_RETRY_AFTER_SECS),
            },
            kennel::Error::LendTimeout { after } => Self::LendTimeout {
                after,
                retry_after: RETRY_AFTER_SECS,
            },
            kennel::Error::Timeout { after } => Self::Timeout { after },
            kennel::Error::WarmupFailed {
                message, source, ..
            } => Self::WarmupFailed {
                message,
                stderr: source
                    .as_deref()
                    .and_then(|s| s.downcast_ref::<ProcessError>())
                    .map(|e| e.stderr().to_vec())
                    .unwrap_or_default(),
            },
            kennel::Error::Crashed { exit, attempts } => {
                let mut message = "worker failed before responding".to_owned();
                if let Some(exit) = &exit {
                    message.push_str(&format!(" ({})", exit.status));
                }
                if attempts > 1 {
                    message.push_str(&format!(
                        " after {attempts} attempts, each on a worker that crashed"
                    ));
                }
                let stderr = exit.map(|e| e.last_words).unwrap_or_default();
                if !stderr.is_empty() {
                    message.push_str(&last_line(&stderr));
                }
                Self::Crashed { message, stderr }
            }
            kennel::Error::Unavailable {
                retry_after,
                last_failure,
            } => Self::Unavailable {
                last_failure,
                stderr: Vec::new(),
                retry_after: whole_secs(retry_after),
            },
            kennel::Error::LoadFailed { key, message, .. } => Self::LoadFailed {
                message: format!("the worker could not load key {key:?}: {message}"),
            },
            kennel::Error::Closed => Self::Closed,
            kennel::Error::NoSuchPool { name } => Self::NoSuchPool { name },
            kennel::Error::NoMembers { group } => Self::NoMembers { group },
            kennel::Error::Config(e) => Self::BadConfig {
                message: e.to_string(),
            },
            other => Self::Internal {
                detail: other.to_string(),
            },
        }
    }
}

impl From<ProcessError> for ApiError {
    fn from(e: ProcessError) -> Self {
        let stderr = e.stderr().to_vec();
        let status = e.status();
        match e {
            ProcessError::Worker {
                message, fields, ..
            } => Self::Worker {
                message,
                status,
                fields,
            },
            ProcessError::NotACall { message } => Self::BadRequest {
                message: format!("the job is not a method call: {message}"),
            },
            // A coprocess on its own; in a pool a crash is the pool's
            // `kennel::Error::Crashed`, answered above.
            ProcessError::Crashed { .. } => Self::Crashed {
                message: e.to_string(),
                stderr,
            },
            ProcessError::Protocol { message, .. } => Self::Protocol {
                message: format!("{message}{}", last_line(&stderr)),
                stderr,
            },
            ProcessError::NotReady { .. } => Self::WarmupFailed {
                message: e.to_string(),
                stderr,
            },
            other => Self::Internal {
                detail: other.to_string(),
            },
        }
    }
}
