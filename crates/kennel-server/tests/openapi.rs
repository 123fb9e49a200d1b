//! `GET /openapi.json`: an OpenAPI 3 document (read by the `oas3` crate),
//! listing every route the router has (each `.route(…)` of the crate's
//! source, with its methods) and nothing else, each reference resolved;
//! and the bodies it describes are those the routes answer.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use kennel_server::{AppState, Config, Source, app, install_metrics};
use serde_json::Value;
use tower::ServiceExt;

const LIMIT: Duration = Duration::from_secs(30);
const METHODS: [&str; 7] = ["get", "post", "put", "delete", "patch", "head", "options"];

async fn fetch(router: &Router, method: Method, uri: &str, body: &str) -> (StatusCode, Vec<u8>) {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .body(Body::from(body.to_owned()))
        .unwrap();
    let response = tokio::time::timeout(LIMIT, router.clone().oneshot(request))
        .await
        .expect("the request took too long")
        .unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, bytes.to_vec())
}

async fn document() -> Value {
    let router = app(AppState::empty());
    let (status, body) = fetch(&router, Method::GET, "/openapi.json", "").await;
    assert_eq!(status, StatusCode::OK);
    serde_json::from_slice(&body).unwrap()
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text of a call's arguments: from after `(` to its matching `)`.
fn arguments(text: &str) -> &str {
    let mut depth = 1usize;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return &text[..i];
                }
            }
            _ => {}
        }
    }
    text
}

/// The routes of the crate's routers, as `(method, path)`: every
/// `.route("PATH", get(…).put(…))` in its source.
fn routes_in_source() -> BTreeSet<(String, String)> {
    let mut files = Vec::new();
    sources(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    let mut routes = BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for (at, _) in text.match_indices(".route(") {
            // Not in a comment (a doc example of another router).
            let line = &text[text[..at].rfind('\n').map_or(0, |i| i + 1)..at];
            if line.trim_start().starts_with("//") {
                continue;
            }
            let args = arguments(&text[at + ".route(".len()..]);
            let (path, handlers) = args.split_once(',').expect("a route takes two arguments");
            let path = path.trim();
            let path = path
                .strip_prefix('"')
                .and_then(|p| p.strip_suffix('"'))
                .unwrap_or_else(|| {
                    panic!(
                        "{}: a route's path is a string literal: {path}",
                        file.display()
                    )
                })
                .to_owned();
            let bytes = handlers.as_bytes();
            for m in METHODS {
                for (i, _) in handlers.match_indices(&format!("{m}(")) {
                    let before = i.checked_sub(1).map(|j| bytes[j]);
                    if before.is_none_or(|b| !(b.is_ascii_alphanumeric() || b == b'_' || b == b':'))
                    {
                        routes.insert((m.to_owned(), path.clone()));
                    }
                }
            }
        }
    }
    routes
}

#[tokio::test]
async fn openapi_json_is_an_openapi_3_document_of_every_route_and_no_other() {
    let doc = document().await;
    let spec = oas3::from_json(doc.to_string()).expect("an OpenAPI 3.1 document");
    let version = spec
        .validate_version()
        .expect("a supported OpenAPI version");
    assert_eq!(version.major, 3);
    assert_eq!(spec.info.title, "kennel");
    assert_eq!(spec.info.version, env!("CARGO_PKG_VERSION"));

    let documented: BTreeSet<(String, String)> = spec
        .operations()
        .map(|(path, method, _)| (method.as_str().to_ascii_lowercase(), path))
        .collect();
    let routed = routes_in_source();
    assert!(routed.len() >= 14, "{routed:?}");
    assert_eq!(
        documented, routed,
        "the routes documented and the routes of the router differ"
    );

    // Every operation answers something, each reference resolves, each
    // path parameter is declared.
    for (path, method, op) in spec.operations() {
        assert!(
            !op.responses(&spec).is_empty(),
            "{method} {path}: no answer"
        );
        for (status, response) in op.responses(&spec) {
            for (media, content) in &response.content {
                if let Some(schema) = &content.schema {
                    schema
                        .resolve(&spec)
                        .unwrap_or_else(|e| panic!("{method} {path} {status} {media}: {e}"));
                }
            }
        }
        for segment in path.split('/') {
            if let Some(name) = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                let declared = op.parameters(&spec).unwrap().iter().any(|p| p.name == name);
                assert!(declared, "{method} {path}: `{name}` is not declared");
            }
        }
    }
    // Every error answer is an ErrorBody (a JSON-RPC error body on the MCP
    // endpoint).
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            for (status, answer) in op["responses"].as_object().unwrap() {
                if status.starts_with('4') || status.starts_with('5') {
                    let schema = &answer["content"]["application/json"]["schema"]["$ref"];
                    let ready = path.ends_with("z") && status == "503";
                    // The MCP endpoint refuses as MCP's transport does.
                    let body = if path.starts_with("/mcp/") {
                        "#/components/schemas/RpcErrorBody"
                    } else {
                        "#/components/schemas/ErrorBody"
                    };
                    if !ready {
                        assert_eq!(schema, body, "{method} {path} {status}");
                    }
                }
            }
        }
    }
}

