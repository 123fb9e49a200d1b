//! `GET /events`: the pools' events as server-sent events.
//!
//! Each event's SSE name is the event's serialised name (`worker:ready`,
//! `worker:crashed`, `worker:rejected`, `sizing:step`, …) and its data one
//! JSON object with the pool's name and the event's fields:
//!
//! ```text
//! event: worker:ready
//! data: {"pool":"demo","event":"worker:ready","slot":0,"warmup_ms":1003.2}
//! ```
//!
//! A subscriber that falls more than [`EVENT_BUFFER`](crate::state::EVENT_BUFFER)
//! events behind gets `event: lagged` with `{"missed": n}` and goes on.
//! `?pool=NAME` keeps one pool's events.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures_util::Stream;
use kennel::Event;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::error::ApiError;
use crate::state::{AppState, PoolEvent};

/// How often an idle stream sends a keep-alive comment.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The JSON form of one pool event.
pub fn event_json(pool: &str, event: &Event) -> Value {
    let mut v = json!({ "pool": pool, "event": event.name() });
    let fields = match event {
        Event::Starting { slot } | Event::Respawned { slot } => json!({ "slot": slot }),
        Event::Ready { slot, warmup } => json!({ "slot": slot, "warmup_ms": ms(*warmup) }),
        Event::WarmupFailed { slot, message } => json!({ "slot": slot, "message": message }),
        Event::Exited { slot, exit, early } => json!({
            "slot": slot,
            "status": exit.status.to_string(),
            "ran_for_ms": ms(exit.ran_for),
            "early": early,
            "stderr": exit.last_words,
        }),
        Event::Crashed { slot, exit } => json!({
            "slot": slot,
            "status": exit.status.to_string(),
            "ran_for_ms": ms(exit.ran_for),
            "stderr": exit.last_words,
        }),
        Event::TimedOut { slot, after } => json!({ "slot": slot, "after_ms": ms(*after) }),
        Event::Evicted { slot, idle_for } => json!({ "slot": slot, "idle_for_ms": ms(*idle_for) }),
        Event::Retired { slot, reason } => json!({ "slot": slot, "reason": reason.as_str() }),
        Event::Backoff {
            slot,
            delay,
            early_exits,
        } => json!({ "slot": slot, "delay_ms": ms(*delay), "early_exits": early_exits }),
        Event::Rejected { reason } => json!({ "reason": reason.as_str() }),
        Event::SizingStep(step) => json!({
            "from": step.from,
            "tried": step.tried,
            "to": step.to,
            "verdict": format!("{:?}", step.verdict),
            "figures": step.figures,
        }),
        Event::Warning { message } => json!({ "message": message }),
        Event::Cancelled {
            slot,
            reason,
            outcome,
            took,
        } => json!({
            "slot": slot,
            "reason": reason.as_str(),
            "outcome": outcome.as_str(),
            "took_ms": ms(*took),
        }),
        _ => json!({ "slot": event.slot() }),
    };
    if let (Some(v), Value::Object(fields)) = (v.as_object_mut(), fields) {
        v.extend(fields);
    }
    v
}

/// `?pool=NAME`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EventsQuery {
    pool: Option<String>,
}

/// Server-sent events of every pool.
#[utoipa::path(
    get,
    path = "/events",
    tag = "operators",
    params(("pool" = Option<String>, Query, description = "keep one pool's events")),
    responses(
        (status = 200, description = "server-sent events: the SSE name is the event's (`worker:ready`, …), the data one JSON object with `pool`, `event` and its fields", content_type = "text/event-stream"),
        (status = 400, description = "a bad query string (`bad-request`)", body = crate::ops::openapi::ErrorBody),
        (status = 404, description = "no pool of this name (`no-such-pool`)", body = crate::ops::openapi::ErrorBody),
    )
)]
pub(crate) async fn events(
    State(state): State<AppState>,
    query: Result<Query<EventsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::BadRequest {
        message: e.body_text(),
    })?;
    if let Some(name) = &query.pool {
        state.registry().get(name)?;
    }
    let rx = state.subscribe();
    let shutdown = Box::pin(state.shutdown_signal());
    let stream = futures_util::stream::unfold(
        (rx, shutdown, query.pool),
        |(mut rx, mut shutdown, filter)| async move {
            loop {
                let next = tokio::select! {
                    biased;
                    () = &mut shutdown => return None,
                    r = rx.recv() => r,
                };
                let event = match next {
                    Ok(PoolEvent { pool, event }) => {
                        if filter.as_deref().is_some_and(|f| f != &*pool) {
                            continue;
                        }
                        SseEvent::default()
                            .event(event.name())
                            .data(event_json(&pool, &event).to_string())
                    }
                    Err(broadcast::error::RecvError::Lagged(n)) => SseEvent::default()
                        .event("lagged")
                        .data(json!({ "missed": n }).to_string()),
                    Err(broadcast::error::RecvError::Closed) => return None,
                };
                return Some((Ok(event), (rx, shutdown, filter)));
            }
        },
    );
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kennel::{Exit, ExitStatus};

    #[test]
    fn a_crashed_or_exited_worker_event_carries_its_last_words() {
        let exit = Exit {
            status: ExitStatus::Code(139),
            ran_for: Duration::from_millis(1500),
            last_words: vec!["CUDA error: out of memory".into()],
        };
        let crashed = event_json(
            "vision",
            &Event::Crashed {
                slot: 1,
                exit: exit.clone(),
            },
        );
        assert_eq!(
            crashed,
            json!({
                "pool": "vision",
                "event": "worker:crashed",
                "slot": 1,
                "status": "exited with code 139",
                "ran_for_ms": 1500.0,
                "stderr": ["CUDA error: out of memory"],
            })
        );
        let exited = event_json(
            "vision",
            &Event::Exited {
                slot: 1,
                exit,
                early: true,
            },
        );
        assert_eq!(exited["stderr"], json!(["CUDA error: out of memory"]));
    }
}
