//! The routes, through the router, given arbitrary input: any job body,
//! reconfiguration body, method and path, or bearer token is answered as the
//! reference says, every error a JSON `{"error", "message"}`; a job's JSON
//! numbers come back bit for bit; a path segment that is not UTF-8 is a 400.

use axum::body::Body;
use axum::http::{HeaderValue, Method, Request, StatusCode, header};
use kennel_server::{AppState, app};
use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;
use serde_json::{Value, json};

use crate::{assert_json_error, call, cases, reconfig_json, runtime, state_with};

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
            let stats = state.pool("echo").unwrap().stats();
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
