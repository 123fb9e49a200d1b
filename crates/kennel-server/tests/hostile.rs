//! Hostile input to the service: arbitrary TOML to the config parser and
//! arbitrary bytes to the routes never panic and are answered with a clear
//! error (a `ConfigError` naming the file; a 4xx with a JSON body `{"error",
//! "message"}`); a body over the limit is 413; a slow body, stalled
//! connections and a header flood do not stop other requests nor hold a
//! worker; a request without the right bearer token is 401.
//!
//! The jobs go to a pool of `cat` (started with no ready line), which
//! echoes each request line: any JSON body comes back as it was sent.
//! `PROPTEST_CASES=N` runs N cases of each property (default 256 for the
//! parser, 128 for the routes).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use kennel_server::config::{
    Config, PoolConfig, ReadyKind, ReconfigBody, SizingConfig, Source, StartupKind,
};
use kennel_server::pools::build_pool;
use kennel_server::{AppState, app, metrics};
use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
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

fn source() -> Source {
    Source {
        name: "hostile.toml".into(),
        dir: PathBuf::from(env!("CARGO_MANIFEST_DIR")),
    }
}

// ---------------------------------------------------------------------------
// The config parser
// ---------------------------------------------------------------------------

const FULL: &str = r#"[server]
listen = "127.0.0.1:9000"
body_limit = "2MiB"
token_env = "KENNEL_TOKEN"
shutdown_grace = "3s"

[[pool]]
name = "echo"
argv = ["cat"]
env = { A = "1", B = "two" }
cwd = "."
group = "g"
startup = "parallel"
sizing = { kind = "fixed", workers = 3 }
eviction = { kind = "idle-timeout", after = "5m", keep = 1 }
dispatch = "round-robin"
ready = "immediate"
job_timeout = "30s"
warmup_timeout = "1m"
max_waiting = 16
max_queue_wait = "2s"
max_lifetime = "1h"
max_lifetime_jitter = "5m"
auto_grow_threshold = 1
job_grace = "10s"
max_reply = "4MiB"

[[pool]]
name = "big"
argv = ["./model", "--size", "small"]
startup = "leader-first"
sizing = { kind = "resources", memory_per_worker = "2GiB" }

[[pool]]
name = "climb"
argv = ["./model"]
sizing = { kind = "hill-climbing", memory_per_worker = 1048576 }
"#;

/// Values a key might be given: right, wrong, extreme.
fn value_token() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("\"0s\"".to_owned()),
        Just("\"1ns\"".to_owned()),
        Just("\"-1s\"".to_owned()),
        Just("\"999999999999 days\"".to_owned()),
        Just("\"24.8 days\"".to_owned()),
        Just("\"2147483647ms\"".to_owned()),
        Just("\"2147483648ms\"".to_owned()),
        Just("\"0B\"".to_owned()),
        Just("\"16 EiB\"".to_owned()),
        Just("\"1.5 GB\"".to_owned()),
        Just("0".to_owned()),
        Just("-1".to_owned()),
        Just("18446744073709551615".to_owned()),
        Just("9223372036854775807".to_owned()),
        Just("1e309".to_owned()),
        Just("nan".to_owned()),
        Just("inf".to_owned()),
        Just("true".to_owned()),
        Just("[]".to_owned()),
        Just("[\"\"]".to_owned()),
        Just("{}".to_owned()),
        Just("{ kind = \"fixed\", workers = 0 }".to_owned()),
        Just("{ kind = \"fixed\", workers = 100000 }".to_owned()),
        Just("{ kind = \"resources\", memory_per_worker = 1 }".to_owned()),
        Just("{ kind = \"gradient\", memory_per_worker = \"0B\" }".to_owned()),
        Just("{ kind = \"idle-timeout\", after = \"0s\" }".to_owned()),
        Just("{ kind = \"idle-timeout\", after = \"1s\", keep = 99999 }".to_owned()),
        Just("{ kind = \"what\" }".to_owned()),
        Just("\"localhost:0\"".to_owned()),
        Just("\"[::1]:65536\"".to_owned()),
        Just("\"256.0.0.1\"".to_owned()),
        Just("\"\u{0}\"".to_owned()),
        Just("\"é\u{202e}名前\"".to_owned()),
        "\"[ -~]{0,30}\"".boxed(),
        any::<i64>().prop_map(|n| n.to_string()),
    ]
}

