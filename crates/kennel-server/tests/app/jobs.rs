//! A job's answer: the worker's reply, a group's job going to a pool of the
//! group, and each way a job fails mapped to its status (504 past its
//! timeout; 502 for a crash, a worker that cannot start or one that breaks
//! the protocol; 500 with the worker's own error).

use axum::http::{StatusCode, header};
use serde_json::json;

use crate::routed::{demo, demo_with, state_with};
use crate::{assert_error, call, post, wait_lent};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_answers_the_workers_reply() {
    let state = state_with(vec![demo("demo", 1)]).await;
    let router = kennel_server::app(state.clone());
    let (status, headers, body) =
        call(&router, post("/pools/demo/jobs", &json!({"iterations": 5}))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(headers[header::CONTENT_TYPE], "application/json");
    assert_eq!(body["done"], true);
    assert_eq!(body["iterations"], 5);
    assert_eq!(body["slot"], 0);
    let want = 1.0 + 2f64.sqrt() + 3f64.sqrt() + 2.0;
    assert!(
        (body["value"].as_f64().unwrap() - want).abs() < 1e-9,
        "{body}"
    );
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_name_in_the_path_is_percent_decoded() {
    let state = state_with(vec![demo("demo", 1)]).await;
    let router = kennel_server::app(state.clone());
    let (status, _, body) = call(&router, post("/pools/d%65mo/jobs", &json!({}))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["done"], true);
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_past_its_timeout_answers_504() {
    let pool = demo_with("slow", 1, "job_timeout = \"300ms\"");
    let state = state_with(vec![pool]).await;
    let router = kennel_server::app(state.clone());
    let answer = call(
        &router,
        post("/pools/slow/jobs", &json!({"sleep_ms": 10_000})),
    )
    .await;
    assert_error(&answer, StatusCode::GATEWAY_TIMEOUT, "timeout");
    assert!(answer.2["message"].as_str().unwrap().contains("300ms"));
    // The worker was replaced: the next job runs.
    let (status, _, _) = call(&router, post("/pools/slow/jobs", &json!({}))).await;
    assert_eq!(status, StatusCode::OK);
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_worker_answers_502() {
    let state = state_with(vec![demo("demo", 1)]).await;
    let router = kennel_server::app(state.clone());
    let answer = call(&router, post("/pools/demo/jobs", &json!({"crash": true}))).await;
    assert_error(&answer, StatusCode::BAD_GATEWAY, "crashed");
    assert!(
        answer.2["message"]
            .as_str()
            .unwrap()
            .starts_with("worker failed before responding"),
        "{}",
        answer.2
    );
    let (status, _, _) = call(&router, post("/pools/demo/jobs", &json!({}))).await;
    assert_eq!(status, StatusCode::OK);
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_error_answers_500_with_its_message() {
    let state = state_with(vec![demo("demo", 1)]).await;
    let router = kennel_server::app(state.clone());
    let answer = call(
        &router,
        post("/pools/demo/jobs", &json!({"fail": "no such model"})),
    )
    .await;
    assert_error(&answer, StatusCode::INTERNAL_SERVER_ERROR, "worker-error");
    assert_eq!(answer.2["message"], "no such model");
    // The worker stays: the same process serves the next job.
    let (_, _, a) = call(&router, post("/pools/demo/jobs", &json!({}))).await;
    let (_, _, b) = call(&router, post("/pools/demo/jobs", &json!({}))).await;
    assert_eq!(a["pid"], b["pid"]);
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_cannot_start_answers_502() {
    let pool = "[[pool]]\nname = \"broken\"\nargv = [\"/nonexistent/kennel-worker\"]\nsizing = { kind = \"fixed\", workers = 1 }\n".to_owned();
    let early_exit = "[[pool]]\nname = \"early\"\nargv = [\"sh\", \"-c\", \"exit 3\"]\nsizing = { kind = \"fixed\", workers = 1 }\n".to_owned();
    let state = state_with(vec![pool, early_exit]).await;
    let router = kennel_server::app(state.clone());
    let answer = call(&router, post("/pools/broken/jobs", &json!({}))).await;
    assert_error(&answer, StatusCode::BAD_GATEWAY, "warmup-failed");
    let answer = call(&router, post("/pools/early/jobs", &json!({}))).await;
    assert_error(&answer, StatusCode::BAD_GATEWAY, "warmup-failed");
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_breaks_the_protocol_answers_502() {
    let script = r#"echo '{"ready":true}'; while read line; do echo 'this is not json'; done"#;
    let pool = format!(
        "[[pool]]\nname = \"garbled\"\nargv = [\"sh\", \"-c\", {script:?}]\nsizing = {{ kind = \"fixed\", workers = 1 }}\n"
    );
    let state = state_with(vec![pool]).await;
    let router = kennel_server::app(state.clone());
    let answer = call(&router, post("/pools/garbled/jobs", &json!({}))).await;
    assert_error(&answer, StatusCode::BAD_GATEWAY, "protocol");
    assert!(
        answer.2["message"].as_str().unwrap().contains("not JSON"),
        "{}",
        answer.2
    );
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_jobs_go_to_a_pool_of_the_group() {
    let a = demo_with("a", 1, "group = \"g\"");
    let b = demo_with("b", 1, "group = \"g\"");
    let state = state_with(vec![a, b, demo("c", 1)]).await;
    let router = kennel_server::app(state.clone());
    let (status, _, body) = call(&router, post("/groups/g/jobs", &json!({"iterations": 3}))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["iterations"], 3);
    // Both pools busy: the group cannot lend at once.
    let busy: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|p| {
            let router = router.clone();
            tokio::spawn(async move {
                call(
                    &router,
                    post(&format!("/pools/{p}/jobs"), &json!({"sleep_ms": 1500})),
                )
                .await
            })
        })
        .collect();
    wait_lent(&state, "a", 1).await;
    wait_lent(&state, "b", 1).await;
    let answer = call(&router, post("/groups/g/jobs", &json!({}))).await;
    assert_error(&answer, StatusCode::SERVICE_UNAVAILABLE, "no-members");
    assert_eq!(answer.1[header::RETRY_AFTER], "1");
    for b in busy {
        assert_eq!(b.await.unwrap().0, StatusCode::OK);
    }
    state.close().await;
}
