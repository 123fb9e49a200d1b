//! Hostile input to the service: arbitrary bytes to the routes never panic
//! and are answered with a clear error (a 4xx with a JSON body `{"error",
//! "message"}`; arbitrary TOML to the config parser:
//! `src/config/tests/hostile_text.rs`); a body over the limit is 413; a slow body, stalled
//! connections and a header flood do not stop other requests nor hold a
//! worker; a request without the right bearer token is 401.
//!
//! The jobs go to a pool of `cat` (started with no ready line), which
//! echoes each request line: any JSON body comes back as it was sent.
//! `PROPTEST_CASES=N` runs N cases of each property (default 128).

mod over_tcp;
// proptest keeps the cases it saw fail in
// `tests/proptest-regressions/<module>.txt`: in a test target with a
// `main.rs`, its default `SourceParallel` looks there, not beside the module.
mod route_input;

use std::path::Path;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use http_body_util::BodyExt;
use kennel_server::{AppState, install_metrics};
use kennel_server::{Config, Source};
use proptest::prelude::*;
use serde_json::{Value, json};
use tower::ServiceExt;

const LIMIT: Duration = Duration::from_secs(20);

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn kennel_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_kennel"))
}

/// A JSON object with the keys of `PUT /pools/{name}/config` and odd values.
fn reconfig_json() -> impl Strategy<Value = Value> {
    let value = prop_oneof![
        Just(Value::Null),
        Just(json!("0s")),
        Just(json!("1ms")),
        Just(json!("-5s")),
        Just(json!("3000000 days")),
        Just(json!("2s")),
        Just(json!(0)),
        Just(json!(-1)),
        Just(json!(1.5)),
        Just(json!(u64::MAX)),
        Just(json!({"kind": "fixed", "workers": 0})),
        Just(json!({"kind": "fixed", "workers": 3})),
        Just(json!({"kind": "fixed", "workers": 5000})),
        Just(json!({"kind": "resources", "memory_per_worker": "1B"})),
        Just(json!({"kind": "hill-climbing", "memory_per_worker": "1GiB"})),
        Just(json!({"kind": "gradient"})),
        Just(json!({"kind": "idle-timeout", "after": "1s", "keep": 1})),
        Just(json!({"kind": "idle-timeout", "after": "0s"})),
        Just(json!({"kind": "none"})),
        Just(json!("g")),
        Just(json!("bad group name!")),
        Just(json!([1, 2])),
        ".{0,10}".prop_map(Value::String),
    ];
    let key = prop_oneof![
        Just("sizing"),
        Just("eviction"),
        Just("job_timeout"),
        Just("warmup_timeout"),
        Just("max_waiting"),
        Just("max_queue_wait"),
        Just("max_lifetime"),
        Just("max_lifetime_jitter"),
        Just("auto_grow_threshold"),
        Just("job_grace"),
        Just("group"),
        Just("name"),
        Just("argv"),
        Just("unknown"),
    ];
    prop::collection::btree_map(key, value, 0..4)
        .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
}

/// A pool of `cat`: no warm-up line, each request line comes back.
fn cat_pool(name: &str, workers: usize) -> Config {
    let text = format!(
        "[[pool]]\nname = \"{name}\"\nargv = [\"cat\"]\nready = \"immediate\"\nstartup = \"on-demand\"\nsizing = {{ kind = \"fixed\", workers = {workers} }}\ngroup = \"g\"\n"
    );
    Config::parse(&text, &Source::inline("test.toml")).unwrap()
}

async fn state_with(builder: kennel_server::AppStateBuilder) -> AppState {
    let state = builder.metrics(install_metrics()).build();
    let config = cat_pool("echo", 2);
    state
        .start_pools(&config, kennel_bin())
        .await
        .expect("pools");
    state
}

async fn call(router: &Router, req: Request<Body>) -> (StatusCode, HeaderMap, Vec<u8>) {
    let response = tokio::time::timeout(LIMIT, router.clone().oneshot(req))
        .await
        .expect("the request took too long")
        .expect("infallible");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = tokio::time::timeout(LIMIT, response.into_body().collect())
        .await
        .expect("the body took too long")
        .expect("a body")
        .to_bytes()
        .to_vec();
    (status, headers, bytes)
}

/// Asserts an error answer: a JSON object with `error` and `message`.
fn assert_json_error(status: StatusCode, body: &[u8]) -> Value {
    let v: Value = serde_json::from_slice(body).unwrap_or_else(|e| {
        panic!(
            "{status}: the body is not JSON ({e}): {}",
            String::from_utf8_lossy(body)
        )
    });
    assert!(v["error"].is_string(), "{status}: {v}");
    assert!(
        v["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{status}: {v}"
    );
    v
}
