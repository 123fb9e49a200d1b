//! The axum integration for library users: a pool in your own router, and
//! 501 when the router has none.

use axum::body::Body;
use axum::extract::{FromRef, State};
use axum::http::{Request, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use http_body_util::BodyExt;
use kennel::{Fixed, Pool};
use kennel_process::{Coprocess, CoprocessSpec};
use kennel_server::{ApiError, PoolHandle, WorkerPool};
use serde_json::{Value, json};
use tower::ServiceExt;

fn demo_pool() -> Pool<Coprocess> {
    let spec = CoprocessSpec::new([
        env!("CARGO_BIN_EXE_kennel"),
        "worker",
        "demo",
        "--warmup",
        "10ms",
    ]);
    Pool::builder(move |_| {
        let spec = spec.clone();
        async move { spec.spawn() }
    })
    .name("embedded")
    .sizing(Fixed(1))
    .build()
    .unwrap()
}

/// A user's handler: both error layers go through `?`.
async fn heavy(
    WorkerPool(pool): WorkerPool<Coprocess>,
    Json(body): Json<Value>,
) -> Result<Json<Value>, ApiError> {
    let reply = pool
        .run(async |w: &mut Coprocess| w.request(&body).await)
        .await??;
    Ok(Json(reply))
}

async fn send(router: &Router, uri: &str, body: Value) -> (StatusCode, Value) {
    let response = router
        .clone()
        .oneshot(
            Request::post(uri)
                .header("content-type", "application/json")
                .body(Body::from(body.to_string()))
                .unwrap(),
        )
        .await
        .unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_with_a_pool_lends_its_workers() {
    let pool = demo_pool();
    let router = Router::new()
        .route("/heavy", post(heavy))
        .with_state(PoolHandle::new(pool.clone()));
    let (status, body) = send(&router, "/heavy", json!({"iterations": 4})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["done"], true);
    // The service's error mapping comes with `?`.
    let (status, body) = send(&router, "/heavy", json!({"fail": "nope"})).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(body, json!({"error": "worker-error", "message": "nope"}));
    let (status, body) = send(&router, "/heavy", json!({"crash": true})).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    assert_eq!(body["error"], "crashed");
    pool.close().await;
    let (status, body) = send(&router, "/heavy", json!({})).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["error"], "closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_without_a_pool_answers_501() {
    let router = Router::new()
        .route("/heavy", post(heavy))
        .with_state(PoolHandle::<Coprocess>::none());
    let (status, body) = send(&router, "/heavy", json!({})).await;
    assert_eq!(status, StatusCode::NOT_IMPLEMENTED);
    assert_eq!(
        body,
        json!({"error": "not-supported", "message": "no worker pool is configured"})
    );
}

/// A user's own state, with the pool as one of its parts.
#[derive(Clone)]
struct MyState {
    greeting: &'static str,
    workers: PoolHandle<Coprocess>,
}

impl FromRef<MyState> for PoolHandle<Coprocess> {
    fn from_ref(state: &MyState) -> Self {
        state.workers.clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_can_be_one_part_of_a_larger_state() {
    let pool = demo_pool();
    let router = Router::new()
        .route("/heavy", post(heavy))
        .route(
            "/hello",
            get(|State(s): State<MyState>| async move { s.greeting }),
        )
        .with_state(MyState {
            greeting: "hi",
            workers: pool.clone().into(),
        });
    let (status, body) = send(&router, "/heavy", json!({"iterations": 2})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["iterations"], 2);
    pool.close().await;
}