fn key_token() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("listen"),
        Just("body_limit"),
        Just("token_env"),
        Just("shutdown_grace"),
        Just("name"),
        Just("argv"),
        Just("env"),
        Just("cwd"),
        Just("group"),
        Just("startup"),
        Just("sizing"),
        Just("eviction"),
        Just("dispatch"),
        Just("ready"),
        Just("job_timeout"),
        Just("warmup_timeout"),
        Just("max_waiting"),
        Just("max_queue_wait"),
        Just("max_lifetime"),
        Just("max_lifetime_jitter"),
        Just("auto_grow_threshold"),
        Just("job_grace"),
        Just("max_reply"),
        Just("port"),
        Just("\"quoted key\""),
    ]
    .prop_map(str::to_owned)
}

/// One edit of a config text.
#[derive(Debug, Clone)]
enum Edit {
    Delete {
        at: usize,
        len: usize,
    },
    Insert {
        at: usize,
        text: String,
    },
    /// Sets line `line` to `key = value`.
    SetLine {
        line: usize,
        key: String,
        value: String,
    },
    DuplicateLine(usize),
    SwapLines(usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 1usize..12).prop_map(|(at, len)| Edit::Delete { at, len }),
        (
            any::<usize>(),
            prop_oneof![
                Just("[[pool]]\n".to_owned()),
                Just("[server]\n".to_owned()),
                Just("\n[[pool]]\nname = \"echo\"\nargv = [\"cat\"]\n".to_owned()),
                Just("\"".to_owned()),
                Just("=".to_owned()),
                Just("\u{0}".to_owned()),
                Just("\u{feff}".to_owned()),
                Just("#".to_owned()),
                Just("{".to_owned()),
                Just("]]".to_owned()),
                Just("\\u0000".to_owned()),
                ".{0,8}".boxed(),
            ]
        )
            .prop_map(|(at, text)| Edit::Insert { at, text }),
        (any::<usize>(), key_token(), value_token()).prop_map(|(line, key, value)| Edit::SetLine {
            line,
            key,
            value
        }),
        any::<usize>().prop_map(Edit::DuplicateLine),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::SwapLines(a, b)),
    ]
}

fn apply(text: &str, edit: &Edit) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let n = lines.len().max(1);
    match edit {
        Edit::Delete { at, len } => {
            let at = at % (chars.len() + 1);
            let end = (at + len).min(chars.len());
            chars[..at].iter().chain(&chars[end..]).collect()
        }
        Edit::Insert { at, text } => {
            let at = at % (chars.len() + 1);
            chars[..at]
                .iter()
                .copied()
                .chain(text.chars())
                .chain(chars[at..].iter().copied())
                .collect()
        }
        Edit::SetLine { line, key, value } => {
            if !lines.is_empty() {
                lines[line % n] = format!("{key} = {value}");
            }
            lines.join("\n")
        }
        Edit::DuplicateLine(line) => {
            if !lines.is_empty() {
                let l = lines[line % n].clone();
                lines.insert(line % n, l);
            }
            lines.join("\n")
        }
        Edit::SwapLines(a, b) => {
            if !lines.is_empty() {
                lines.swap(a % n, b % n);
            }
            lines.join("\n")
        }
    }
}

