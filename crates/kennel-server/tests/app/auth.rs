//! The bearer token: it guards every route but the probes, and a request
//! it (or the host guard) refuses is still counted in the metrics.

use axum::http::{StatusCode, header};
use kennel_server::AppState;
use serde_json::json;

use crate::routed::{demo, requests_counted, start};
use crate::{assert_error, call, get, post};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_metrics_public_a_scraper_reads_the_metrics_without_the_token() {
    let state = AppState::builder()
        .token("s3cret")
        .metrics_public(true)
        .build();
    start(&state, vec![demo("demo", 1)]).await;
    let router = kennel_server::app(state.clone());
    assert_eq!(call(&router, get("/metrics")).await.0, StatusCode::OK);
    // Every other route still asks for it.
    let answer = call(&router, get("/pools")).await;
    assert_error(&answer, StatusCode::UNAUTHORIZED, "unauthorized");
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bearer_token_guards_every_route_but_the_probes() {
    let state = AppState::builder().token("s3cret").build();
    start(&state, vec![demo("demo", 1)]).await;
    let router = kennel_server::app(state.clone());
    for uri in ["/pools", "/pools/demo/stats", "/metrics", "/events"] {
        let answer = call(&router, get(uri)).await;
        assert_error(&answer, StatusCode::UNAUTHORIZED, "unauthorized");
        assert_eq!(answer.1[header::WWW_AUTHENTICATE], "Bearer");
    }
    let answer = call(&router, post("/pools/demo/jobs", &json!({}))).await;
    assert_error(&answer, StatusCode::UNAUTHORIZED, "unauthorized");
    let mut wrong = post("/pools/demo/jobs", &json!({}));
    wrong
        .headers_mut()
        .insert(header::AUTHORIZATION, "Bearer s3cres".parse().unwrap());
    assert_error(
        &call(&router, wrong).await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    );
    let mut right = post("/pools/demo/jobs", &json!({}));
    right
        .headers_mut()
        .insert(header::AUTHORIZATION, "Bearer s3cret".parse().unwrap());
    assert_eq!(call(&router, right).await.0, StatusCode::OK);
    for probe in ["/livez", "/readyz", "/healthz"] {
        assert_eq!(call(&router, get(probe)).await.0, StatusCode::OK, "{probe}");
    }
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_refused_by_the_token_or_the_host_guard_is_still_counted() {
    let state = AppState::builder()
        .token("s3cret")
        .metrics(kennel_server::install_metrics())
        .build();
    start(&state, vec![demo("demo", 1)]).await;
    let router = kennel_server::app(state.clone());
    let route = "/pools/{name}/jobs";
    let (unauthorized, forbidden) = (
        requests_counted(&router, route, 401, Some("s3cret")).await,
        requests_counted(&router, route, 403, Some("s3cret")).await,
    );
    let answer = call(&router, post("/pools/demo/jobs", &json!({}))).await;
    assert_error(&answer, StatusCode::UNAUTHORIZED, "unauthorized");
    let mut foreign = post("/pools/demo/jobs", &json!({}));
    foreign
        .headers_mut()
        .insert(header::HOST, "evil.example".parse().unwrap());
    assert_eq!(call(&router, foreign).await.0, StatusCode::FORBIDDEN);
    // Counters only grow; other tests of this process may add to them.
    assert!(requests_counted(&router, route, 401, Some("s3cret")).await >= unauthorized + 1.0);
    assert!(requests_counted(&router, route, 403, Some("s3cret")).await >= forbidden + 1.0);
    state.close().await;
}
