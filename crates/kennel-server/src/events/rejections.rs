//! Rejections, counted rather than sent one by one: under overload a pool
//! turns away thousands of jobs a second, and one event (or log line) for
//! each would cost more than the jobs. `/events` gets one `jobs:rejected`
//! event per pool and second with the counts by reason, and the log one
//! INFO line per pool every 10 s (the metric
//! `kennel_jobs_rejected_total` counts each).

use std::collections::BTreeMap;
use std::time::Duration;

use kennel::RejectReason;
use serde_json::{Value, json};
use tokio::time::Instant;

/// How often `/events` gets the counts of the rejections since the last.
pub(crate) const REJECTIONS_EVERY: Duration = Duration::from_secs(1);

/// How often the log gets them.
pub(crate) const REJECTIONS_LOGGED_EVERY: Duration = Duration::from_secs(10);

/// The rejections of one pool since the last report.
#[derive(Debug)]
pub(crate) struct Rejections {
    event: BTreeMap<&'static str, u64>,
    log: BTreeMap<&'static str, u64>,
    event_since: Instant,
    log_since: Instant,
}

impl Rejections {
    pub(crate) fn new() -> Self {
        let now = Instant::now();
        Self {
            event: BTreeMap::new(),
            log: BTreeMap::new(),
            event_since: now,
            log_since: now,
        }
    }

    pub(crate) fn count(&mut self, reason: RejectReason) {
        *self.event.entry(reason.as_str()).or_default() += 1;
        *self.log.entry(reason.as_str()).or_default() += 1;
    }

    /// The `jobs:rejected` data since the last one, if there were any.
    pub(crate) fn take_event(&mut self, pool: &str) -> Option<Value> {
        let now = Instant::now();
        let over = now - std::mem::replace(&mut self.event_since, now);
        if self.event.is_empty() {
            return None;
        }
        let reasons = std::mem::take(&mut self.event);
        let count: u64 = reasons.values().sum();
        Some(json!({
            "pool": pool,
            "event": "jobs:rejected",
            "count": count,
            "reasons": reasons,
            "over_ms": over.as_secs_f64() * 1000.0,
        }))
    }

    /// Logs the rejections since the last line, when it is time (or `now`).
    pub(crate) fn log(&mut self, pool: &str, now: bool) {
        let elapsed = self.log_since.elapsed();
        if self.log.is_empty() || (!now && elapsed < REJECTIONS_LOGGED_EVERY) {
            return;
        }
        let reasons = std::mem::take(&mut self.log);
        self.log_since = Instant::now();
        let count: u64 = reasons.values().sum();
        let by_reason = reasons
            .iter()
            .map(|(r, n)| format!("{r}={n}"))
            .collect::<Vec<_>>()
            .join(" ");
        tracing::info!(
            target: "kennel_server",
            pool,
            event = "jobs:rejected",
            count,
            reasons = %by_reason,
            over = ?elapsed,
            "jobs rejected"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn rejections_come_as_one_count_per_report() {
        let mut r = Rejections::new();
        assert_eq!(r.take_event("p"), None);
        for _ in 0..3 {
            r.count(RejectReason::QueueFull);
        }
        r.count(RejectReason::QueueWait);
        tokio::time::advance(REJECTIONS_EVERY).await;
        let v = r.take_event("p").unwrap();
        assert_eq!(v["count"], 4);
        assert_eq!(v["reasons"], json!({"queue-depth": 3, "queue-wait": 1}));
        assert_eq!(v["over_ms"], 1000.0);
        assert_eq!(r.take_event("p"), None);
    }
}
