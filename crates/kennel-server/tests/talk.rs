//! Workers that talk back, over HTTP: progress streamed as server-sent
//! events or NDJSON then the result, a worker's error status and fields,
//! the reply's bytes as the worker wrote them, JSON-RPC pools, and binary
//! bodies as base64. Real worker processes: the Python SDK's test worker.

mod routed;

use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use kennel_server::{AppState, Config, Source, app};
use serde_json::{Value, json};
use tower::ServiceExt;

const LIMIT: Duration = Duration::from_secs(30);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The SDK's test worker speaking `framing`, with more `keys` (one a
/// line), as a `[[pool]]` table.
fn sdk_pool(name: &str, framing: &str, keys: &str) -> String {
    let worker = repo().join("sdk/python/tests/worker.py");
    pool(
        name,
        &format!("[\"python3\", {:?}]", worker.display().to_string()),
        &format!("env = {{ KENNEL_FRAMING = \"{framing}\" }}\nprotocol = \"{framing}\"\n{keys}"),
    )
}

/// A `[[pool]]` table of `argv` (TOML) started at once with one worker.
fn pool(name: &str, argv: &str, keys: &str) -> String {
    format!(
        "[[pool]]\nname = \"{name}\"\nargv = {argv}\nstartup = \"parallel\"\nsizing = {{ kind = \"fixed\", workers = 1 }}\n{keys}\n"
    )
}

async fn router(pools: Vec<String>) -> (Router, AppState) {
    let state = AppState::builder().build();
    let config = Config::parse(&pools.concat(), &Source::inline("test.toml")).unwrap();
    state
        .start_pools(&config, Path::new(env!("CARGO_BIN_EXE_kennel")))
        .await
        .unwrap();
    (app(state.clone()), state)
}

async fn send(app: &Router, req: Request<Body>) -> (StatusCode, String, String) {
    let response = tokio::time::timeout(LIMIT, app.clone().oneshot(req))
        .await
        .expect("answered in time")
        .unwrap();
    let (status, kind, body) = routed::read_answer(response, LIMIT).await;
    (status, kind, String::from_utf8(body.to_vec()).unwrap())
}

fn post(uri: &str, body: &Value, accept: Option<&str>) -> Request<Body> {
    let mut b = Request::builder()
        .method(Method::POST)
        .uri(uri)
        .header(header::CONTENT_TYPE, "application/json");
    if let Some(a) = accept {
        b = b.header(header::ACCEPT, a);
    }
    b.body(Body::from(body.to_string())).unwrap()
}

/// `(event, data)` of each server-sent event.
fn events(text: &str) -> Vec<(String, String)> {
    text.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let mut event = String::new();
            let mut data = Vec::new();
            for line in block.lines() {
                if let Some(e) = line.strip_prefix("event:") {
                    event = e.trim().to_owned();
                } else if let Some(d) = line.strip_prefix("data:") {
                    data.push(d.strip_prefix(' ').unwrap_or(d).to_owned());
                }
            }
            (event, data.join("\n"))
        })
        .collect()
}