/// Parses `text`; a refusal names the file and says something; an accepted
/// config's pools build (on demand, so no worker starts) or are refused by
/// the core with a clear error.
fn parse_and_build(text: &str, rt: &tokio::runtime::Runtime) -> Result<usize, String> {
    match Config::parse(text, &source()) {
        Err(e) => {
            assert_eq!(e.file, "hostile.toml");
            assert!(!e.message.trim().is_empty(), "{e:?}");
            assert!(e.to_string().starts_with("hostile.toml"), "{e}");
            Err(e.to_string())
        }
        Ok(config) => {
            // What a listen address and token say, too.
            let _ = config.listen();
            let _ = config.server.token();
            rt.block_on(async {
                for pool in &config.pools {
                    let mut dry = pool.clone();
                    dry.startup = StartupKind::OnDemand;
                    match build_pool(&dry, kennel_bin()) {
                        Ok(p) => {
                            assert_eq!(p.stats().starting, 0);
                            p.close().await;
                        }
                        Err(e) => assert!(!e.to_string().is_empty()),
                    }
                }
            });
            Ok(config.pools.len())
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(256), .. ProptestConfig::default() })]

    #[test]
    fn any_text_is_a_config_or_an_error_naming_the_file(text in prop_oneof![
        ".{0,200}",
        prop::collection::vec(any::<u8>(), 0..300)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
    ]) {
        let rt = runtime();
        let _ = parse_and_build(&text, &rt);
    }

    #[test]
    fn any_edit_of_a_full_config_parses_or_is_refused_clearly(
        edits in prop::collection::vec(edit(), 1..6),
    ) {
        let rt = runtime();
        let mut text = FULL.to_owned();
        for e in &edits {
            text = apply(&text, e);
        }
        let _ = parse_and_build(&text, &rt);
    }

    #[test]
    fn any_reconfig_body_is_read_or_refused_naming_its_key(body in prop_oneof![
        prop::collection::vec(any::<u8>(), 0..200),
        reconfig_json().prop_map(|v| v.to_string().into_bytes()),
    ]) {
        match ReconfigBody::from_json(&body, &kennel::Options::default()) {
            Ok(r) => {
                let _ = r.reconfig();
            }
            Err(e) => assert!(!e.message.is_empty(), "{e:?}"),
        }
    }
}

