//! The operator routes through the router, with real worker processes (the
//! `kennel` binary's demo worker): a pool's live config read back in the
//! shape `PUT` takes, its workers' rows, the status page and its token
//! rule, and `/metrics` in a stable order with help for every family.

mod routed;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use kennel_server::{AppState, Config, app};
use serde_json::{Value, json};
use tower::ServiceExt;

use routed::{demo, demo_with, kennel_bin, start, state_with};

const LIMIT: Duration = Duration::from_secs(30);

fn request(method: Method, uri: &str, body: impl Into<Body>) -> Request<Body> {
    Request::builder()
        .method(method)
        .uri(uri)
        .body(body.into())
        .unwrap()
}

fn get(uri: &str) -> Request<Body> {
    request(Method::GET, uri, Body::empty())
}

async fn call_raw(router: &Router, req: Request<Body>) -> (StatusCode, HeaderMap, Vec<u8>) {
    let response = tokio::time::timeout(LIMIT, router.clone().oneshot(req))
        .await
        .expect("the request took too long")
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, headers, bytes.to_vec())
}

async fn call(router: &Router, req: Request<Body>) -> (StatusCode, Value) {
    let (status, _, bytes) = call_raw(router, req).await;
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, body)
}

/// Waits until every worker of `pool` is ready.
async fn wait_idle(state: &AppState, pool: &str, n: usize) {
    let pool = state.pool(pool).unwrap();
    tokio::time::timeout(LIMIT, async {
        while pool.stats().idle != n {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the workers never became ready");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_config_answers_the_live_config_and_put_takes_it_back_unchanged() {
    let pool = demo_with(
        "demo",
        1,
        "group = \"g\"\neviction = { kind = \"idle-timeout\", after = \"5m\", keep = 1 }\njob_timeout = \"7s\"",
    );
    let state = state_with(vec![pool]).await;
    let router = app(state.clone());

    let (status, config) = call(&router, get("/pools/demo/config")).await;
    assert_eq!(status, StatusCode::OK, "{config}");
    assert_eq!(config["group"], "g");
    assert_eq!(config["sizing"], json!({"kind": "fixed", "workers": 1}));
    assert_eq!(
        config["eviction"],
        json!({"kind": "idle-timeout", "after": "5m", "keep": 1})
    );
    assert_eq!(config["job_timeout"], "7s");
    // Every option is there, at its key.
    let options = serde_json::to_value(kennel::Options::default()).unwrap();
    for key in options.as_object().unwrap().keys() {
        assert!(config.get(key).is_some(), "{key} is missing: {config}");
    }

    // What GET prints, PUT takes, and nothing changes.
    let (status, answer) = call(
        &router,
        request(Method::PUT, "/pools/demo/config", config.to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let (_, again) = call(&router, get("/pools/demo/config")).await;
    assert_eq!(again, config);

    // A change shows in the next GET: options, sizing, eviction, group.
    let change = json!({
        "job_timeout": "9s",
        "max_waiting": 5,
        "sizing": {"kind": "fixed", "workers": 2},
        "eviction": {"kind": "none"},
        "group": null,
    });
    let (status, answer) = call(
        &router,
        request(Method::PUT, "/pools/demo/config", change.to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let (_, changed) = call(&router, get("/pools/demo/config")).await;
    assert_eq!(changed["job_timeout"], "9s");
    assert_eq!(changed["max_waiting"], 5);
    assert_eq!(changed["sizing"], json!({"kind": "fixed", "workers": 2}));
    assert_eq!(changed["eviction"], json!({"kind": "none"}));
    assert_eq!(changed["group"], Value::Null);
    // A refused change changes nothing.
    let (status, _) = call(
        &router,
        request(
            Method::PUT,
            "/pools/demo/config",
            r#"{"sizing":{"kind":"fixed","workers":0}}"#,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (_, after) = call(&router, get("/pools/demo/config")).await;
    assert_eq!(after, changed);
    state.close().await;
}

/// SERVICE.md shows the demo pool's `GET /pools/{name}/config` as the
/// program prints it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_md_shows_the_demo_pools_config_as_it_is_printed() {
    let state = AppState::builder().build();
    state
        .start_pools(&Config::demo(), kennel_bin())
        .await
        .unwrap();
    let router = app(state.clone());
    let (status, config) = call(&router, get("/pools/demo/config")).await;
    assert_eq!(status, StatusCode::OK);
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/SERVICE.md"
    ))
    .unwrap();
    let shown = doc
        .split("$ curl -s localhost:7878/pools/demo/config\n")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .expect("SERVICE.md shows GET /pools/demo/config");
    assert_eq!(shown, config.to_string(), "docs/SERVICE.md is out of date");
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_built_without_a_sizing_shows_the_fixed_size_it_runs() {
    let pool = demo("plain", 1).replace("sizing = { kind = \"fixed\", workers = 1 }\n", "");
    let state = state_with(vec![pool]).await;
    let router = app(state.clone());
    let (_, config) = call(&router, get("/pools/plain/config")).await;
    let capacity = state.pool("plain").unwrap().stats().capacity;
    assert_eq!(
        config["sizing"],
        json!({"kind": "fixed", "workers": capacity})
    );
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_and_workers_of_an_unknown_pool_answer_404_and_without_pools_501() {
    let state = state_with(vec![demo("demo", 1)]).await;
    let router = app(state.clone());
    for uri in ["/pools/nope/config", "/pools/nope/workers"] {
        let (status, body) = call(&router, get(uri)).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{uri}: {body}");
        assert_eq!(body["error"], "no-such-pool");
    }
    let (status, body) = call(&router, request(Method::DELETE, "/pools/demo/config", "")).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{body}");
    state.close().await;
    let empty = app(AppState::empty());
    for uri in ["/pools/x/config", "/pools/x/workers"] {
        let (status, body) = call(&empty, get(uri)).await;
        assert_eq!(status, StatusCode::NOT_IMPLEMENTED, "{uri}: {body}");
        assert_eq!(body["error"], "not-supported");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_answers_one_row_per_slot_with_its_process_and_jobs() {
    let state = state_with(vec![demo("demo", 2)]).await;
    wait_idle(&state, "demo", 2).await;
    let router = app(state.clone());
    let (status, _) = call(
        &router,
        request(Method::POST, "/pools/demo/jobs", r#"{"iterations": 10}"#),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = call(&router, get("/pools/demo/workers")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["pool"], "demo");
    let rows = body["workers"].as_array().unwrap();
    assert_eq!(
        rows.iter()
            .map(|w| w["slot"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [0, 1]
    );
    let mut pids = BTreeSet::new();
    for w in rows {
        assert_eq!(w["state"], "idle", "{body}");
        assert_eq!(w["generation"], 1, "{body}");
        let pid = w["pid"].as_u64().expect("a process worker has a pid");
        assert!(
            Path::new(&format!("/proc/{pid}")).exists(),
            "pid {pid} is not a live process"
        );
        pids.insert(pid);
        // The demo worker's ready line says its pid beside `ready`.
        assert_eq!(w["about"], json!({"pid": pid}), "{body}");
        let ready_after = w["ready_after_ms"].as_f64().unwrap();
        assert!(ready_after > 0.0, "{body}");
        assert!(
            w["running_for_ms"].as_f64().unwrap() >= ready_after,
            "{body}"
        );
    }
    assert_eq!(pids.len(), 2, "two workers, two processes: {body}");
    assert_eq!(
        rows.iter()
            .map(|w| w["jobs"].as_u64().unwrap())
            .sum::<u64>(),
        1
    );
    // The rows are the library's.
    let lib = state.pool("demo").unwrap().workers();
    assert_eq!(
        lib.iter().map(|r| r.pid.map(u64::from)).collect::<Vec<_>>(),
        rows.iter().map(|w| w["pid"].as_u64()).collect::<Vec<_>>()
    );
    state.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_is_served_without_the_token_and_its_data_asks_for_it() {
    let state = AppState::builder().token("s3cret").build();
    start(&state, vec![demo("demo", 1)]).await;
    let router = app(state.clone());
    let (status, headers, body) = call_raw(&router, get("/")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let csp = headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
    assert!(csp.contains("connect-src 'self'"), "{csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    let html = String::from_utf8(body).unwrap();
    assert_eq!(
        html,
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/status.html"))
    );
    // Nothing is fetched from elsewhere: no URL but SVG's namespace name.
    let rest = html.replace("\"http://www.w3.org/2000/svg\"", "");
    assert!(!rest.contains("://"), "the page names another site");
    assert!(!rest.contains(" src="), "the page loads a file");
    for uri in [
        "/pools",
        "/pools/demo/workers",
        "/pools/demo/config",
        "/events",
    ] {
        let (status, body) = call(&router, get(uri)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{uri}: {body}");
    }
    let mut with_token = get("/pools/demo/workers");
    with_token
        .headers_mut()
        .insert(header::AUTHORIZATION, "Bearer s3cret".parse().unwrap());
    assert_eq!(call(&router, with_token).await.0, StatusCode::OK);
    state.close().await;
}

/// The family names of a Prometheus text, in order, and whether each has
/// its `# HELP` and `# TYPE`.
fn families(text: &str) -> Vec<(String, bool, bool)> {
    let mut out: Vec<(String, bool, bool)> = Vec::new();
    for line in text.lines() {
        let (kind, rest) = if let Some(r) = line.strip_prefix("# HELP ") {
            ("help", r)
        } else if let Some(r) = line.strip_prefix("# TYPE ") {
            ("type", r)
        } else {
            continue;
        };
        let name = rest.split_whitespace().next().unwrap().to_owned();
        if out.last().is_none_or(|f| f.0 != name) {
            out.push((name, false, false));
        }
        let f = out.last_mut().unwrap();
        if kind == "help" {
            f.1 = true;
        } else {
            f.2 = true;
        }
    }
    out
}

async fn scrape(router: &Router) -> String {
    let (status, _, body) = call_raw(router, get("/metrics")).await;
    assert_eq!(status, StatusCode::OK);
    String::from_utf8(body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_family_has_help_and_type_and_the_families_come_in_name_order() {
    let state = state_with(vec![demo("metered-a", 1), demo("metered-b", 1)]).await;
    let router = app(state.clone());
    for pool in ["metered-a", "metered-b"] {
        let (status, _) = call(
            &router,
            request(Method::POST, &format!("/pools/{pool}/jobs"), "{}"),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
    }
    let first = scrape(&router).await;
    let found = families(&first);
    assert!(found.len() >= 10, "{first}");
    for (name, help, typ) in &found {
        assert!(*help, "{name} has no # HELP:\n{first}");
        assert!(*typ, "{name} has no # TYPE:\n{first}");
    }
    let names: Vec<&str> = found.iter().map(|f| f.0.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(names, sorted, "families out of order or split");
    // Each family's series come in the order of their labels.
    for block in first.split("\n\n") {
        let series: Vec<&str> = block
            .lines()
            .filter(|l| !l.starts_with('#') && !l.contains("_bucket{"))
            .collect();
        let counts: Vec<&str> = series
            .iter()
            .copied()
            .filter(|l| !l.contains("_sum{"))
            .collect();
        let mut ordered = counts.clone();
        ordered.sort_unstable();
        assert_eq!(counts, ordered, "series out of order in:\n{block}");
    }
    // Scrape after scrape, the same families in the same order.
    for _ in 0..5 {
        let again = scrape(&router).await;
        let again: Vec<String> = families(&again).into_iter().map(|f| f.0).collect();
        let again: Vec<&str> = again.iter().map(String::as_str).collect();
        assert!(
            names.iter().all(|n| again.contains(n)),
            "{names:?} vs {again:?}"
        );
        let mut s = again.clone();
        s.sort_unstable();
        assert_eq!(again, s);
    }
    state.close().await;
}
