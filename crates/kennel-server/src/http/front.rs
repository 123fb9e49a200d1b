//! The one middleware every request passes, in this order: the access log
//! line begins, the request is counted and timed, the Host and Origin
//! guard may refuse it (403), then the bearer token (401), and only then
//! does its route run.
//!
//! One middleware, not four, and a tower service written out rather than
//! axum's `from_fn`: axum wraps every route in each layer, so each layer
//! costs every request a boxed service and a boxed future, and `from_fn`
//! boxes its own future and the rest of the stack again (`Next`).

use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::extract::Request;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures_util::future::Either;
use pin_project_lite::pin_project;
use tower::{Layer, Service};

use crate::error::ApiError;
use crate::logs::AccessLine;
use crate::metrics::Tracked;
use crate::state::AppState;

/// The routes that never ask for the bearer token: the probes.
const PROBES: [&str; 3] = ["/livez", "/readyz", "/healthz"];

/// The layer that puts [`Front`] before every route.
#[derive(Clone)]
pub(crate) struct FrontLayer(pub(crate) AppState);

impl<S> Layer<S> for FrontLayer {
    type Service = Front<S>;

    fn layer(&self, inner: S) -> Front<S> {
        Front::new(self.0.clone(), inner)
    }
}

/// Runs a request through the checks, then its route (`inner`); logs and
/// counts the answer whoever gave it.
#[derive(Clone)]
pub(crate) struct Front<S> {
    state: AppState,
    inner: S,
}

impl<S> Service<Request> for Front<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = FrontFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let route = crate::http::labels::route_label(&request);
        self.call_on(request, route)
    }
}

impl<S> Front<S> {
    /// Wraps `inner` (a route, or every route) in the checks, with the
    /// state of the service.
    pub(crate) fn new(state: AppState, inner: S) -> Self {
        Self { state, inner }
    }
}

impl<S> Front<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    /// [`call`](Service::call) for a request whose route is `route`.
    pub(crate) fn call_on(
        &mut self,
        request: Request,
        route: &'static str,
    ) -> FrontFuture<S::Future> {
        let started = Instant::now();
        let tracked = Tracked::start(&request, route, started);
        let line = AccessLine::start(&self.state, &request, route, started);
        let answer = match refusal(&self.state, &request) {
            Some(refused) => Either::Left(ready(Ok(refused))),
            None => Either::Right(self.inner.call(request)),
        };
        FrontFuture {
            answer,
            done: Some(Done {
                state: self.state.clone(),
                line,
                tracked,
            }),
        }
    }
}

/// What logs and counts the answer once it is there.
struct Done {
    state: AppState,
    line: Option<AccessLine>,
    tracked: Tracked,
}

pin_project! {
    /// The future of [`Front`]: the refusal or the route's answer, then
    /// the log line and the count. Dropped before the answer (the client
    /// hung up), it logs and counts nothing.
    pub(crate) struct FrontFuture<F> {
        #[pin]
        answer: Either<Ready<Result<Response, Infallible>>, F>,
        done: Option<Done>,
    }
}

impl<F> Future for FrontFuture<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let Ok(response) = std::task::ready!(this.answer.poll(cx));
        if let Some(Done {
            state,
            line,
            tracked,
        }) = this.done.take()
        {
            tracked.finish(&response, state.http_series());
            if let Some(line) = line {
                line.finish(&response);
            }
        }
        Poll::Ready(Ok(response))
    }
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