#[test]
fn the_full_config_is_valid() {
    let rt = runtime();
    assert_eq!(parse_and_build(FULL, &rt), Ok(3));
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

// ---------------------------------------------------------------------------
// The routes, through the router
// ---------------------------------------------------------------------------

/// A pool of `cat`: no warm-up line, each request line comes back.
fn cat_pool(name: &str, workers: usize) -> PoolConfig {
    let mut p = PoolConfig::new(name, ["cat"]);
    p.ready = ReadyKind::Immediate;
    p.startup = StartupKind::OnDemand;
    p.sizing = Some(SizingConfig::Fixed { workers });
    p.group = Some("g".into());
    p
}

async fn state_with(builder: kennel_server::AppStateBuilder) -> AppState {
    let state = builder.metrics(metrics::install()).build();
    let mut config = Config::default();
    config.pools = vec![cat_pool("echo", 2)];
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

/// What a body sent as a job must give: the reference reading.
fn expect_job(body: &[u8]) -> Result<Value, (StatusCode, &'static str)> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err((StatusCode::BAD_REQUEST, "bad-json"));
    }
    match serde_json::from_slice::<Value>(body) {
        Err(_) => Err((StatusCode::BAD_REQUEST, "bad-json")),
        Ok(v) if v.get("error") == Some(&Value::Bool(true)) => {
            // The worker's own status when it is an HTTP error status.
            let status = v["status"]
                .as_u64()
                .filter(|s| (400..=599).contains(s))
                .and_then(|s| StatusCode::from_u16(u16::try_from(s).ok()?).ok());
            Err((
                status.unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                "worker-error",
            ))
        }
        Ok(v) => Ok(v),
    }
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("error".to_owned()),
                    Just("message".to_owned()),
                    "[a-z]{1,6}"
                ],
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn job_body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => json_value().prop_map(|v| v.to_string().into_bytes()),
        2 => prop::collection::vec(any::<u8>(), 0..400),
        1 => Just(b"   \n\t ".to_vec()),
        1 => Just(br#"{"error":true,"message":"from the body"}"#.to_vec()),
        // Nesting past serde_json's recursion limit.
        1 => (100usize..3000).prop_map(|n| {
            let mut v = vec![b'['; n];
            v.extend(std::iter::repeat_n(b']', n));
            v
        }),
        1 => Just(b"\"\\ud800\"".to_vec()),
        1 => Just(b"1e999999".to_vec()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(128), .. ProptestConfig::default() })]

    /// Any bytes as a job body: the echo of the JSON, 400 `bad-json`, or
    /// the worker's own error, as the reference says; never a panic.
    #[test]
    fn any_job_body_is_echoed_or_refused_with_a_json_error(
        bodies in prop::collection::vec(job_body(), 1..8),
    ) {
        let rt = runtime();
        rt.block_on(async {
            let state = state_with(AppState::builder().body_limit(64 * 1024)).await;
            let router = app(state.clone());
            for body in &bodies {
                for uri in ["/pools/echo/jobs", "/groups/g/jobs"] {
                    let req = Request::builder()
                        .method(Method::POST)
                        .uri(uri)
                        .body(Body::from(body.clone()))
                        .unwrap();
                    let (status, _, got) = call(&router, req).await;
                    match expect_job(body) {
                        Ok(v) => {
                            // A group lends only at once; both `cat`s may be busy.
                            if status == StatusCode::SERVICE_UNAVAILABLE && uri.starts_with("/groups") {
                                assert_eq!(assert_json_error(status, &got)["error"], "no-members");
                                continue;
                            }
                            assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&got));
                            assert_eq!(serde_json::from_slice::<Value>(&got).unwrap(), v);
                        }
                        Err((want, kind)) => {
                            assert_eq!(status, want, "{}", String::from_utf8_lossy(&got));
                            assert_eq!(assert_json_error(status, &got)["error"], kind);
                        }
                    }
                }
            }
            let stats = state.registry().get("echo").unwrap().stats();
            assert_eq!((stats.lent, stats.waiting), (0, 0));
            state.close().await;
        });
    }

    /// Any body to `PUT …/config`: 200 with the actions, or 400 with a JSON
    /// error; the pool still takes jobs afterwards.
    #[test]
    fn any_reconfig_body_is_applied_or_refused_with_a_json_error(
        bodies in prop::collection::vec(prop_oneof![
            prop::collection::vec(any::<u8>(), 0..200),
            reconfig_json().prop_map(|v| v.to_string().into_bytes()),
        ], 1..5),
    ) {
        let rt = runtime();
        rt.block_on(async {
            let state = state_with(AppState::builder()).await;
            let router = app(state.clone());
            for body in &bodies {
                let req = Request::builder()
                    .method(Method::PUT)
                    .uri("/pools/echo/config")
                    .body(Body::from(body.clone()))
                    .unwrap();
                let (status, _, got) = call(&router, req).await;
                if status == StatusCode::OK {
                    let v: Value = serde_json::from_slice(&got).unwrap();
                    assert!(v["actions"].is_array(), "{v}");
                } else {
                    assert_eq!(status, StatusCode::BAD_REQUEST, "{}", String::from_utf8_lossy(&got));
                    let kind = assert_json_error(status, &got)["error"].clone();
                    assert!(kind == "bad-json" || kind == "bad-config", "{kind}");
                }
            }
            // Whatever was applied, a job still gets an answer (a 1 ms job
            // timeout may make it 504).
            let req = Request::builder()
                .method(Method::POST)
                .uri("/pools/echo/jobs")
                .body(Body::from("[1]"))
                .unwrap();
            let (status, _, got) = call(&router, req).await;
            assert!(
                status == StatusCode::OK || status == StatusCode::GATEWAY_TIMEOUT,
                "{status}: {}",
                String::from_utf8_lossy(&got)
            );
            state.close().await;
        });
    }

    /// Any method on any path: an answer, and a JSON error for every error.
    #[test]
    fn any_method_and_path_is_answered_with_json_errors(
        requests in prop::collection::vec((
            prop_oneof![
                Just(Method::GET), Just(Method::POST), Just(Method::PUT), Just(Method::DELETE),
                Just(Method::PATCH), Just(Method::OPTIONS), Just(Method::HEAD),
            ],
            prop::collection::vec(prop_oneof![
                Just("pools".to_owned()), Just("groups".to_owned()), Just("echo".to_owned()),
                Just("g".to_owned()), Just("jobs".to_owned()), Just("stats".to_owned()),
                Just("config".to_owned()), Just("healthz".to_owned()), Just("metrics".to_owned()),
                Just("..".to_owned()), Just("%2e%2e".to_owned()), Just("%00".to_owned()),
                Just("%ff%fe".to_owned()), Just("%E5%90%8D".to_owned()), Just(String::new()),
                "[a-zA-Z0-9_.~-]{1,12}",
                (1000usize..5000).prop_map(|n| "a".repeat(n)),
            ], 0..5),
            prop_oneof![Just(String::new()), Just("?pool=%00".to_owned()), Just("?x=1&&&=".to_owned())],
        ), 1..10),
    ) {
        let rt = runtime();
        rt.block_on(async {
            let state = state_with(AppState::builder()).await;
            let router = app(state.clone());
            for (method, segments, query) in &requests {
                let uri = format!("/{}{query}", segments.join("/"));
                let req = Request::builder()
                    .method(method.clone())
                    .uri(&uri)
                    .body(Body::from("{}"))
                    .unwrap();
                let (status, _, got) = call(&router, req).await;
                assert!(
                    !status.is_server_error(),
                    "{method} {uri}: {status} {}",
                    String::from_utf8_lossy(&got)
                );
                if !status.is_success() && method != Method::HEAD {
                    assert_json_error(status, &got);
                }
            }
            state.close().await;
        });
    }

    /// Only `Bearer <the token>` opens a route; `/healthz` needs none.
    #[test]
    fn only_the_right_bearer_token_is_let_in(
        given in prop::collection::vec(prop_oneof![
            Just(None),
            Just(Some(b"Bearer s3cret-token".to_vec())),
            Just(Some(b"Bearer  s3cret-token ".to_vec())),
            Just(Some(b"bearer s3cret-token".to_vec())),
            Just(Some(b"Bearer s3cret-toke".to_vec())),
            Just(Some(b"Bearer s3cret-tokenn".to_vec())),
            Just(Some(b"Bearer S3CRET-TOKEN".to_vec())),
            Just(Some(b"Bearers3cret-token".to_vec())),
            Just(Some(b"Basic s3cret-token".to_vec())),
            Just(Some(b"s3cret-token".to_vec())),
            Just(Some(b"Bearer ".to_vec())),
            Just(Some("Bearer s3cret-tokén".as_bytes().to_vec())),
            prop::collection::vec(any::<u8>(), 0..40).prop_map(Some),
            "Bearer [ -~]{0,20}".prop_map(|s| Some(s.into_bytes())),
        ], 1..8),
    ) {
        let rt = runtime();
        rt.block_on(async {
            let state = state_with(AppState::builder().token("s3cret-token")).await;
            let router = app(state.clone());
            for g in &given {
                let Some(value) = g.as_ref().map_or(Some(None), |b| HeaderValue::from_bytes(b).ok().map(Some)) else {
                    continue; // not a header value at all: no client can send it
                };
                let right = value
                    .as_ref()
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().split_once(' '))
                    // The scheme's name is case-insensitive (RFC 9110).
                    .is_some_and(|(scheme, t)| scheme.eq_ignore_ascii_case("bearer") && t.trim() == "s3cret-token");
                for (uri, open) in [("/pools", false), ("/pools/echo/stats", false), ("/healthz", true)] {
                    let mut req = Request::builder().uri(uri).body(Body::empty()).unwrap();
                    if let Some(v) = &value {
                        req.headers_mut().insert(header::AUTHORIZATION, v.clone());
                    }
                    let (status, headers, got) = call(&router, req).await;
                    if right || open {
                        assert_eq!(status, StatusCode::OK, "{value:?} {uri}");
                    } else {
                        assert_eq!(status, StatusCode::UNAUTHORIZED, "{value:?} {uri}");
                        assert_eq!(assert_json_error(status, &got)["error"], "unauthorized");
                        assert_eq!(headers[header::WWW_AUTHENTICATE], "Bearer");
                    }
                }
            }
            state.close().await;
        });
    }
}

