//! The transport's rules: the versions and headers, its refusals, the
//! pool and session a message names, and how an answer goes out (an SSE
//! stream, or the response alone as JSON).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use kennel::Pool;
use kennel_process::Coprocess;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::McpConfig;
use super::session::Session;
use crate::error::ApiError;
use crate::state::AppState;

/// The protocol versions of the handshake the gateway speaks, newest
/// first: a client that asks for another is answered with the newest.
pub(crate) const PROTOCOL_VERSIONS: [&str; 4] =
    ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// How often a quiet stream gets a keep-alive comment.
const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// The header that names a session.
pub(super) const SESSION_HEADER: &str = "mcp-session-id";

/// The header that names the protocol version after `initialize`.
const VERSION_HEADER: &str = "mcp-protocol-version";

/// An error of the transport: `status`, with a JSON-RPC error body.
pub(super) fn refuse(status: StatusCode, code: i64, message: impl Into<String>) -> Response {
    let body =
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message.into()}});
    (status, Json(body)).into_response()
}

/// kennel's own error (a pool's, the body's) as the transport's: its
/// status and `Retry-After`, a JSON-RPC error body with its message.
pub(super) fn refuse_api(error: ApiError) -> Response {
    let message = error.message();
    let (mut parts, _) = error.into_response().into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": message}});
    Response::from_parts(parts, Json(body).into_response().into_body())
}

/// The pool `name` and its `[pool.mcp]`, if it serves MCP.
pub(super) fn served(
    state: &AppState,
    name: &str,
) -> Result<(Pool<Coprocess>, McpConfig), Box<Response>> {
    let pool = crate::jobs::pool_named(state, name).map_err(|e| Box::new(refuse_api(e)))?;
    let config = state
        .pools()
        .with(name, |e| e.config.as_ref().and_then(|c| c.serves_mcp()))
        .flatten();
    match config {
        Some(config) => Ok((pool, config)),
        None => Err(Box::new(refuse(
            StatusCode::NOT_FOUND,
            -32601,
            format!(
                "pool {name:?} does not serve MCP (allowed: a pool with protocol = \"json-rpc\" and mcp = {{ … }})"
            ),
        ))),
    }
}

/// The session a request names, on pool `name` (which must serve MCP).
pub(super) fn session_of(
    state: &AppState,
    name: &str,
    headers: &HeaderMap,
    caller: &crate::tenants::Caller,
) -> Result<Arc<Session>, Box<Response>> {
    served(state, name)?;
    let Some(id) = headers.get(SESSION_HEADER) else {
        return Err(Box::new(refuse(
            StatusCode::BAD_REQUEST,
            -32600,
            "Mcp-Session-Id is missing: send initialize first",
        )));
    };
    id.to_str()
        .ok()
        .and_then(|id| state.mcp().get(id))
        // Another caller's session is no session of this one's.
        .filter(|s| s.pool == name && s.caller.tenant == caller.tenant)
        .ok_or_else(|| {
            Box::new(refuse(
                StatusCode::NOT_FOUND,
                -32001,
                "no such session (it ended): send initialize again",
            ))
        })
}

/// Whether the client accepts an SSE stream.
pub(super) fn streams(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("text/event-stream"))
        })
}

/// A `MCP-Protocol-Version` the gateway does not speak: 400.
pub(super) fn bad_version(headers: &HeaderMap) -> Option<Response> {
    let version = headers.get(VERSION_HEADER)?;
    let known = version
        .to_str()
        .is_ok_and(|v| PROTOCOL_VERSIONS.contains(&v));
    (!known).then(|| {
        refuse(
            StatusCode::BAD_REQUEST,
            -32600,
            format!(
                "MCP-Protocol-Version is not one this server speaks (allowed: {})",
                PROTOCOL_VERSIONS.join(", ")
            ),
        )
    })
}

/// A receiver with `message` alone in it.
pub(super) fn one(message: Value) -> mpsc::Receiver<Value> {
    let (tx, rx) = mpsc::channel(1);
    let _ = tx.try_send(message);
    rx
}

/// The answer to a request: every message from `rx` as an SSE `message`
/// event until it closes, or without `sse` the response alone as JSON (202
/// when none came: the request was cancelled).
pub(super) async fn answer(sse: bool, mut rx: mpsc::Receiver<Value>) -> Response {
    if sse {
        let events = stream::unfold(rx, |mut rx| async move {
            let message = rx.recv().await?;
            let event = Event::default().event("message").data(message.to_string());
            Some((Ok::<_, Infallible>(event), rx))
        });
        // A comment now and then: a client that is gone is found by the
        // write that fails.
        let keep_alive = KeepAlive::new().interval(KEEP_ALIVE);
        return Sse::new(events).keep_alive(keep_alive).into_response();
    }
    while let Some(message) = rx.recv().await {
        if message.get("method").is_none() {
            return Json(message).into_response();
        }
    }
    StatusCode::ACCEPTED.into_response()
}