#[tokio::test]
async fn an_event_stream_client_gets_the_progress_then_the_result() {
    let (app, state) = router(vec![sdk_pool("talk", "json-lines", "")]).await;
    let job = json!({"op": "progress", "steps": 3});
    let (status, kind, body) = send(
        &app,
        post("/pools/talk/jobs", &job, Some("text/event-stream")),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(kind, "text/event-stream");
    let seen = events(&body);
    let names: Vec<&str> = seen.iter().map(|(e, _)| e.as_str()).collect();
    assert_eq!(
        names,
        ["progress", "progress", "progress", "result"],
        "{body}"
    );
    let second: Value = serde_json::from_str(&seen[1].1).unwrap();
    assert_eq!(
        second,
        json!({"progress": 2, "total": 3, "message": "step 2"})
    );
    assert_eq!(seen[3].1, r#"{"done":true}"#);
    // A plain request gets the result only.
    let (status, kind, body) = send(&app, post("/pools/talk/jobs", &job, None)).await;
    assert_eq!(
        (status, kind.as_str(), body.as_str()),
        (StatusCode::OK, "application/json", r#"{"done":true}"#)
    );
    state.close().await;
}

#[tokio::test]
async fn an_ndjson_client_gets_one_line_per_progress_item_then_the_result() {
    let (app, state) = router(vec![sdk_pool("talk", "json-rpc", "")]).await;
    let job = json!({"method": "progress", "params": {"steps": 2}});
    let (status, kind, body) = send(
        &app,
        post("/pools/talk/jobs", &job, Some("application/x-ndjson")),
    )
    .await;
    assert_eq!(
        (status, kind.as_str()),
        (StatusCode::OK, "application/x-ndjson")
    );
    let lines: Vec<Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{body}");
    assert_eq!(lines[0]["progress"], 1);
    assert_eq!(lines[1]["progress"], 2);
    assert_eq!(lines[2], json!({"result": {"done": true}}));
    state.close().await;
}

#[tokio::test]
async fn a_worker_error_with_status_422_answers_422_with_its_fields() {
    for framing in ["json-lines", "json-rpc", "content-length"] {
        let method = if framing == "json-lines" {
            ""
        } else {
            "method = \"error\""
        };
        let (app, state) = router(vec![sdk_pool("talk", framing, method)]).await;
        let (status, _, body) = send(
            &app,
            post("/pools/talk/jobs", &json!({"op": "error"}), None),
        )
        .await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{framing}: {body}"
        );
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            body,
            json!({"error": "worker-error", "message": "text is too long", "status": 422, "code": "too_long", "limit": 5}),
            "{framing}"
        );
        // Streamed, the error is the last event, with its status.
        let (status, _, text) = send(
            &app,
            post(
                "/pools/talk/jobs",
                &json!({"op": "error"}),
                Some("text/event-stream"),
            ),
        )
        .await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "an error before any progress keeps its status: {text}"
        );
        state.close().await;
    }
}

#[tokio::test]
async fn a_worker_error_status_outside_4xx_and_5xx_answers_500() {
    let worker = "import json,sys\nprint(json.dumps({'ready':True}),flush=True)\nfor l in sys.stdin:\n    print(json.dumps({'error':True,'message':'odd','status':302,'error_code':7}),flush=True)\n";
    let argv = format!("[\"python3\", \"-c\", {worker:?}]");
    let (app, state) = router(vec![pool("odd", &argv, "")]).await;
    let (status, _, body) = send(&app, post("/pools/odd/jobs", &json!({}), None)).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["status"], 302, "the field is kept as written");
    assert_eq!(body["error_code"], 7);
    state.close().await;
}

/// A JSON-lines job that is an object reaches the worker with its
/// `kennel_id` first, which the SDK hides from the handler and kennel from
/// the client; `job_ids = false` sends the job as it came.
#[tokio::test]
async fn a_json_lines_job_carries_its_id_unless_the_pool_turns_ids_off() {
    let (app, state) = router(vec![sdk_pool("sdk", "json-lines", "")]).await;
    let (status, _, body) = send(
        &app,
        post("/pools/sdk/jobs", &json!({"op": "keys", "a": 1}), None),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, r#"{"keys":["a","op"]}"#);
    state.close().await;

    let worker = "import json,sys\nprint(json.dumps({'ready':True}),flush=True)\nfor l in sys.stdin:\n    print(json.dumps({'line':l.strip()}),flush=True)\n";
    for (job_ids, seen) in [(true, r#"{"kennel_id":1,"a":1}"#), (false, r#"{"a":1}"#)] {
        let argv = format!("[\"python3\", \"-c\", {worker:?}]");
        let keys = format!("job_ids = {job_ids}");
        let (app, state) = router(vec![pool("line", &argv, &keys)]).await;
        let (status, _, body) = send(&app, post("/pools/line/jobs", &json!({"a": 1}), None)).await;
        assert_eq!(status, StatusCode::OK);
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["line"], seen, "job_ids = {job_ids}");
        state.close().await;
    }
}

#[tokio::test]
async fn a_reply_comes_back_with_the_bytes_the_worker_wrote() {
    let verbatim = repo().join("crates/kennel-process/tests/workers/verbatim.py");
    for framing in ["json-lines", "json-rpc"] {
        let argv = format!(
            "[\"python3\", {:?}, \"{framing}\"]",
            verbatim.display().to_string()
        );
        let method = if framing == "json-rpc" {
            "method = \"any\""
        } else {
            ""
        };
        let keys = format!("protocol = \"{framing}\"\n{method}");
        let (app, state) = router(vec![pool("raw", &argv, &keys)]).await;
        let (status, _, body) = send(&app, post("/pools/raw/jobs", &json!({}), None)).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            body, r#"{"zeta": 1,  "alpha": [1.50, 2E3, "\u00e9"], "mid": {"b": null, "a": true}}"#,
            "{framing}"
        );
        state.close().await;
    }
}

