//! Real MCP servers nobody here wrote, pooled by the real `kennel serve`:
//! `mcp-server-time` (PyPI) and `@modelcontextprotocol/server-everything`
//! (npm), from the folders `.ci/run` installs them into (`target/mcp-venv`,
//! `target/mcp-node`; no network at test time). A tool call through
//! `POST /pools/{name}/jobs`, a long-running tool's progress as server-sent
//! events, and a call cancelled at its `job_timeout` after which the same
//! server process answers the next call.
//!
//! Without the packages each test fails, naming them, unless
//! `KENNEL_ALLOW_SKIP=1` lets it pass without running (`support::outside`).

mod served;
mod support;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde_json::{Value, json};
use served::{Server, Stderr};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The program, if installed (else see `support::outside::needed`).
fn installed(what: &str, install: &str, path: PathBuf) -> Option<PathBuf> {
    let test = std::thread::current().name().unwrap_or("mcp").to_owned();
    let note = format!("{install} (looked for {})", path.display());
    support::outside::needed(&test, what, &note, Some(path).filter(|p| p.exists()))
}

fn time_server() -> Option<PathBuf> {
    installed(
        "mcp-server-time (PyPI)",
        "pip install mcp-server-time",
        repo().join("target/mcp-venv/bin/mcp-server-time"),
    )
}

fn everything_server() -> Option<PathBuf> {
    installed(
        "@modelcontextprotocol/server-everything (npm)",
        "npm install @modelcontextprotocol/server-everything",
        repo().join(
            "target/mcp-node/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        ),
    )
}

/// One HTTP/1.1 exchange with `Connection: close`: status and body.
fn http(addr: SocketAddr, path: &str, body: &Value, accept: &str) -> (u16, String) {
    let headers = [("Accept", accept), ("Content-Type", "application/json")];
    let a = served::http(addr, "POST", path, &headers, &body.to_string());
    (a.status, a.body)
}

/// The live descendants of `pid` whose command line holds `needle`.
fn servers(pid: u32, needle: &str) -> BTreeSet<u32> {
    served::descendants(pid)
        .into_iter()
        .filter(|&p| {
            served::alive(p)
                && std::fs::read(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
        })
        .collect()
}

fn serve(name: &str, config: &str) -> Server {
    Server::start(
        name,
        config,
        &[],
        &[("RUST_LOG", "warn")],
        Stderr::Inherited,
    )
}

fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn mcp_server_time_answers_a_tool_call_through_the_pool() {
    let Some(program) = time_server() else { return };
    let config = format!(
        r#"
[server]
listen = "127.0.0.1:0"

[[pool]]
name = "time"
argv = ["{}", "--local-timezone", "UTC"]
protocol = "json-rpc"
method = "tools/call"
initialize = {{ client_info = {{ name = "kennel-e2e", version = "1" }} }}
startup = "parallel"
sizing = {{ kind = "fixed", workers = 2 }}
"#,
        program.display()
    );
    let server = serve("time", &config);
    for _ in 0..4 {
        let call = json!({"name": "get_current_time", "arguments": {"timezone": "UTC"}});
        let (status, body) = http(server.addr, "/pools/time/jobs", &call, "application/json");
        assert_eq!(status, 200, "{body}");
        let result: Value = serde_json::from_str(&body).unwrap();
        let reading: Value = serde_json::from_str(&text_of(&result)).unwrap();
        assert_eq!(reading["timezone"], "UTC", "{body}");
    }
    // A tool error keeps what the server said.
    let call = json!({"name": "get_current_time", "arguments": {"timezone": "Mars/Olympus"}});
    let (_, body) = http(server.addr, "/pools/time/jobs", &call, "application/json");
    assert!(body.contains("Mars/Olympus"), "{body}");
    assert_eq!(servers(server.child.id(), "mcp-server-time").len(), 2);
}

#[test]
fn server_everything_streams_progress_and_survives_a_cancelled_call() {
    let Some(program) = everything_server() else {
        return;
    };
    let config = format!(
        r#"
[server]
listen = "127.0.0.1:0"

[[pool]]
name = "everything"
argv = ["node", "{}", "stdio"]
protocol = "json-rpc"
method = "tools/call"
initialize = {{}}
startup = "parallel"
sizing = {{ kind = "fixed", workers = 1 }}
job_timeout = "2s"
cancel_grace = "5s"
"#,
        program.display()
    );
    let server = serve("everything", &config);
    let echo = json!({"name": "echo", "arguments": {"message": "hello"}});
    let (status, body) = http(
        server.addr,
        "/pools/everything/jobs",
        &echo,
        "application/json",
    );
    assert_eq!(status, 200, "{body}");
    assert!(
        text_of(&serde_json::from_str(&body).unwrap()).contains("hello"),
        "{body}"
    );
    let before = servers(server.child.id(), "server-everything");
    assert_eq!(before.len(), 1, "{before:?}");

    // A long-running tool: its progress as events, then the result.
    let long =
        json!({"name": "trigger-long-running-operation", "arguments": {"duration": 1, "steps": 4}});
    let (status, body) = http(
        server.addr,
        "/pools/everything/jobs",
        &long,
        "text/event-stream",
    );
    assert_eq!(status, 200, "{body}");
    let events: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("event:").map(str::trim))
        .collect();
    assert_eq!(
        events,
        ["progress", "progress", "progress", "progress", "result"],
        "{body}"
    );
    let steps: Vec<i64> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .filter_map(|v| v["progress"].as_i64())
        .collect();
    assert_eq!(steps, [1, 2, 3, 4]);
    assert!(body.contains("Long running operation completed"), "{body}");

    // One that runs past job_timeout: cancelled, the server stays.
    let stuck = json!({"name": "trigger-long-running-operation", "arguments": {"duration": 30, "steps": 1}});
    let (status, body) = http(
        server.addr,
        "/pools/everything/jobs",
        &stuck,
        "application/json",
    );
    assert_eq!(status, 504, "{body}");
    let (status, body) = http(
        server.addr,
        "/pools/everything/jobs",
        &echo,
        "application/json",
    );
    assert_eq!(status, 200, "the next call succeeds: {body}");
    assert_eq!(
        servers(server.child.id(), "server-everything"),
        before,
        "the same process"
    );
}
