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

mod arbitrary;
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
use serde_json::Value;
use tower::ServiceExt;

use arbitrary::{cases, reconfig_json, runtime};

const LIMIT: Duration = Duration::from_secs(20);

fn kennel_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_kennel"))
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
