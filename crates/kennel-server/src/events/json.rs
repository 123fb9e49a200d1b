//! The JSON form of one pool event, as `/events` sends it.

use std::time::Duration;

use kennel::Event;
use serde_json::{Value, json};

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The JSON form of one pool event: the pool's name, the event's name, the
/// worker's `slot` and `pid` where there are some, and the event's fields.
pub(crate) fn event_json(pool: &str, event: &Event) -> Value {
    let mut v = json!({ "pool": pool, "event": event.name() });
    if let Some(slot) = event.slot() {
        v["slot"] = slot.into();
    }
    if let Some(pid) = event.pid() {
        v["pid"] = pid.into();
    }
    let fields = match event {
        Event::Ready { warmup, .. } => json!({ "warmup_ms": ms(*warmup) }),
        Event::WarmupFailed { message, .. }
        | Event::Warning { message }
        | Event::ProbeFailed { message, .. } => json!({ "message": message }),
        Event::Exited { exit, early, .. } => json!({
            "status": exit.status.to_string(),
            "ran_for_ms": ms(exit.ran_for),
            "early": early,
            "stderr": exit.last_words,
        }),
        Event::Crashed { exit, .. } => json!({
            "status": exit.status.to_string(),
            "ran_for_ms": ms(exit.ran_for),
            "stderr": exit.last_words,
        }),
        Event::Cancelled {
            reason,
            outcome,
            took,
            ..
        } => json!({
            "reason": reason.as_str(),
            "outcome": outcome.as_str(),
            "took_ms": ms(*took),
        }),
        Event::TimedOut { after, .. } => json!({ "after_ms": ms(*after) }),
        Event::Evicted { idle_for, .. } => json!({ "idle_for_ms": ms(*idle_for) }),
        Event::Loaded { key, took, .. } => json!({ "key": key.as_str(), "took_ms": ms(*took) }),
        Event::Unloaded { key, .. } => json!({ "key": key.as_str() }),
        Event::Retired { reason, .. }
        | Event::Surging { reason, .. }
        | Event::SurgeSkipped { reason, .. } => json!({ "reason": reason.as_str() }),
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
        Event::SizingTrial(trial) => json!({
            "from": trial.from,
            "tried": trial.tried,
            "figures": trial.figures,
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
        Event::Oversubscribed { usage, .. } => {
            serde_json::to_value(crate::ops::workers::ThreadsJson::from(usage)).unwrap_or_default()
        }
        _ => json!({}),
    };
    if let (Some(v), Value::Object(fields)) = (v.as_object_mut(), fields) {
        v.extend(fields);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use kennel::{Exit, ExitStatus};

    #[test]
    fn a_crashed_or_exited_worker_event_carries_its_pid_and_last_words() {
        let exit = Exit {
            status: ExitStatus::Code(139),
            ran_for: Duration::from_millis(1500),
            last_words: vec!["CUDA error: out of memory".into()],
        };
        let crashed = event_json(
            "vision",
            &Event::Crashed {
                slot: 1,
                pid: Some(4242),
                exit: exit.clone(),
            },
        );
        assert_eq!(
            crashed,
            json!({
                "pool": "vision",
                "event": "worker:crashed",
                "slot": 1,
                "pid": 4242,
                "status": "exited with code 139",
                "ran_for_ms": 1500.0,
                "stderr": ["CUDA error: out of memory"],
            })
        );
        let exited = event_json(
            "vision",
            &Event::Exited {
                slot: 1,
                pid: None,
                exit,
                early: true,
            },
        );
        assert_eq!(exited["stderr"], json!(["CUDA error: out of memory"]));
        assert!(exited.get("pid").is_none());
    }
}
