//! Requests refused before any worker runs them: no pool at all (501), an
//! unknown pool, group or route (404), bad JSON (400), a body over the limit
//! (413), a closed pool (503).

use axum::body::Body;
use axum::http::{Method, StatusCode, header};
use kennel_server::AppState;
use serde_json::json;

use crate::routed::{demo, demo_with, start, state_with};
use crate::{assert_error, call, get, post, request};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_any_pool_jobs_answer_501() {
    let state = AppState::empty();
    let router = kennel_server::app(state.clone());
    for req in [
        post("/pools/demo/jobs", &json!({})),
        post("/groups/demo/jobs", &json!({})),
        get("/pools/demo/stats"),
        request(Method::PUT, "/pools/demo/config", "{}"),
    ] {
        let answer = call(&router, req).await;
        assert_error(&answer, StatusCode::NOT_IMPLEMENTED, "not-supported");
    }
    // The rest of the service still answers.
    let (status, _, body) = call(&router, get("/pools")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!({"pools": []}));
    let (status, _, _) = call(&router, get("/livez")).await;
    assert_eq!(status, StatusCode::OK);
    // With no pool there is nothing to serve: not ready.
    for probe in ["/readyz", "/healthz"] {
        let (status, _, body) = call(&router, get(probe)).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{probe}");
        assert_eq!(
            body,
            json!({"status": "unavailable", "pools": {}}),
            "{probe}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_pools_groups_and_routes_answer_404() {
    let state = state_with(vec![demo("demo", 1)]).await;
    let router = kennel_server::app(state.clone());
    let answer = call(&router, post("/pools/nope/jobs", &json!({}))).await;
    assert_error(&answer, StatusCode::NOT_FOUND, "no-such-pool");
    assert!(answer.2["message"].as_str().unwrap().contains("nope"));
    let answer = call(&router, get("/pools/nope/stats")).await;
    assert_error(&answer, StatusCode::NOT_FOUND, "no-such-pool");
    let answer = call(&router, request(Method::PUT, "/pools/nope/config", "{}")).await;
    assert_error(&answer, StatusCode::NOT_FOUND, "no-such-pool");
    let answer = call(&router, post("/groups/nope/jobs", &json!({}))).await;
    assert_error(&answer, StatusCode::NOT_FOUND, "no-such-group");
    let answer = call(&router, get("/events?pool=nope")).await;
    assert_error(&answer, StatusCode::NOT_FOUND, "no-such-pool");
    let answer = call(&router, get("/nowhere")).await;
    assert_error(&answer, StatusCode::NOT_FOUND, "not-found");
    // Paths next to the job route's run no job.
    for path in ["/pools/demo/jobs/", "/pools//jobs", "/pools/demo/x/jobs"] {
        let (status, _, body) = call(&router, post(path, &json!({}))).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
    }
    let answer = call(&router, get("/pools/demo/jobs")).await;
    assert_error(
        &answer,
        StatusCode::METHOD_NOT_ALLOWED,
        "method-not-allowed",
    );
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_json_answers_400() {
    let pool = demo_with("demo", 1, "group = \"demo\"");
    let state = state_with(vec![pool]).await;
    let router = kennel_server::app(state.clone());
    for body in ["{bad", "", "   ", "[1,"] {
        let answer = call(&router, request(Method::POST, "/pools/demo/jobs", body)).await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "bad-json");
    }
    let answer = call(&router, request(Method::POST, "/groups/demo/jobs", "nope")).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "bad-json");
    let answer = call(&router, get("/events?colour=red")).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "bad-request");
    let mut form = request(Method::POST, "/pools/demo/jobs", "x");
    form.headers_mut()
        .insert(header::CONTENT_TYPE, "multipart/form-data".parse().unwrap());
    let answer = call(&router, form).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "bad-request");
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_answers_413() {
    let state = AppState::builder().body_limit(64).build();
    start(&state, vec![demo("demo", 1)]).await;
    let router = kennel_server::app(state.clone());
    let big = json!({ "text": "x".repeat(200) });
    let answer = call(&router, post("/pools/demo/jobs", &big)).await;
    assert_error(&answer, StatusCode::PAYLOAD_TOO_LARGE, "too-large");
    assert!(answer.2["message"].as_str().unwrap().contains("64"));
    // Without a Content-Length (a streamed body), the limit still holds.
    let stream = futures_util::stream::iter(
        (0..10).map(|_| Ok::<_, std::io::Error>(axum::body::Bytes::from(vec![b' '; 20]))),
    );
    let answer = call(
        &router,
        request(Method::POST, "/pools/demo/jobs", Body::from_stream(stream)),
    )
    .await;
    assert_error(&answer, StatusCode::PAYLOAD_TOO_LARGE, "too-large");
    let answer = call(
        &router,
        request(Method::PUT, "/pools/demo/config", big.to_string()),
    )
    .await;
    assert_error(&answer, StatusCode::PAYLOAD_TOO_LARGE, "too-large");
    // A small body still goes through.
    let (status, _, _) = call(&router, post("/pools/demo/jobs", &json!({"iterations": 1}))).await;
    assert_eq!(status, StatusCode::OK);
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_pool_answers_503() {
    let state = state_with(vec![demo("demo", 1), demo("other", 1)]).await;
    let router = kennel_server::app(state.clone());
    state.pool("demo").unwrap().close().await;
    let answer = call(&router, post("/pools/demo/jobs", &json!({}))).await;
    assert_error(&answer, StatusCode::SERVICE_UNAVAILABLE, "closed");
    assert!(answer.1.get(header::RETRY_AFTER).is_none());
    state.close().await;
}
