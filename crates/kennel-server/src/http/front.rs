//! What every request passes before its route, as two middlewares, in
//! this order: [`observe`] begins the access log line and times the
//! request; [`guard`] refuses with 403 what the Host and Origin guard
//! refuses, then with 401 a missing or wrong bearer token, then with 403 a
//! tenant's request to a route it may not use; only then does the route
//! run. `observe` counts and logs the answer whoever gave it, so
//! a refused request is counted and logged too.

use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::http::labels::{method_label, route_label};
use crate::state::AppState;
use crate::tenants::{Caller, constant_time_eq};

/// The longest path an access log line shows; longer ones are cut.
const ACCESS_PATH_CHARS: usize = 256;

/// The routes that never ask for the bearer token: the probes.
const PROBES: [&str; 3] = ["/livez", "/readyz", "/healthz"];

/// Logs the request (with the access log on) and counts it in
/// `kennel_http_requests_total` and `kennel_http_request_duration_seconds`
/// by method, matched route and status, each label from a closed set
/// ([`crate::http::labels`]). A request dropped before its answer (the
/// client hung up) is neither logged nor counted.
pub(crate) async fn observe(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let method = method_label(request.method());
    let route = route_label(&request);
    // With the access log on (target `kennel_server::access`): the method
    // and the path, cut to bounded lengths, logged once answered.
    let logged = state.access_log().then(|| {
        let method: String = request.method().as_str().chars().take(32).collect();
        let path: String = request
            .uri()
            .path()
            .chars()
            .take(ACCESS_PATH_CHARS)
            .collect();
        (method, path)
    });
    let response = next.run(request).await;
    let status = response.status().as_u16();
    let elapsed = started.elapsed();
    if let Some((method, path)) = logged {
        tracing::info!(
            target: "kennel_server::access",
            method = %method,
            path = %path,
            route = %route,
            status,
            millis = (elapsed.as_secs_f64() * 1e6).round() / 1e3,
            "request"
        );
    }
    metrics::histogram!(
        "kennel_http_request_duration_seconds",
        "method" => method,
        "route" => route.clone()
    )
    .record(elapsed.as_secs_f64());
    metrics::counter!(
        "kennel_http_requests_total",
        "method" => method,
        "route" => route,
        "status" => status.to_string()
    )
    .increment(1);
    response
}

/// Refuses what the Host and Origin guard refuses (403), then a request
/// without a token it knows (401), then a tenant's request to a route it
/// may not use (403); else runs the route, with its [`Caller`] in the
/// request's extensions.
pub(crate) async fn guard(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    if let Some(message) = state.host_policy().refusal(request.headers()) {
        tracing::debug!(target: "kennel_server", %message, "request refused");
        return ApiError::Forbidden { message }.into_response();
    }
    let Some(caller) = caller(&state, &request) else {
        return ApiError::Unauthorized.into_response();
    };
    let route = route_label(&request);
    if !caller.may(request.method(), &route) {
        return caller.refused(&route).into_response();
    }
    request.extensions_mut().insert(caller);
    next.run(request).await
}

/// Who sends `request`: anyone when no token is set, or for a probe or the
/// status page (or `/metrics` with `metrics_public`); else the caller its
/// bearer token names (the service's own token: every route), if any.
fn caller(state: &AppState, request: &Request) -> Option<Caller> {
    let callers = state.callers();
    if state.token().is_none() && callers.is_empty() {
        return Some(Caller::OPERATOR);
    }
    let path = request.uri().path();
    let metrics = path == "/metrics" && state.metrics_public();
    if PROBES.contains(&path) || path == crate::ops::page::PATH || metrics {
        return Some(Caller::OPERATOR);
    }
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer)?;
    let operator = state
        .token()
        .is_some_and(|token| constant_time_eq(given.as_bytes(), token.as_bytes()));
    if operator {
        return Some(Caller::OPERATOR);
    }
    callers.find(given).cloned()
}

/// The token of an `Authorization` value of the `Bearer` scheme, whose
/// name is case-insensitive (RFC 9110, 11.1).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}
