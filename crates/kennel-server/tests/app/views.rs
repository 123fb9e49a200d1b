//! What the service shows of its pools: `/pools` and a pool's stats, the
//! probes (`/readyz`, its alias `/healthz`, `/livez`), `/metrics` as
//! Prometheus text and `/events` as a stream of the pools' events.

use axum::http::{StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::routed::{demo, demo_with, state_with};
use crate::{LIMIT, call, get, post};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pools_and_stats_show_every_pool() {
    let grouped = demo_with("a", 2, "group = \"g\"");
    let state = state_with(vec![grouped, demo("b", 1)]).await;
    let router = kennel_server::app(state.clone());
    let (status, _, body) = call(&router, get("/pools")).await;
    assert_eq!(status, StatusCode::OK);
    let pools = body["pools"].as_array().unwrap();
    assert_eq!(pools.len(), 2);
    assert_eq!(pools[0]["name"], "a");
    assert_eq!(pools[0]["group"], "g");
    assert_eq!(pools[0]["stats"]["capacity"], 2);
    assert_eq!(pools[1]["name"], "b");
    assert_eq!(pools[1]["group"], Value::Null);
    let (status, _, stats) = call(&router, get("/pools/a/stats")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(stats["pool"], "a");
    for key in [
        "starting", "idle", "lent", "waiting", "capacity", "size", "kept",
    ] {
        assert!(stats[key].is_u64(), "{key} in {stats}");
    }
    assert_eq!(stats["size"], 2);
    assert_eq!(stats["healthy"], true);
    state.close().await;
}

/// Waits until pool `name` of `state` had its first ready worker (its
/// `worker:ready` event), within `LIMIT`.
async fn first_ready(state: &kennel_server::AppState, name: &str) {
    let pool = state.pool(name).unwrap();
    let mut events = pool.events();
    let ready = async {
        while pool.is_warming() {
            match events.recv().await {
                Ok(kennel::Event::Ready { .. }) => break,
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => panic!("{name}: {e}"),
            }
        }
    };
    tokio::time::timeout(LIMIT, ready)
        .await
        .unwrap_or_else(|_| panic!("{name} had no ready worker"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_is_503_until_each_eager_pool_has_its_first_ready_worker() {
    // Workers that take a second to warm up: an eager startup and an
    // on-demand pool with `min_idle` start theirs at once; a plain
    // on-demand pool starts none and is ready with none.
    let slow = |name: &str, keys: &str| {
        demo_with(name, 1, keys).replace("\"--warmup\", \"10ms\"", "\"--warmup\", \"1s\"")
    };
    let on_demand = "startup = \"on-demand\"";
    let eager = slow("eager", "");
    let spare = demo_on_demand(&slow("spare", "min_idle = 1"), on_demand);
    let lazy = demo_on_demand(&slow("lazy", ""), on_demand);
    let state = state_with(vec![eager, spare, lazy]).await;
    let router = kennel_server::app(state.clone());
    let (status, _, body) = call(&router, get("/readyz")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(
        body,
        json!({"status": "unavailable", "pools": {"eager": "warming", "spare": "warming", "lazy": "ready"}})
    );
    first_ready(&state, "eager").await;
    first_ready(&state, "spare").await;
    let (status, _, body) = call(&router, get("/readyz")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"status": "ok", "pools": {"eager": "ready", "spare": "ready", "lazy": "ready"}})
    );
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_and_its_alias_healthz_report_every_pool_and_livez_answers() {
    let state = state_with(vec![demo("a", 1), demo("b", 1)]).await;
    let router = kennel_server::app(state.clone());
    first_ready(&state, "a").await;
    first_ready(&state, "b").await;
    for probe in ["/readyz", "/healthz"] {
        let (status, _, body) = call(&router, get(probe)).await;
        assert_eq!(status, StatusCode::OK, "{probe}");
        assert_eq!(
            body,
            json!({"status": "ok", "pools": {"a": "ready", "b": "ready"}}),
            "{probe}"
        );
    }
    state.pool("b").unwrap().close().await;
    let (status, _, body) = call(&router, get("/readyz")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        body,
        json!({"status": "unavailable", "pools": {"a": "ready", "b": "closed"}})
    );
    let (status, _, body) = call(&router, get("/livez")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!({"status": "ok"}));
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_prometheus_text() {
    let state = state_with(vec![demo("metered", 1)]).await;
    let router = kennel_server::app(state.clone());
    let (status, _, _) = call(&router, post("/pools/metered/jobs", &json!({}))).await;
    assert_eq!(status, StatusCode::OK);
    let response = router.clone().oneshot(get("/metrics")).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = String::from_utf8(
        response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
    .unwrap();
    assert!(text.contains("kennel_http_requests_total{"), "{text}");
    assert!(text.contains("route=\"/pools/{name}/jobs\""), "{text}");
    assert!(
        text.contains("kennel_jobs_total{pool=\"metered\"}"),
        "{text}"
    );
    assert!(
        text.contains("kennel_pool_healthy{pool=\"metered\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("kennel_http_request_duration_seconds_bucket"),
        "{text}"
    );
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        assert!(
            line.starts_with("kennel_"),
            "a metric outside kennel_: {line}"
        );
    }
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_stream_pool_events() {
    let state = state_with(vec![demo("watched", 1)]).await;
    let router = kennel_server::app(state.clone());
    let response = router
        .clone()
        .oneshot(get("/events?pool=watched"))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/event-stream"
    );
    let mut body = response.into_body();
    let crash = tokio::spawn({
        let router = router.clone();
        async move {
            call(
                &router,
                post("/pools/watched/jobs", &json!({"crash": true})),
            )
            .await
        }
    });
    // The worker's end is `worker:crashed` when the pool sees it during the
    // job, `worker:exited` when the job already returned; then a new worker
    // gets ready.
    let mut seen = String::new();
    let ended = |seen: &str| {
        seen.find("event: worker:crashed")
            .or_else(|| seen.find("event: worker:exited"))
    };
    tokio::time::timeout(LIMIT, async {
        while !ended(&seen).is_some_and(|at| seen[at..].contains("event: worker:ready")) {
            let frame = body.frame().await.expect("the stream ended").unwrap();
            if let Ok(data) = frame.into_data() {
                seen.push_str(&String::from_utf8_lossy(&data));
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("events not seen in: {seen}"));
    assert_eq!(crash.await.unwrap().0, StatusCode::BAD_GATEWAY);
    let data = seen[ended(&seen).unwrap()..]
        .lines()
        .nth(1)
        .and_then(|l| l.strip_prefix("data: "))
        .unwrap();
    let data: Value = serde_json::from_str(data).unwrap();
    assert_eq!(data["pool"], "watched");
    assert!(
        data["event"] == "worker:crashed" || data["event"] == "worker:exited",
        "{data}"
    );
    assert_eq!(data["slot"], 0);
    assert_eq!(data["status"], "exited with code 3");
    // Shutting down ends the stream.
    state.close().await;
    let end = tokio::time::timeout(LIMIT, async {
        loop {
            match body.frame().await {
                None => break,
                Some(_) => continue,
            }
        }
    })
    .await;
    assert!(end.is_ok(), "the stream did not end at shutdown");
}

/// `pool` (a demo `[[pool]]` table, started at once) with `startup` in
/// place of its own.
fn demo_on_demand(pool: &str, startup: &str) -> String {
    pool.replace("startup = \"parallel\"", startup)
}
