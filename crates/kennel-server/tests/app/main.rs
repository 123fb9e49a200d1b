//! Routing tests: every endpoint and every error mapping of docs/SERVICE.md,
//! through `app(state)` (what `kennel serve` answers with) and
//! `tower::ServiceExt::oneshot`, with real worker processes (the
//! `kennel` binary's built-in demo worker, and small shell workers for protocol
//! errors).

#[path = "../routed/mod.rs"]
mod routed;

mod auth;
mod hang_ups;
mod jobs;
mod put_config;
mod refusals;
mod retry_after;
mod views;

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use kennel_server::AppState;
use serde_json::Value;
use tower::ServiceExt;

const LIMIT: Duration = Duration::from_secs(30);

fn request(method: Method, uri: &str, body: impl Into<Body>) -> Request<Body> {
    Request::builder()
        .method(method)
        .uri(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body.into())
        .unwrap()
}

fn post(uri: &str, body: &Value) -> Request<Body> {
    request(Method::POST, uri, body.to_string())
}

fn get(uri: &str) -> Request<Body> {
    request(Method::GET, uri, Body::empty())
}

async fn call(router: &Router, req: Request<Body>) -> (StatusCode, HeaderMap, Value) {
    let response = tokio::time::timeout(LIMIT, router.clone().oneshot(req))
        .await
        .expect("the request took too long")
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    };
    (status, headers, body)
}

/// Asserts an error answer: status, kind, and a message.
fn assert_error(answer: &(StatusCode, HeaderMap, Value), status: StatusCode, kind: &str) {
    let (s, _, body) = answer;
    assert_eq!(*s, status, "{body}");
    assert_eq!(body["error"], kind, "{body}");
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
}

/// Waits until `pool` has `lent` workers lent.
async fn wait_lent(state: &AppState, pool: &str, lent: usize) {
    let pool = state.pool(pool).unwrap();
    tokio::time::timeout(LIMIT, async {
        while pool.stats().lent != lent {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the job never got a worker");
}
