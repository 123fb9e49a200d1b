//! `/mcp/{pool}`, kennel's MCP endpoint, driven by the official MCP
//! clients against real stdio MCP servers pooled by the real `kennel
//! serve`: the Python SDK (`mcp` from PyPI, in `target/mcp-venv`) against
//! `@modelcontextprotocol/server-everything` (exclusive sessions) and
//! `mcp-server-time` (shared), and the TypeScript SDK
//! (`@modelcontextprotocol/sdk`, in `target/mcp-sdk-node`). The
//! transport's rules over raw HTTP are in `mcp_transport.rs`.
//!
//! Without the packages each test fails, naming them, unless
//! `KENNEL_ALLOW_SKIP=1` lets it pass without running.

mod served;
mod support;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};
use served::mcp::{clients, pids, serve};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The path, if installed (else see `support::outside::needed`).
fn installed(what: &str, path: PathBuf) -> Option<PathBuf> {
    let test = std::thread::current().name().unwrap_or("mcp").to_owned();
    let note = format!("(looked for {})", path.display());
    support::outside::needed(&test, what, &note, Some(path).filter(|p| p.exists()))
}

fn python() -> Option<PathBuf> {
    installed(
        "the MCP Python SDK (pip install mcp==2.3.0 into target/mcp-venv)",
        repo().join("target/mcp-venv/bin/python"),
    )
    .filter(|p| {
        let sdk = Command::new(p).args(["-c", "import mcp"]).status();
        support::outside::needed(
            "mcp",
            "the MCP Python SDK",
            "",
            sdk.ok().filter(|s| s.success()),
        )
        .is_some()
    })
}

fn everything() -> Option<PathBuf> {
    installed(
        "@modelcontextprotocol/server-everything (npm)",
        repo().join(
            "target/mcp-node/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        ),
    )
}

/// Runs `script` with `args` in the SDK's venv; its one line of JSON.
fn run_python(python: &PathBuf, script: &str, args: &[&str]) -> Value {
    let out = Command::new(python)
        .arg(clients().join(script))
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{script} failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn the_python_sdk_holds_an_exclusive_session_with_progress_sampling_logging_and_cancel() {
    let (Some(python), Some(server_js)) = (python(), everything()) else {
        return;
    };
    let pool = format!(
        r#"[[pool]]
name = "everything"
argv = ["node", "{}", "stdio"]
protocol = "json-rpc"
mcp = {{}}
startup = "parallel"
sizing = {{ kind = "fixed", workers = 2 }}
"#,
        server_js.display()
    );
    let server = serve("mcp-everything", &pool);
    server.eventually("both workers up", || pids(&server, "everything").len() == 2);
    let base = format!("http://{}", server.addr);
    let seen = run_python(&python, "session.py", &[&base, "everything"]);

    assert_eq!(seen["protocol"], "2025-11-25", "{seen}");
    assert_eq!(seen["server"], "mcp-servers/everything");
    let tools = seen["tools"].to_string();
    assert!(
        tools.contains("\"echo\"") && tools.contains("trigger-sampling-request"),
        "{tools}"
    );
    assert_eq!(seen["echo"], "Echo: through kennel");
    assert_eq!(seen["progress"], json!([1.0, 2.0, 3.0, 4.0]), "{seen}");
    assert_eq!(
        seen["sampled"],
        json!(["Resource trigger-sampling-request context: a haiku"])
    );
    assert!(
        seen["sampling_result"]
            .as_str()
            .unwrap()
            .contains("sampled: 50 chars"),
        "the server got the client's sampling answer: {seen}"
    );
    assert!(seen["logs"].as_array().unwrap().len() >= 2, "{seen}");
    // The cancelled call left the same server processes, and the session
    // went on.
    assert_eq!(seen["after_cancel"], "Echo: after the cancel");
    assert_eq!(seen["pids_start"], seen["pids_after_cancel"], "{seen}");

    // The session ended (the SDK's DELETE): its worker was replaced, the
    // other kept.
    let during: BTreeSet<u64> = seen["pids_start"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    server.eventually("the session's worker replaced", || {
        let now = pids(&server, "everything");
        now.len() == 2 && now.intersection(&during).count() == 1
    });
}

#[test]
fn a_shared_pool_answers_parallel_sessions_from_any_worker() {
    let Some(python) = python() else { return };
    let Some(time) = installed(
        "mcp-server-time (PyPI)",
        repo().join("target/mcp-venv/bin/mcp-server-time"),
    ) else {
        return;
    };
    let pool = format!(
        r#"[[pool]]
name = "time"
argv = ["{}", "--local-timezone", "UTC"]
protocol = "json-rpc"
mcp = {{ sessions = "shared" }}
startup = "parallel"
sizing = {{ kind = "fixed", workers = 2 }}
"#,
        time.display()
    );
    let server = serve("mcp-time", &pool);
    server.eventually("both workers up", || pids(&server, "time").len() == 2);
    let before = pids(&server, "time");
    let base = format!("http://{}", server.addr);
    let seen = run_python(&python, "shared.py", &[&base, "time", "6"]);
    assert_eq!(seen["sessions"], 6, "{seen}");
    assert_eq!(seen["timezones"], json!(["UTC"]), "{seen}");
    assert_eq!(seen["tools"], json!(["convert_time", "get_current_time"]));
    // Six sessions, two processes, the same ones: a shared session holds
    // none, and its end replaces none.
    assert_eq!(pids(&server, "time"), before);
}

#[test]
fn the_typescript_sdk_calls_a_tool_with_progress_through_the_gateway() {
    let Some(server_js) = everything() else {
        return;
    };
    let Some(_) = installed(
        "@modelcontextprotocol/sdk (npm)",
        repo().join("target/mcp-sdk-node/node_modules/@modelcontextprotocol/sdk/package.json"),
    ) else {
        return;
    };
    let pool = format!(
        r#"[[pool]]
name = "everything"
argv = ["node", "{}", "stdio"]
protocol = "json-rpc"
mcp = {{}}
sizing = {{ kind = "fixed", workers = 1 }}
"#,
        server_js.display()
    );
    let server = serve("mcp-ts", &pool);
    let out = Command::new("node")
        .arg(clients().join("session.mjs"))
        .arg(format!("http://{}/mcp/everything", server.addr))
        .env("NODE_PATH", repo().join("target/mcp-sdk-node/node_modules"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(seen["echo"], "Echo: from typescript", "{seen}");
    assert_eq!(seen["progress"], json!([1, 2, 3]), "{seen}");
    assert_eq!(seen["protocol"], "2025-11-25", "{seen}");
}
