//! What becomes of a message once its job has an answer: acked (the answer
//! goes to the caller), delivered again after a delay (nak), or given up on
//! (term, the answer goes to the caller).

use std::time::Duration;

use crate::ApiError;

use super::config::QueueConfig;

/// What to do with a message whose job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Disposition {
    /// Publish the answer, then ack: the job is done (a reply, or the
    /// worker's own error).
    Ack,
    /// Do not answer; deliver the message again after this wait (to any
    /// instance).
    Nak {
        /// The wait.
        delay: Duration,
        /// Why, as the `reason` label of `kennel_jetstream_naked_total`.
        reason: &'static str,
    },
    /// Publish the answer, then terminate the message: JetStream never
    /// delivers it again.
    Term {
        /// Why, as the `reason` label of `kennel_jetstream_terminated_total`.
        reason: &'static str,
    },
}

/// The disposition of a job's answer on its `delivered`-th delivery.
///
/// - A reply or a worker-reported error (`worker-error`, or a key the
///   worker could not load, `load-failed`): ack.
/// - A job that ran past `job_timeout`: term (`timeout`); running it again
///   would hold another worker as long.
/// - A job that is not JSON, too large, whose key breaks a rule
///   (`bad-key`), or whose reply cannot be published whole: term, under
///   its error's kind.
/// - A worker that crashed, failed its warm-up or broke the protocol, a
///   broken pool (`unavailable`), a rejection, anything else: nak after
///   `nak_delay` doubled per delivery (a rejection or a broken pool: at
///   least their `Retry-After`); a pool that is closing: nak at once, for
///   another instance to take it. On the last delivery (`max_deliver`)
///   each of these becomes a term (`max-deliver`) and the caller gets the
///   error.
pub(crate) fn dispose(
    answer: Result<(), &ApiError>,
    delivered: u64,
    queue: &QueueConfig,
) -> Disposition {
    let Err(error) = answer else {
        return Disposition::Ack;
    };
    let delay = match error {
        ApiError::Worker { .. } | ApiError::LoadFailed { .. } => return Disposition::Ack,
        ApiError::Timeout { .. }
        | ApiError::BadJson { .. }
        | ApiError::BadKey { .. }
        | ApiError::TooLarge { .. }
        | ApiError::ReplyTooLarge { .. } => {
            return Disposition::Term {
                reason: error.kind(),
            };
        }
        ApiError::Closed => Duration::ZERO,
        ApiError::Rejected { retry_after, .. } | ApiError::Unavailable { retry_after, .. } => queue
            .nak_delay_after(delivered)
            .max(Duration::from_secs(*retry_after)),
        _ => queue.nak_delay_after(delivered),
    };
    if delivered >= u64::from(queue.max_deliver) {
        return Disposition::Term {
            reason: "max-deliver",
        };
    }
    Disposition::Nak {
        delay,
        reason: error.kind(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue() -> QueueConfig {
        QueueConfig::new("nats://127.0.0.1:4222", "S", "s")
    }

    fn crashed() -> ApiError {
        ApiError::Crashed {
            message: "worker failed before responding".into(),
            stderr: vec![],
        }
    }

    #[test]
    fn a_reply_a_worker_error_and_a_failed_load_are_acked() {
        assert_eq!(dispose(Ok(()), 1, &queue()), Disposition::Ack);
        let worker = ApiError::Worker {
            message: "no".into(),
            status: Some(422),
            fields: serde_json::Map::new(),
        };
        assert_eq!(dispose(Err(&worker), 5, &queue()), Disposition::Ack);
        let load = ApiError::LoadFailed {
            message: "no model".into(),
        };
        assert_eq!(dispose(Err(&load), 1, &queue()), Disposition::Ack);
    }

    #[test]
    fn a_crash_is_naked_with_a_doubling_delay_then_terminated_on_the_last_delivery() {
        let q = queue();
        let delays: Vec<Disposition> = (1..=5).map(|d| dispose(Err(&crashed()), d, &q)).collect();
        let nak = |s| Disposition::Nak {
            delay: Duration::from_secs(s),
            reason: "crashed",
        };
        assert_eq!(
            delays,
            [
                nak(1),
                nak(2),
                nak(4),
                nak(8),
                Disposition::Term {
                    reason: "max-deliver"
                }
            ]
        );
    }

    #[test]
    fn a_timeout_bad_json_and_a_bad_key_are_terminated_at_once() {
        let timeout = ApiError::Timeout {
            after: Duration::from_secs(1),
        };
        assert_eq!(
            dispose(Err(&timeout), 1, &queue()),
            Disposition::Term { reason: "timeout" }
        );
        let bad = ApiError::BadJson {
            message: "x".into(),
        };
        assert_eq!(
            dispose(Err(&bad), 1, &queue()),
            Disposition::Term { reason: "bad-json" }
        );
        let key = ApiError::BadKey {
            message: "x".into(),
        };
        assert_eq!(
            dispose(Err(&key), 1, &queue()),
            Disposition::Term { reason: "bad-key" }
        );
    }

    #[test]
    fn a_closing_pool_hands_the_message_back_at_once() {
        assert_eq!(
            dispose(Err(&ApiError::Closed), 1, &queue()),
            Disposition::Nak {
                delay: Duration::ZERO,
                reason: "closed"
            }
        );
    }

    #[test]
    fn a_broken_pool_waits_at_least_its_retry_after() {
        let broken = ApiError::Unavailable {
            last_failure: "exit 1".into(),
            stderr: vec![],
            retry_after: 8,
        };
        assert_eq!(
            dispose(Err(&broken), 1, &queue()),
            Disposition::Nak {
                delay: Duration::from_secs(8),
                reason: "unavailable"
            }
        );
    }
}
