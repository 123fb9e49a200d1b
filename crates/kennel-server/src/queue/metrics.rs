//! The metrics of one pool's queue, labelled `pool`: what this instance
//! fetched, acked, nak'd, terminated, and the in-progress acks it sent.
//! Per instance, as Prometheus labels each scrape target.

use metrics::{Counter, Gauge, counter, gauge};

/// The `reason` labels of `kennel_jetstream_naked_total`: the error kinds that
/// hand a message back, and `draining`.
pub(crate) const NAK_REASONS: &[&str] = &[
    "crashed",
    "warmup-failed",
    "protocol",
    "unavailable",
    "rejected",
    "closed",
    "draining",
    "store-unavailable",
    "other",
];

/// The `reason` labels of `kennel_jetstream_terminated_total`.
pub(crate) const TERM_REASONS: &[&str] = &[
    "max-deliver",
    "timeout",
    "bad-json",
    "bad-key",
    "too-large",
    "reply-too-large",
];

/// One pool's queue counters and gauges. Handles are made once, so a
/// message costs no label lookup.
#[derive(Debug, Clone)]
pub(crate) struct QueueMetrics {
    pool: String,
    /// Messages received from the consumer.
    pub fetched: Counter,
    /// Of those, messages delivered before (to any instance).
    pub redelivered: Counter,
    /// Messages acked after their answer was published (counted before it
    /// is stored or published).
    pub acked: Counter,
    /// Messages whose job was over already (answered, cancelled, or failed
    /// `interrupted`): acked without running it again.
    pub deduplicated: Counter,
    /// In-progress acks sent while jobs ran.
    pub progress: Counter,
    /// Messages held now: received and not yet acked, nak'd or terminated.
    pub held: Gauge,
    /// Messages in the stream that no instance has been delivered yet, as
    /// the consumer last said.
    pub pending: Gauge,
    /// (pending + 1) × the mean job time / this instance's running slots.
    pub projected_wait: Gauge,
}

impl QueueMetrics {
    /// The handles of pool `pool`.
    pub(crate) fn new(pool: &str) -> Self {
        let p = pool.to_owned();
        Self {
            fetched: counter!("kennel_jetstream_fetched_total", "pool" => p.clone()),
            redelivered: counter!("kennel_jetstream_redelivered_total", "pool" => p.clone()),
            acked: counter!("kennel_jetstream_acked_total", "pool" => p.clone()),
            deduplicated: counter!("kennel_jetstream_deduplicated_total", "pool" => p.clone()),
            progress: counter!("kennel_jetstream_progress_total", "pool" => p.clone()),
            held: gauge!("kennel_jetstream_held", "pool" => p.clone()),
            pending: gauge!("kennel_jetstream_pending", "pool" => p.clone()),
            projected_wait: gauge!("kennel_jetstream_projected_wait_seconds", "pool" => p.clone()),
            pool: p,
        }
    }

    /// Counts a nak. `reason` is one of [`NAK_REASONS`]; any other is
    /// counted as `other`, so that labels stay bounded.
    pub(crate) fn naked(&self, reason: &str) {
        let reason = bounded(NAK_REASONS, reason, "other");
        counter!("kennel_jetstream_naked_total", "pool" => self.pool.clone(), "reason" => reason)
            .increment(1);
    }

    /// Counts a term. `reason` is one of [`TERM_REASONS`] (any other is
    /// counted as `max-deliver`).
    pub(crate) fn terminated(&self, reason: &str) {
        let reason = bounded(TERM_REASONS, reason, "max-deliver");
        counter!("kennel_jetstream_terminated_total", "pool" => self.pool.clone(), "reason" => reason)
            .increment(1);
    }
}

/// `reason` when it is one of `known`, else `other`: labels stay bounded.
fn bounded(known: &[&'static str], reason: &str, other: &'static str) -> &'static str {
    known
        .iter()
        .find(|r| **r == reason)
        .copied()
        .unwrap_or(other)
}
