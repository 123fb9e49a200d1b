//! `GET /events`: the pools' events as server-sent events, one frame of
//! the [`EventHub`](crate::events::EventHub) each, with `?pool=` to keep
//! one pool and `Last-Event-ID` or `?since=` to replay (docs/SERVICE.md,
//! "Endpoints"). A subscriber that falls behind gets a last `lagged` event
//! and its stream ends.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderName, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde::Deserialize;
use tokio::sync::broadcast;

use crate::error::ApiError;
use crate::events::{KEEP_ALIVE, lagged};
use crate::metrics::Counted;
use crate::state::AppState;

/// How often an idle stream sends a keep-alive comment.
pub(crate) const KEEP_ALIVE_EVERY: Duration = Duration::from_secs(15);

/// `?pool=NAME&since=N`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EventsQuery {
    pool: Option<String>,
    since: Option<u64>,
}

/// Server-sent events of every pool.
#[utoipa::path(
    get,
    path = "/events",
    tag = "operators",
    params(
        ("pool" = Option<String>, Query, description = "keep one pool's events"),
        ("since" = Option<u64>, Query, description = "first replay the kept events after this id (0: all kept), each with its original `time`"),
        ("Last-Event-ID" = Option<u64>, Header, description = "as `since`, what `EventSource` sends when it reconnects"),
    ),
    responses(
        (status = 200, description = "server-sent events: the SSE id increases across the pools, the name is the event's (`worker:ready`, `jobs:rejected`, …), the data one JSON object with `pool`, `event`, `time` (when the service took the event, RFC 3339 UTC to the millisecond; a replay keeps it), `slot` and `pid` where there are some, and its fields; a subscriber too far behind gets a last `lagged`", content_type = "text/event-stream"),
        (status = 400, description = "a bad query string (`bad-request`)", body = crate::ops::openapi::ErrorBody),
        (status = 404, description = "no pool of this name (`no-such-pool`)", body = crate::ops::openapi::ErrorBody),
    )
)]
pub(crate) async fn events(
    State(state): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<EventsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::BadRequest {
        message: e.body_text(),
    })?;
    if let Some(name) = &query.pool {
        state.pools().get(name)?;
    }
    let last_id = headers
        .get("last-event-id")
        .map(|v| {
            v.to_str()
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .ok_or_else(|| ApiError::BadRequest {
                    message: "Last-Event-ID is not an event id (allowed: a whole number)".into(),
                })
        })
        .transpose()?;
    let since = last_id.or(query.since);
    // With `since`, the kept frames after that id (of the pool asked for,
    // if any) come first.
    let sub = state.events().subscribe(since, || {
        let pools = state.pools().lock();
        let asked = pools
            .iter()
            .filter(|(name, _)| query.pool.as_ref().is_none_or(|p| p == *name));
        asked.map(|(_, e)| e.events.clone()).collect()
    });
    let shutdown = Box::pin(state.shutdown_signal());
    let replay = sub.replay.into_iter().map(|f| f.sse.clone());
    let mut keep_alive = tokio::time::interval(KEEP_ALIVE_EVERY);
    keep_alive.reset();
    let live = (
        sub.live,
        shutdown,
        query.pool,
        keep_alive,
        Counted::new("kennel_events_subscribers"),
    );
    let live = futures_util::stream::unfold(Some(live), |s| async move {
        let (mut rx, mut shutdown, filter, mut keep_alive, subscriber) = s?;
        let bytes = loop {
            tokio::select! {
                biased;
                () = &mut shutdown => return None,
                r = rx.recv() => match r {
                    Ok(frame) if filter.as_deref().is_none_or(|f| f == &*frame.pool) => {
                        keep_alive.reset();
                        break frame.sse.clone();
                    }
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        metrics::counter!("kennel_events_lagged_total").increment(1);
                        tracing::debug!(target: "kennel_server", missed = n, "a slow /events subscriber is let go");
                        // The last frame: the stream ends after it.
                        return Some((lagged(n), None));
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
                _ = keep_alive.tick() => break Bytes::from_static(KEEP_ALIVE),
            }
        };
        Some((bytes, Some((rx, shutdown, filter, keep_alive, subscriber))))
    });
    let stream = futures_util::stream::iter(replay)
        .chain(live)
        .map(Ok::<_, Infallible>);
    Ok((
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
            (HeaderName::from_static("x-accel-buffering"), "no"),
        ],
        Body::from_stream(stream),
    )
        .into_response())
}
