//! A job turned away by a full queue: 503 with a `Retry-After` of the pool's
//! projected wait, in whole seconds from 1 to 60.

use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use kennel_server::AppState;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::routed::{demo_with, state_with};
use crate::{assert_error, call, post, wait_lent};

type Answer = (StatusCode, HeaderMap, Value);

/// A job sent while the pool's one worker runs another (of 1.5 s) and no
/// job may wait: its answer, asserted to be a 503 `rejected`, and the busy
/// job's task.
async fn rejected_while_busy(state: &AppState, router: &Router) -> (Answer, JoinHandle<Answer>) {
    let busy = tokio::spawn({
        let router = router.clone();
        async move { call(&router, post("/pools/one/jobs", &json!({"sleep_ms": 1500}))).await }
    });
    wait_lent(state, "one", 1).await;
    let answer = call(router, post("/pools/one/jobs", &json!({}))).await;
    assert_error(&answer, StatusCode::SERVICE_UNAVAILABLE, "rejected");
    (answer, busy)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_job_answers_503_with_retry_after() {
    let pool = demo_with("one", 1, "max_waiting = 0");
    let state = state_with(vec![pool]).await;
    let router = kennel_server::app(state.clone());
    let (answer, busy) = rejected_while_busy(&state, &router).await;
    assert_eq!(answer.2["reason"], "queue-depth");
    assert_eq!(answer.1[header::RETRY_AFTER], "1");
    assert_eq!(busy.await.unwrap().0, StatusCode::OK);
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_jobs_retry_after_is_the_pools_projected_wait() {
    let pool = demo_with("one", 1, "max_waiting = 0");
    let state = state_with(vec![pool]).await;
    let router = kennel_server::app(state.clone());
    // One job of 2.2 s teaches the pool its job time.
    let (status, _, _) = call(&router, post("/pools/one/jobs", &json!({"sleep_ms": 2200}))).await;
    assert_eq!(status, StatusCode::OK);
    let (answer, busy) = rejected_while_busy(&state, &router).await;
    assert_eq!(
        answer.1[header::RETRY_AFTER],
        "3",
        "(0 waiting + 1) / 1 worker × 2.2 s, rounded up"
    );
    assert_eq!(busy.await.unwrap().0, StatusCode::OK);
    state.close().await;
}
