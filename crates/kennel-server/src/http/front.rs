//! The one middleware every request passes, in this order: the access log
//! line begins, the request is counted and timed, the Host and Origin
//! guard may refuse it (403), then the bearer token (401), and only then
//! does its route run.
//!
//! One middleware, not four: axum wraps every route in each layer, so
//! each layer costs every request a boxed service and a boxed future.

use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::logs::AccessLine;
use crate::metrics::Tracked;
use crate::state::AppState;

/// The routes that never ask for the bearer token: the probes.
const PROBES: [&str; 3] = ["/livez", "/readyz", "/healthz"];

/// Runs `request` through the checks, then its route; logs and counts the
/// answer whoever gave it.
pub(crate) async fn front(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let line = AccessLine::start(&state, &request, started);
    let tracked = Tracked::start(&request, started);
    let response = match refusal(&state, &request) {
        Some(refused) => refused,
        None => next.run(request).await,
    };
    tracked.finish(&response, state.http_series());
    if let Some(line) = line {
        line.finish(&response);
    }
    response
}

/// The answer to a request the Host and Origin guard or the token
/// refuses, if it is refused.
fn refusal(state: &AppState, request: &Request) -> Option<Response> {
    if let Some(message) = state.host_policy().refusal(request.headers()) {
        tracing::debug!(target: "kennel_server", %message, "request refused");
        return Some(ApiError::Forbidden { message }.into_response());
    }
    (!authorized(state, request)).then(|| ApiError::Unauthorized.into_response())
}

/// Whether `request` may pass the bearer token check: no token is set,
/// it is a probe or the status page, or it carries the token.
fn authorized(state: &AppState, request: &Request) -> bool {
    let Some(token) = state.token() else {
        return true;
    };
    let path = request.uri().path();
    if PROBES.contains(&path) || path == crate::ops::page::PATH {
        return true;
    }
    request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer)
        .is_some_and(|given| constant_time_eq(given.as_bytes(), token.as_bytes()))
}

/// The token of an `Authorization` value of the `Bearer` scheme, whose
/// name is case-insensitive (RFC 9110, 11.1).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Compares without an early exit on the first differing byte.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
