//! Routing tests: every endpoint and every error mapping of docs/SERVICE.md,
//! through `Routes` (what `kennel serve` answers with) and
//! `tower::ServiceExt::oneshot`, with real worker processes (the
//! `kennel` binary's built-in demo worker, and small shell workers for protocol
//! errors).

mod routed;

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use kennel_server::AppState;
use kennel_server::config::{PoolConfig, SizingConfig};
use kennel_server::http::Routes;
use serde_json::{Value, json};
use tower::ServiceExt;

use routed::{demo, requests_counted, start, state_with};

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

async fn call(router: &Routes, req: Request<Body>) -> (StatusCode, HeaderMap, Value) {
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
    let pool = state.registry().get(pool).unwrap();
    tokio::time::timeout(LIMIT, async {
        while pool.stats().lent != lent {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the job never got a worker");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_answers_the_workers_reply() {
    let state = state_with(vec![demo("demo", 1)]).await;
    let router = Routes::new(state.clone());
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
async fn without_any_pool_jobs_answer_501() {
    let state = AppState::empty();
    let router = Routes::new(state.clone());
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
    let (status, _, _) = call(&router, get("/healthz")).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_pools_groups_and_routes_answer_404() {
    let state = state_with(vec![demo("demo", 1)]).await;
    let router = Routes::new(state.clone());
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
    let mut pool = demo("demo", 1);
    pool.group = Some("demo".into());
    let state = state_with(vec![pool]).await;
    let router = Routes::new(state.clone());
    for body in ["{bad", "", "   ", "[1,"] {
        let answer = call(&router, request(Method::POST, "/pools/demo/jobs", body)).await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "bad-json");
    }
    let answer = call(&router, request(Method::POST, "/groups/demo/jobs", "nope")).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "bad-json");
    let answer = call(&router, get("/events?colour=red")).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "bad-request");
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_answers_413() {
    let state = AppState::builder().body_limit(64).build();
    start(&state, vec![demo("demo", 1)]).await;
    let router = Routes::new(state.clone());
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
async fn a_rejected_job_answers_503_with_retry_after() {
    let mut pool = demo("one", 1);
    pool.options.max_waiting = Some(0);
    let state = state_with(vec![pool]).await;
    let router = Routes::new(state.clone());
    let busy = tokio::spawn({
        let router = router.clone();
        async move { call(&router, post("/pools/one/jobs", &json!({"sleep_ms": 1500}))).await }
    });
    wait_lent(&state, "one", 1).await;
    let answer = call(&router, post("/pools/one/jobs", &json!({}))).await;
    assert_error(&answer, StatusCode::SERVICE_UNAVAILABLE, "rejected");
    assert_eq!(answer.2["reason"], "queue-depth");
    assert_eq!(answer.1[header::RETRY_AFTER], "1");
    assert_eq!(busy.await.unwrap().0, StatusCode::OK);
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_jobs_retry_after_is_the_pools_projected_wait() {
    let mut pool = demo("one", 1);
    pool.options.max_waiting = Some(0);
    let state = state_with(vec![pool]).await;
    let router = Routes::new(state.clone());
    // One job of 2.2 s teaches the pool its job time.
    let (status, _, _) = call(&router, post("/pools/one/jobs", &json!({"sleep_ms": 2200}))).await;
    assert_eq!(status, StatusCode::OK);
    let busy = tokio::spawn({
        let router = router.clone();
        async move { call(&router, post("/pools/one/jobs", &json!({"sleep_ms": 1500}))).await }
    });
    wait_lent(&state, "one", 1).await;
    let answer = call(&router, post("/pools/one/jobs", &json!({}))).await;
    assert_error(&answer, StatusCode::SERVICE_UNAVAILABLE, "rejected");
    assert_eq!(
        answer.1[header::RETRY_AFTER],
        "3",
        "(0 waiting + 1) / 1 worker × 2.2 s, rounded up"
    );
    assert_eq!(busy.await.unwrap().0, StatusCode::OK);
    state.close().await;
}

#[test]
fn retry_after_is_the_projected_wait_in_whole_seconds_within_1_and_60() {
    use kennel::RejectReason;
    use kennel_server::{ApiError, MAX_RETRY_AFTER_SECS};
    let header_of = |wait: Option<Duration>| {
        let e = ApiError::Rejected {
            reason: RejectReason::QueueFull,
            retry_after: kennel_server::RETRY_AFTER_SECS,
        }
        .retry_after_projected(wait);
        let response = axum::response::IntoResponse::into_response(e);
        response.headers()[header::RETRY_AFTER]
            .to_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(header_of(None), "1");
    assert_eq!(header_of(Some(Duration::ZERO)), "1");
    assert_eq!(header_of(Some(Duration::from_millis(1))), "1");
    assert_eq!(header_of(Some(Duration::from_millis(2001))), "3");
    assert_eq!(header_of(Some(Duration::from_secs(2))), "2");
    assert_eq!(
        header_of(Some(Duration::from_secs(3600))),
        MAX_RETRY_AFTER_SECS.to_string()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_past_its_timeout_answers_504() {
    let mut pool = demo("slow", 1);
    pool.options.job_timeout = Some(Duration::from_millis(300));
    let state = state_with(vec![pool]).await;
    let router = Routes::new(state.clone());
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
    let router = Routes::new(state.clone());
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
    let router = Routes::new(state.clone());
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
async fn a_closed_pool_answers_503() {
    let state = state_with(vec![demo("demo", 1), demo("other", 1)]).await;
    let router = Routes::new(state.clone());
    state.registry().get("demo").unwrap().close().await;
    let answer = call(&router, post("/pools/demo/jobs", &json!({}))).await;
    assert_error(&answer, StatusCode::SERVICE_UNAVAILABLE, "closed");
    assert!(answer.1.get(header::RETRY_AFTER).is_none());
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_cannot_start_answers_502() {
    let mut pool = PoolConfig::new("broken", ["/nonexistent/kennel-worker"]);
    pool.sizing = Some(SizingConfig::Fixed { workers: 1 });
    let mut early_exit = PoolConfig::new("early", ["sh", "-c", "exit 3"]);
    early_exit.sizing = Some(SizingConfig::Fixed { workers: 1 });
    let state = state_with(vec![pool, early_exit]).await;
    let router = Routes::new(state.clone());
    let answer = call(&router, post("/pools/broken/jobs", &json!({}))).await;
    assert_error(&answer, StatusCode::BAD_GATEWAY, "warmup-failed");
    let answer = call(&router, post("/pools/early/jobs", &json!({}))).await;
    assert_error(&answer, StatusCode::BAD_GATEWAY, "warmup-failed");
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_breaks_the_protocol_answers_502() {
    let mut pool = PoolConfig::new(
        "garbled",
        [
            "sh",
            "-c",
            r#"echo '{"ready":true}'; while read line; do echo 'this is not json'; done"#,
        ],
    );
    pool.sizing = Some(SizingConfig::Fixed { workers: 1 });
    let state = state_with(vec![pool]).await;
    let router = Routes::new(state.clone());
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
async fn pools_and_stats_show_every_pool() {
    let mut grouped = demo("a", 2);
    grouped.group = Some("g".into());
    let state = state_with(vec![grouped, demo("b", 1)]).await;
    let router = Routes::new(state.clone());
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_and_its_alias_healthz_report_every_pool_and_livez_answers() {
    let state = state_with(vec![demo("a", 1), demo("b", 1)]).await;
    let router = Routes::new(state.clone());
    for probe in ["/readyz", "/healthz"] {
        let (status, _, body) = call(&router, get(probe)).await;
        assert_eq!(status, StatusCode::OK, "{probe}");
        assert_eq!(
            body,
            json!({"status": "ok", "pools": {"a": "ready", "b": "ready"}}),
            "{probe}"
        );
    }
    state.registry().get("b").unwrap().close().await;
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
async fn group_jobs_go_to_a_pool_of_the_group() {
    let mut a = demo("a", 1);
    a.group = Some("g".into());
    let mut b = demo("b", 1);
    b.group = Some("g".into());
    let state = state_with(vec![a, b, demo("c", 1)]).await;
    let router = Routes::new(state.clone());
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_config_changes_a_live_pool() {
    let state = state_with(vec![demo("demo", 1)]).await;
    let router = Routes::new(state.clone());
    let body = json!({
        "sizing": {"kind": "fixed", "workers": 2},
        "job_timeout": "5s",
        "eviction": {"kind": "idle-timeout", "after": "1m", "keep": 1},
        "group": "moved",
    });
    let (status, _, answer) = call(
        &router,
        request(Method::PUT, "/pools/demo/config", body.to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["pool"], "demo");
    let actions: Vec<&str> = answer["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        actions
            .iter()
            .any(|a| a.contains("size 1 -> 2") || a.contains("capacity")),
        "{actions:?}"
    );
    assert!(actions.iter().any(|a| a.contains("moved")), "{actions:?}");
    let (_, _, stats) = call(&router, get("/pools/demo/stats")).await;
    assert_eq!(stats["size"], 2);
    let (_, _, pools) = call(&router, get("/pools")).await;
    assert_eq!(pools["pools"][0]["group"], "moved");
    let (status, _, _) = call(&router, post("/groups/moved/jobs", &json!({}))).await;
    assert_eq!(status, StatusCode::OK);

    // An unknown key or a bad value is 400, naming the key.
    let answer = call(
        &router,
        request(Method::PUT, "/pools/demo/config", r#"{"name":"x"}"#),
    )
    .await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "bad-config");
    assert!(
        answer.2["message"].as_str().unwrap().contains("name"),
        "{}",
        answer.2
    );
    let answer = call(
        &router,
        request(Method::PUT, "/pools/demo/config", r#"{"job_timeout":"0s"}"#),
    )
    .await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "bad-config");
    assert!(
        answer.2["message"]
            .as_str()
            .unwrap()
            .contains("job_timeout")
    );
    let answer = call(&router, request(Method::PUT, "/pools/demo/config", "{oops")).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "bad-json");
    // Good JSON that is not an object is a bad config.
    let answer = call(&router, request(Method::PUT, "/pools/demo/config", "[1]")).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "bad-config");
    assert_eq!(
        answer.2["message"],
        "the body is an array (allowed: a JSON object of the keys to change, such as {\"job_timeout\": \"10s\"})"
    );
    state.close().await;
}

/// `max_surge` is read from the body, shown by `GET /pools/{name}/config`,
/// refused out of its range with the key named, and the stats count the
/// replacements warming above the capacity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_config_sets_max_surge_and_refuses_one_out_of_range() {
    let state = state_with(vec![demo("demo", 1)]).await;
    let router = Routes::new(state.clone());
    let (_, _, config) = call(&router, get("/pools/demo/config")).await;
    assert_eq!(config["max_surge"], 0);
    let (status, _, answer) = call(
        &router,
        request(Method::PUT, "/pools/demo/config", r#"{"max_surge":1}"#),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let (_, _, config) = call(&router, get("/pools/demo/config")).await;
    assert_eq!(config["max_surge"], 1);
    let answer = call(
        &router,
        request(Method::PUT, "/pools/demo/config", r#"{"max_surge":65}"#),
    )
    .await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "bad-config");
    let message = answer.2["message"].as_str().unwrap();
    assert!(
        message.contains("max_surge") && message.contains("0 to 64"),
        "{message}"
    );
    let (_, _, stats) = call(&router, get("/pools/demo/stats")).await;
    assert_eq!(stats["surging"], 0);
    state.close().await;
}

/// The body patches the live options: what it leaves out stays, `null`
/// sets an option back to its default, and an unchanged value is no action.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_config_is_a_merge_patch_of_the_live_options() {
    let state = state_with(vec![demo("demo", 1)]).await;
    let router = Routes::new(state.clone());
    let put = async |body: &str| {
        let (status, _, answer) = call(
            &router,
            request(Method::PUT, "/pools/demo/config", body.to_owned()),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        answer["actions"].clone()
    };
    assert_eq!(
        put(r#"{"job_timeout":"5s","max_waiting":3}"#).await,
        json!(["set job_timeout", "set max_waiting"])
    );
    assert_eq!(
        put(r#"{"max_waiting":null,"job_timeout":"5s"}"#).await,
        json!(["set max_waiting"])
    );
    let options = state.registry().get("demo").unwrap().options();
    assert_eq!(options.job_timeout, Some(Duration::from_secs(5)));
    assert_eq!(options.max_waiting, None);
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_prometheus_text() {
    let state = state_with(vec![demo("metered", 1)]).await;
    let router = Routes::new(state.clone());
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
    let router = Routes::new(state.clone());
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bearer_token_guards_every_route_but_the_probes() {
    let state = AppState::builder().token("s3cret").build();
    start(&state, vec![demo("demo", 1)]).await;
    let router = Routes::new(state.clone());
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
        .metrics(kennel_server::metrics::install())
        .build();
    start(&state, vec![demo("demo", 1)]).await;
    let router = Routes::new(state.clone());
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_lets_its_running_job_finish() {
    let state = state_with(vec![demo("demo", 1)]).await;
    let router = Routes::new(state.clone());
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
async fn a_client_that_hangs_up_while_queued_leaves_the_queue() {
    let state = state_with(vec![demo("demo", 1)]).await;
    let router = Routes::new(state.clone());
    let busy = tokio::spawn({
        let router = router.clone();
        async move { call(&router, post("/pools/demo/jobs", &json!({"sleep_ms": 500}))).await }
    });
    wait_lent(&state, "demo", 1).await;
    let queued = tokio::spawn({
        let router = router.clone();
        async move { call(&router, post("/pools/demo/jobs", &json!({}))).await }
    });
    let pool = state.registry().get("demo").unwrap();
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