fn kennel_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_kennel"))
}

/// The properties of a schema of the document's components, and those it
/// requires.
fn properties(doc: &Value, reference: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let name = reference.rsplit('/').next().unwrap();
    let schema = &doc["components"]["schemas"][name];
    let props = schema["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("{name} has no properties"))
        .keys()
        .cloned()
        .collect();
    let required = schema["required"]
        .as_array()
        .map(|r| r.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default();
    (props, required)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_body_the_document_describes_is_the_one_its_route_answers() {
    let doc = document().await;
    let store = std::env::temp_dir().join(format!("kennel-openapi-{}", std::process::id()));
    let state = AppState::builder()
        .metrics(install_metrics())
        .state_dir(&store, std::time::Duration::from_secs(60))
        .build();
    let config = Config::parse(
        "[[pool]]\nname = \"demo\"\nargv = [\"@kennel\", \"worker\", \"demo\", \"--warmup\", \"10ms\"]\nstartup = \"parallel\"\nsizing = { kind = \"fixed\", workers = 1 }\n",
        &Source::inline("test.toml"),
    )
    .unwrap();
    state.start_pools(&config, kennel_bin()).await.unwrap();
    let router = app(state.clone());
    // A first job: the pool has had its first ready worker, so it is ready.
    let (status, _) = fetch(&router, Method::POST, "/pools/demo/jobs", "{}").await;
    assert_eq!(status, StatusCode::OK);
    // An asynchronous job, for `/jobs/{id}`.
    let request = Request::post("/pools/demo/jobs")
        .header("prefer", "respond-async")
        .body(Body::from("{}"))
        .unwrap();
    let accepted = router.clone().oneshot(request).await.unwrap();
    assert_eq!(accepted.status(), StatusCode::ACCEPTED);
    let body = accepted.into_body().collect().await.unwrap().to_bytes();
    let job: Value = serde_json::from_slice(&body).unwrap();
    let id = job["id"].as_str().unwrap().to_owned();
    let mut checked = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let uri = path
                .replace("{name}", "demo")
                .replace("{group}", "demo")
                .replace("{id}", &id);
            let reference =
                op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].as_str();
            let Some(reference) = reference else {
                continue;
            };
            let method: Method = method.to_ascii_uppercase().parse().unwrap();
            let body = if method == Method::PUT { "{}" } else { "" };
            let (status, answer) = fetch(&router, method.clone(), &uri, body).await;
            assert_eq!(status, StatusCode::OK, "{method} {uri}");
            let answer: Value = serde_json::from_slice(&answer).unwrap();
            let keys: BTreeSet<String> = answer.as_object().unwrap().keys().cloned().collect();
            let (props, required) = properties(&doc, reference);
            assert_eq!(
                keys, props,
                "{method} {uri} answers other keys than {reference}"
            );
            assert!(required.is_subset(&keys), "{method} {uri}: {required:?}");
            checked += 1;
        }
    }
    assert!(checked >= 8, "only {checked} bodies checked");
    // An error's body, too.
    let (status, answer) = fetch(&router, Method::GET, "/pools/nope/stats", "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    let keys: BTreeSet<String> = answer.as_object().unwrap().keys().cloned().collect();
    let (props, required) = properties(&doc, "#/components/schemas/ErrorBody");
    assert!(
        keys.is_subset(&props) && required.is_subset(&keys),
        "{answer}"
    );
    state.close().await;
    let _ = std::fs::remove_dir_all(&store);
}