// ---------------------------------------------------------------------------
// Over real TCP: slow bodies, stalled connections, a header flood, a body
// over the limit
// ---------------------------------------------------------------------------

struct Served {
    addr: std::net::SocketAddr,
    state: AppState,
    server: tokio::task::JoinHandle<()>,
}

async fn serve(builder: kennel_server::AppStateBuilder) -> Served {
    let state = state_with(builder).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = app(state.clone());
    let server = tokio::spawn(async move {
        let options = kennel_server::http::ConnOptions::default();
        let _ = kennel_server::http::serve(listener, router, options, std::future::pending()).await;
    });
    Served {
        addr,
        state,
        server,
    }
}

impl Served {
    async fn stop(self) {
        self.server.abort();
        self.state.close().await;
    }
}

/// One request with `Connection: close`; returns the status and the body.
async fn http(addr: std::net::SocketAddr, head_and_body: &[u8]) -> (u16, String) {
    let exchange = async {
        let mut s = TcpStream::connect(addr).await.unwrap();
        // The server may answer and close before all is sent (413, 431).
        let _ = s.write_all(head_and_body).await;
        let mut raw = Vec::new();
        let _ = s.read_to_end(&mut raw).await;
        raw
    };
    let raw = tokio::time::timeout(LIMIT, exchange)
        .await
        .expect("an answer in time");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_owned());
    (status, body)
}

