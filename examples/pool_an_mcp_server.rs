//! Pool an MCP server nobody here wrote (docs/recipes/pool-an-mcp-server.md):
//! `mcp-server-time` from PyPI, two copies warmed by the MCP handshake, a
//! tool call per job; then `@modelcontextprotocol/server-everything` from
//! npm for a long-running tool's progress and a call cancelled at its
//! `job_timeout`, after which the same server answers again.
//!
//! The servers come from the folders `.ci/run` installs them into
//! (`target/mcp-venv`, `target/mcp-node`); without them this says how to
//! install them and stops.

use std::path::PathBuf;
use std::time::Duration;

use kennel::{Fixed, Parallel};
use kennel_process::{Coprocess, CoprocessSpec, Framing, Handshake, ProcessError};
use serde_json::{Value, json};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn text(reply: &Value) -> &str {
    reply["content"][0]["text"].as_str().unwrap_or_default()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let time = root().join("target/mcp-venv/bin/mcp-server-time");
    let everything = root()
        .join("target/mcp-node/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !time.exists() || !everything.exists() {
        println!("install the servers first (as .ci/run does):");
        println!(
            "  python3 -m venv target/mcp-venv && target/mcp-venv/bin/pip install mcp-server-time"
        );
        println!("  npm install --prefix target/mcp-node @modelcontextprotocol/server-everything");
        return Ok(());
    }

    // Two time servers, each warmed by `initialize`, every job a tools/call.
    let pool = CoprocessSpec::new([
        time.as_os_str(),
        "--local-timezone".as_ref(),
        "UTC".as_ref(),
    ])
    .framing(Framing::JsonRpc)
    .handshake(Handshake::mcp().client_info("pool-an-mcp-server", "1"))
    .method("tools/call")
    .pool()
    .name("time")
    .startup(Parallel)
    .sizing(Fixed(2))
    .build()?;
    for zone in ["UTC", "Europe/Paris", "Asia/Tokyo"] {
        let call = json!({"name": "get_current_time", "arguments": {"timezone": zone}});
        let reply = pool
            .run(async |w: &mut Coprocess| w.request(&call).await)
            .await??;
        println!("{zone}: {}", text(&reply));
    }
    pool.close().await;

    // server-everything: progress, then a cancel that keeps the server.
    let pool = CoprocessSpec::new(["node".as_ref(), everything.as_os_str(), "stdio".as_ref()])
        .framing(Framing::JsonRpc)
        .handshake(Handshake::mcp())
        .method("tools/call")
        .pool()
        .name("everything")
        .startup(Parallel)
        .sizing(Fixed(1))
        .with_options(|o| o.job_timeout = Some(Duration::from_secs(2)))
        .build()?;
    let long =
        json!({"name": "trigger-long-running-operation", "arguments": {"duration": 1, "steps": 4}});
    let reply = pool
        .run(async |w: &mut Coprocess| {
            w.request_with_progress(&long, |p| println!("progress {}", p.to_json()))
                .await
        })
        .await??;
    println!("result: {}", reply.get());

    let pid = |w: &Coprocess| w.pid();
    let before = pool.run(async |w: &mut Coprocess| pid(w)).await?;
    let stuck = json!({"name": "trigger-long-running-operation", "arguments": {"duration": 30, "steps": 1}});
    let err = pool
        .run(async |w: &mut Coprocess| w.request(&stuck).await)
        .await
        .err();
    println!(
        "past job_timeout: {}",
        err.map_or("no error".into(), |e| e.to_string())
    );
    let echo = json!({"name": "echo", "arguments": {"message": "still here"}});
    let (after, reply) = pool
        .run(async |w: &mut Coprocess| (pid(w), w.request(&echo).await))
        .await?;
    let reply: Value = reply.map_err(|e: ProcessError| e)?;
    println!(
        "next call: {} (same process: {})",
        text(&reply),
        before == after
    );
    pool.close().await;
    Ok(())
}
