//! Clients that hang up: a running job still finishes and its worker comes
//! back (unless the pool says `cancel_on_disconnect`); a queued job leaves
//! the queue.

use std::time::Duration;

use serde_json::json;

use crate::routed::{demo, demo_with, state_with};
use crate::{LIMIT, call, post, wait_lent};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_lets_its_running_job_finish() {
    let state = state_with(vec![demo("demo", 1)]).await;
    let router = kennel_server::app(state.clone());
    let (_, _, first) = call(&router, post("/pools/demo/jobs", &json!({}))).await;
    let client = tokio::spawn({
        let router = router.clone();
        async move { call(&router, post("/pools/demo/jobs", &json!({"sleep_ms": 300}))).await }
    });
    wait_lent(&state, "demo", 1).await;
    client.abort();
    // The job finishes and its worker comes back, alive: same process.
    wait_lent(&state, "demo", 0).await;
    let (_, _, next) = call(&router, post("/pools/demo/jobs", &json!({}))).await;
    assert_eq!(first["pid"], next["pid"]);
    assert_eq!(next["job"], 3);
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_cancel_on_disconnect_a_hang_up_cancels_the_running_job() {
    let pool = demo_with("demo", 1, "cancel_on_disconnect = true");
    let state = state_with(vec![pool]).await;
    let router = kennel_server::app(state.clone());
    let (_, _, first) = call(&router, post("/pools/demo/jobs", &json!({}))).await;
    let client = tokio::spawn({
        let router = router.clone();
        async move {
            call(
                &router,
                post("/pools/demo/jobs", &json!({"sleep_ms": 60_000})),
            )
            .await
        }
    });
    wait_lent(&state, "demo", 1).await;
    client.abort();
    // The demo worker reads no cancel lines: cancelled means killed, and
    // the next job runs on its replacement.
    wait_lent(&state, "demo", 0).await;
    let (_, _, next) = call(&router, post("/pools/demo/jobs", &json!({}))).await;
    assert_ne!(first["pid"], next["pid"], "{next}");
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_while_queued_leaves_the_queue() {
    let state = state_with(vec![demo("demo", 1)]).await;
    let router = kennel_server::app(state.clone());
    let busy = tokio::spawn({
        let router = router.clone();
        async move { call(&router, post("/pools/demo/jobs", &json!({"sleep_ms": 500}))).await }
    });
    wait_lent(&state, "demo", 1).await;
    let queued = tokio::spawn({
        let router = router.clone();
        async move { call(&router, post("/pools/demo/jobs", &json!({}))).await }
    });
    let pool = state.pool("demo").unwrap();
    tokio::time::timeout(LIMIT, async {
        while pool.stats().waiting != 1 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap();
    queued.abort();
    tokio::time::timeout(LIMIT, async {
        while pool.stats().waiting != 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the abandoned job stayed in the queue");
    let (_, _, done) = busy.await.unwrap();
    // Only the busy job ran on the worker.
    assert_eq!(done["job"], 1);
    state.close().await;
}
