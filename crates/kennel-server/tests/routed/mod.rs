//! The service's router in-process, over real worker processes (the
//! `kennel` binary's demo worker): the pools the router tests start.

#![allow(dead_code, unreachable_pub)]

use std::path::Path;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::body::Bytes;
use axum::http::Request;
use axum::http::{StatusCode, header};
use axum::response::Response;
use http_body_util::BodyExt;
use kennel_server::{AppState, Config, Source, install_metrics};
use tower::ServiceExt;

pub fn kennel_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_kennel"))
}

/// A demo pool of `workers` workers started at once, with a short warm-up,
/// as a `[[pool]]` table.
pub fn demo(name: &str, workers: usize) -> String {
    demo_with(name, workers, "")
}

/// As [`demo`], with more keys (`"group = \"g\""`, one a line).
pub fn demo_with(name: &str, workers: usize, keys: &str) -> String {
    format!(
        "[[pool]]\nname = \"{name}\"\nargv = [\"@kennel\", \"worker\", \"demo\", \"--warmup\", \"10ms\"]\nstartup = \"parallel\"\nsizing = {{ kind = \"fixed\", workers = {workers} }}\n{keys}\n"
    )
}

/// A config of the `[[pool]]` tables `pools`.
pub fn config_of(pools: &[String]) -> Config {
    Config::parse(&pools.concat(), &Source::inline("test.toml")).unwrap()
}

/// A service with a metrics recorder and `pools` started.
pub async fn state_with(pools: Vec<String>) -> AppState {
    let state = AppState::builder().metrics(install_metrics()).build();
    start(&state, pools).await;
    state
}

/// Starts `pools` in `state`.
pub async fn start(state: &AppState, pools: Vec<String>) {
    state
        .start_pools(&config_of(&pools), kennel_bin())
        .await
        .unwrap();
}

/// A response's status, content type (empty without one) and body, the
/// body read within `limit`.
///
/// # Cancel safety
///
/// Dropping the future drops the response and what is left of its body.
pub async fn read_answer(response: Response, limit: Duration) -> (StatusCode, String, Bytes) {
    let status = response.status();
    let kind = response
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = tokio::time::timeout(limit, response.into_body().collect())
        .await
        .expect("the body took too long")
        .unwrap()
        .to_bytes();
    (status, kind, body)
}

/// The sum of the `kennel_http_requests_total` samples of `route` and
/// `status` in the text of `/metrics`, read with `token` if one is given.
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
pub async fn requests_counted(
    router: &Router,
    route: &str,
    status: u16,
    token: Option<&str>,
) -> f64 {
    let mut scrape = Request::get("/metrics");
    if let Some(token) = token {
        scrape = scrape.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let response = router
        .clone()
        .oneshot(scrape.body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let route = format!("route=\"{route}\"");
    let status = format!("status=\"{status}\"");
    String::from_utf8(body.to_vec())
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("kennel_http_requests_total{"))
        .filter(|l| l.contains(&route) && l.contains(&status))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