fn post_job(addr: std::net::SocketAddr, body: &str) -> Vec<u8> {
    format!(
        "POST /pools/echo/jobs HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A normal job answers within `d` while the server is under attack.
async fn a_job_answers_within(addr: std::net::SocketAddr, d: Duration) {
    let started = Instant::now();
    let (status, body) = http(addr, &post_job(addr, "{\"ping\":1}")).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        started.elapsed() < d,
        "a job took {:?} under attack",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_is_413_and_the_server_goes_on() {
    let served = serve(AppState::builder().body_limit(1024)).await;
    let addr = served.addr;
    // Declared too large.
    let mut req = format!(
        "POST /pools/echo/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        4 << 20
    )
    .into_bytes();
    req.extend(std::iter::repeat_n(b' ', 64 * 1024));
    let (status, body) = http(addr, &req).await;
    assert_eq!(status, 413, "{body}");
    // Chunked, with no length, past the limit.
    let mut req =
        b"POST /pools/echo/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
            .to_vec();
    for _ in 0..8 {
        req.extend_from_slice(b"200\r\n");
        req.extend(std::iter::repeat_n(b'1', 0x200));
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    let (status, body) = http(addr, &req).await;
    assert_eq!(status, 413, "{body}");
    assert!(body.contains("too-large"), "{body}");
    a_job_answers_within(addr, Duration::from_secs(5)).await;
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_stalled_bodies_hold_no_worker_and_block_no_one() {
    let served = serve(AppState::builder()).await;
    let addr = served.addr;
    let pool = served.state.registry().get("echo").unwrap();

    // Twenty clients drip a 40-byte body, a byte every 10 ms.
    let body = "{\"slow\":\"abcdefghijklmnopqrstuvwxyz0\"}";
    let head = format!(
        "POST /pools/echo/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut slow = Vec::new();
    for _ in 0..20 {
        let (head, body) = (head.clone(), body.to_owned());
        slow.push(tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.write_all(head.as_bytes()).await.unwrap();
            for b in body.bytes() {
                s.write_all(&[b]).await.unwrap();
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let mut raw = Vec::new();
            tokio::time::timeout(LIMIT, s.read_to_end(&mut raw))
                .await
                .expect("an answer")
                .unwrap();
            String::from_utf8_lossy(&raw).into_owned()
        }));
    }
    // Fifty more send half a body and stall.
    let mut stalled = Vec::new();
    for _ in 0..50 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(
            b"POST /pools/echo/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"half\":",
        )
        .await
        .unwrap();
        stalled.push(s);
    }
    // Meanwhile jobs answer at once, and no worker is held by a body.
    for _ in 0..5 {
        a_job_answers_within(addr, Duration::from_secs(2)).await;
        let s = pool.stats();
        assert_eq!((s.lent, s.waiting), (0, 0), "{s:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The slow bodies end at about the same moment: each is then a job like
    // any other, answered, or turned away by the bounded queue when they
    // arrive together faster than the workers take them.
    let mut answered = 0;
    for s in slow {
        let answer = s.await.unwrap();
        if answer.starts_with("HTTP/1.1 200") {
            assert!(answer.contains("abcdefghijklmnopqrstuvwxyz0"), "{answer}");
            answered += 1;
        } else {
            assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
            assert!(answer.contains("queue-depth"), "{answer}");
        }
    }
    assert!(answered > 0, "no slow body was ever answered");
    // The stalled clients go away; nothing is left behind.
    drop(stalled);
    a_job_answers_within(addr, Duration::from_secs(2)).await;
    let s = pool.stats();
    assert_eq!((s.lent, s.waiting), (0, 0), "{s:?}");
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_flood_is_refused_and_the_server_goes_on() {
    let served = serve(AppState::builder()).await;
    let addr = served.addr;
    // Ten thousand headers.
    let mut req = b"GET /pools HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n".to_vec();
    for i in 0..10_000 {
        req.extend_from_slice(format!("X-Flood-{i}: {i}\r\n").as_bytes());
    }
    req.extend_from_slice(b"\r\n");
    let (status, _) = http(addr, &req).await;
    assert!(status == 431 || status == 0, "status {status}");
    // One header of 2 MiB.
    let mut req =
        b"GET /pools HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nX-Big: ".to_vec();
    req.extend(std::iter::repeat_n(b'a', 2 << 20));
    req.extend_from_slice(b"\r\n\r\n");
    let (status, _) = http(addr, &req).await;
    assert!(status == 431 || status == 0, "status {status}");
    // A hundred connections that send part of their headers and stall.
    let mut stalled = Vec::new();
    for _ in 0..100 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /pools HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            .await
            .unwrap();
        stalled.push(s);
    }
    a_job_answers_within(addr, Duration::from_secs(2)).await;
    drop(stalled);
    a_job_answers_within(addr, Duration::from_secs(2)).await;
    served.stop().await;
}

/// A job's JSON goes to the worker and its reply comes back through two
/// parses and two encodings: numbers must come back bit for bit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_numbers_pass_through_a_job_unchanged() {
    let state = state_with(AppState::builder()).await;
    let router = app(state.clone());
    let floats = [
        1.335_929_356_665_518_4e277,
        0.1,
        1.0 / 3.0,
        5e-324,
        2.225_073_858_507_201_4e-308,
        f64::MAX,
        f64::MIN_POSITIVE,
        -123_456.789_012_345_68,
        6.02214076e23,
    ];
    for x in floats {
        let body = json!({ "x": x, "n": 9_007_199_254_740_993u64, "i": i64::MIN });
        let req = Request::builder()
            .method(Method::POST)
            .uri("/pools/echo/jobs")
            .body(Body::from(body.to_string()))
            .unwrap();
        let (status, _, got) = call(&router, req).await;
        assert_eq!(status, StatusCode::OK);
        let got: Value = serde_json::from_slice(&got).unwrap();
        assert_eq!(
            got["x"].as_f64().map(f64::to_bits),
            Some(x.to_bits()),
            "{x:e} came back as {}",
            got["x"]
        );
        assert_eq!(got["n"], json!(9_007_199_254_740_993u64));
        assert_eq!(got["i"], json!(i64::MIN));
    }
    state.close().await;
}

/// A pool or group name that is not UTF-8 is a JSON 400, as every error.
#[tokio::test]
async fn a_path_segment_that_is_not_utf8_is_answered_with_a_json_400() {
    let state = state_with(AppState::builder()).await;
    let router = app(state.clone());
    for uri in ["/pools/%ff%fe/jobs", "/pools/%ff/stats", "/groups/%fe/jobs"] {
        let method = if uri.ends_with("stats") {
            Method::GET
        } else {
            Method::POST
        };
        let req = Request::builder()
            .method(method)
            .uri(uri)
            .body(Body::from("{}"))
            .unwrap();
        let (status, _, body) = call(&router, req).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}");
        let v = assert_json_error(status, &body);
        assert_eq!(v["error"], "bad-request", "{uri}: {v}");
    }
    state.close().await;
}
