//! A pool whose worker cannot start, behind the in-process service with real
//! worker processes: the crash-loop breaker bounds the starts, `/readyz`
//! turns 503, and jobs answer 503 `unavailable` with `Retry-After` and the
//! worker's last words.

#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use kennel_server::{AppState, Config, Source, app, install_metrics};
use serde_json::{Value, json};
use tower::ServiceExt;

const LIMIT: Duration = Duration::from_secs(30);

const LAST_WORDS: &str = "model file not found: /models/x.bin";

fn request(method: Method, uri: &str, body: impl Into<Body>) -> Request<Body> {
    Request::builder()
        .method(method)
        .uri(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body.into())
        .unwrap()
}

async fn call(router: &Router, req: Request<Body>) -> (StatusCode, HeaderMap, Value) {
    let response = tokio::time::timeout(LIMIT, router.clone().oneshot(req))
        .await
        .expect("the request took too long")
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, headers, serde_json::from_slice(&bytes).unwrap())
}

/// A pool whose worker notes its start in `counter`, says why it cannot
/// start on stderr, and exits before its ready line.
fn broken_pool(counter: &Path) -> String {
    let script = format!(
        "echo $$ >> '{}'; echo '{LAST_WORDS}' >&2; exit 1",
        counter.display()
    );
    format!("[[pool]]\nname = \"model\"\nargv = [\"sh\", \"-c\", {script:?}]\n")
}

fn starts(counter: &Path) -> usize {
    std::fs::read_to_string(counter).map_or(0, |t| t.lines().count())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_whose_worker_exits_at_start_is_unavailable_with_its_last_words() {
    let dir: PathBuf =
        std::env::temp_dir().join(format!("kennel-crash-loop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let counter = dir.join("starts");
    let _ = std::fs::remove_file(&counter);
    let state = AppState::builder().metrics(install_metrics()).build();
    let config = parse(&broken_pool(&counter));
    state
        .start_pools(&config, Path::new(env!("CARGO_BIN_EXE_kennel")))
        .await
        .unwrap();
    let router = app(state.clone());

    // 100 jobs in 10 s, one every 100 ms.
    let began = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut warmup_failed = 0;
    let mut unavailable = 0;
    let mut first_unavailable: Option<Duration> = None;
    for _ in 0..100 {
        tick.tick().await;
        let (status, headers, body) =
            call(&router, request(Method::POST, "/pools/model/jobs", "{}")).await;
        assert_eq!(body["stderr"], json!([LAST_WORDS]), "{body}");
        assert!(
            body["message"].as_str().unwrap().contains(LAST_WORDS),
            "{body}"
        );
        match body["error"].as_str() {
            Some("warmup-failed") => {
                assert_eq!(status, StatusCode::BAD_GATEWAY);
                if warmup_failed == 0 {
                    eprintln!("first warmup-failed: {status}, {body}");
                }
                warmup_failed += 1;
            }
            Some("unavailable") => {
                assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
                let retry: u64 = headers[header::RETRY_AFTER]
                    .to_str()
                    .unwrap()
                    .parse()
                    .unwrap();
                assert!((1..=60).contains(&retry), "Retry-After {retry}");
                unavailable += 1;
                if first_unavailable.is_none() {
                    first_unavailable = Some(began.elapsed());
                    eprintln!("first unavailable: {status}, Retry-After: {retry}, {body}");
                    // Broken: not ready, within one back-off (1 s).
                    let deadline = Instant::now() + Duration::from_secs(1);
                    loop {
                        let (status, _, body) =
                            call(&router, request(Method::GET, "/readyz", Body::empty())).await;
                        if status == StatusCode::SERVICE_UNAVAILABLE {
                            assert_eq!(
                                body,
                                json!({"status": "unavailable", "pools": {"model": "broken"}})
                            );
                            break;
                        }
                        assert!(Instant::now() < deadline, "/readyz stayed {status}: {body}");
                        tokio::task::yield_now().await;
                    }
                    let (status, _, _) =
                        call(&router, request(Method::GET, "/livez", Body::empty())).await;
                    assert_eq!(status, StatusCode::OK);
                }
            }
            _ => panic!("unexpected answer {status}: {body}"),
        }
    }
    let elapsed = began.elapsed();
    let started = starts(&counter);
    eprintln!(
        "100 jobs in {elapsed:?}: {started} worker processes started, {warmup_failed} \
         warmup-failed, {unavailable} unavailable, first unavailable after {first_unavailable:?}"
    );
    assert!(started <= 10, "{started} worker processes started");
    assert!(unavailable >= 90, "{unavailable} unavailable");
    state.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A pool whose first job crashes its worker (it says why on stderr); every
/// later one is echoed. `marker` remembers the crash across workers.
fn crash_once_pool(marker: &Path, retry_on_crash: u32) -> String {
    let script = format!(
        "echo '{{\"ready\":true}}'; while read line; do \
           if [ ! -e '{m}' ]; then touch '{m}'; echo 'segmentation fault in libmodel.so' >&2; exit 139; fi; \
           echo \"$line\"; done",
        m = marker.display()
    );
    format!(
        "[[pool]]\nname = \"flaky\"\nargv = [\"sh\", \"-c\", {script:?}]\nretry_on_crash = {retry_on_crash}\n"
    )
}

/// A config of `toml`'s pools.
fn parse(toml: &str) -> Config {
    Config::parse(toml, &Source::inline("test.toml")).unwrap()
}

async fn one_job(pool: String, tag: &str) -> (StatusCode, Value) {
    let state = AppState::builder().metrics(install_metrics()).build();
    let config = parse(&pool);
    state
        .start_pools(&config, Path::new(env!("CARGO_BIN_EXE_kennel")))
        .await
        .unwrap();
    let router = app(state.clone());
    let (status, _, body) = call(
        &router,
        request(
            Method::POST,
            "/pools/flaky/jobs",
            json!({"tag": tag}).to_string(),
        ),
    )
    .await;
    state.close().await;
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_under_a_job_answers_502_with_the_workers_last_words() {
    let marker = std::env::temp_dir().join(format!("kennel-crash-once-{}-a", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    let (status, body) = one_job(crash_once_pool(&marker, 0), "a").await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{body}");
    assert_eq!(body["error"], "crashed");
    assert_eq!(body["stderr"], json!(["segmentation fault in libmodel.so"]));
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .ends_with("; last stderr line: segmentation fault in libmodel.so"),
        "{body}"
    );
    let _ = std::fs::remove_file(&marker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_with_retry_on_crash_runs_an_http_job_again_on_a_new_worker() {
    let marker = std::env::temp_dir().join(format!("kennel-crash-once-{}-b", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    let (status, body) = one_job(crash_once_pool(&marker, 1), "b").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"tag": "b"}));
    let _ = std::fs::remove_file(&marker);
}