#[tokio::test]
async fn a_json_rpc_pool_with_a_handshake_and_a_method_serves_plain_bodies_and_asks_for_progress_only_of_a_streaming_client()
 {
    let keys = "method = \"echo\"\ninitialize = {}";
    let (app, state) = router(vec![sdk_pool("rpc", "json-rpc", keys)]).await;
    let (status, _, body) = send(
        &app,
        post("/pools/rpc/jobs", &json!({"b": 2, "a": 1}), None),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let reply: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(reply["a"], 1);
    // A plain job's progress is read by nobody: no token is asked for,
    // and the params are the body's bytes.
    assert!(
        reply.get("_meta").is_none(),
        "a plain job asks for no progress: {body}"
    );
    // A client that streams reads it: the call carries the id as token.
    let (status, _, body) = send(
        &app,
        post(
            "/pools/rpc/jobs",
            &json!({"b": 2, "a": 1}),
            Some("application/x-ndjson"),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let last: Value = serde_json::from_str(body.lines().last().unwrap()).unwrap();
    assert_eq!(
        last["result"]["_meta"]["progressToken"], 2,
        "kennel asked for progress with the id: {body}"
    );
    state.close().await;
}

#[tokio::test]
async fn bytes_reach_the_worker_as_base64_within_the_pools_upload_limit() {
    let keys = "upload_limit = \"512B\"";
    let (app, state) = router(vec![sdk_pool("bin", "json-lines", keys)]).await;
    let bytes: Vec<u8> = (0u8..40).collect();
    let req = Request::builder()
        .method(Method::POST)
        .uri("/pools/bin/jobs")
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .body(Body::from(bytes.clone()))
        .unwrap();
    let (status, _, body) = send(&app, req).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let echoed: Value = serde_json::from_str(&body).unwrap();
    let file = &echoed["files"][0];
    assert_eq!(file["size"], 40);
    assert_eq!(file["content_type"], "application/octet-stream");
    use base64::Engine;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(file["base64"].as_str().unwrap())
        .unwrap();
    assert_eq!(decoded, bytes);

    let over = Request::builder()
        .method(Method::POST)
        .uri("/pools/bin/jobs")
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .body(Body::from(vec![7u8; 513]))
        .unwrap();
    let (status, _, body) = send(&app, over).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");

    let multipart = "--XyZ\r\nContent-Disposition: form-data; name=\"json\"\r\n\r\n{\"op\":\"echo\",\"lang\":\"fr\"}\r\n--XyZ\r\nContent-Disposition: form-data; name=\"photo\"; filename=\"a.png\"\r\nContent-Type: image/png\r\n\r\n\x01\x02\x03\r\n--XyZ--\r\n";
    let req = Request::builder()
        .method(Method::POST)
        .uri("/pools/bin/jobs")
        .header(header::CONTENT_TYPE, "multipart/form-data; boundary=XyZ")
        .body(Body::from(multipart))
        .unwrap();
    let (status, _, body) = send(&app, req).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let echoed: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(echoed["lang"], "fr");
    assert_eq!(
        echoed["files"],
        json!([{"name": "photo", "filename": "a.png", "content_type": "image/png", "size": 3, "base64": "AQID"}])
    );
    state.close().await;
}
