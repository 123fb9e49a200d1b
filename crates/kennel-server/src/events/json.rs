//! The JSON form of one pool event, as `/events` sends it.

use std::time::Duration;

use kennel::Event;
use serde_json::{Value, json};

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The JSON form of one pool event: the pool's name, the event's name, the
/// worker's `slot` and `pid` where there are some, and the event's fields.
pub fn event_json(pool: &str, event: &Event) -> Value {
    let mut v = json!({ "pool": pool, "event": event.name() });
    if let Some(slot) = event.slot() {
        v["slot"] = slot.into();
    }
    if let Some(pid) = event.pid() {
        v["pid"] = pid.into();
    }
    let fields = match event {
        Event::Ready { warmup, .. } => json!({ "warmup_ms": ms(*warmup) }),
        Event::WarmupFailed { message, .. } | Event::Warning { message } => {
            json!({ "message": message })
        }
        Event::Exited { exit, early, .. } => json!({
            "status": exit.status.to_string(),
            "ran_for_ms": ms(exit.ran_for),
            "early": early,
        }),
        Event::Crashed { exit, .. } => json!({
            "status": exit.status.to_string(),
            "ran_for_ms": ms(exit.ran_for),
        }),
        Event::TimedOut { after, .. } => json!({ "after_ms": ms(*after) }),
        Event::Evicted { idle_for, .. } => json!({ "idle_for_ms": ms(*idle_for) }),
        Event::Retired { reason, .. } => json!({ "reason": reason.as_str() }),
        Event::Backoff {
            delay, early_exits, ..
        } => json!({ "delay_ms": ms(*delay), "early_exits": early_exits }),
        Event::Rejected { reason } => json!({ "reason": reason.as_str() }),
        Event::SizingStep(step) => json!({
            "from": step.from,
            "tried": step.tried,
            "to": step.to,
            "verdict": format!("{:?}", step.verdict),
            "figures": step.figures,
        }),
        Event::Broken {
            failed_starts,
            last_failure,
            retry_after,
        } => json!({
            "failed_starts": failed_starts,
            "last_failure": last_failure,
            "retry_after_ms": ms(*retry_after),
        }),
        Event::Recovered { failed_starts } => json!({ "failed_starts": failed_starts }),
        Event::Retried { attempt, exit } => json!({
            "attempt": attempt,
            "status": exit.as_ref().map(|e| e.status.to_string()),
        }),
        Event::SlowJob { running_for, .. } => json!({ "running_for_ms": ms(*running_for) }),
        _ => json!({}),
    };
    if let (Some(v), Value::Object(fields)) = (v.as_object_mut(), fields) {
        v.extend(fields);
    }
    v
}
