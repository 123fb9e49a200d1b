//! Serve MCP clients from a warm pool (docs/recipes/serve-mcp-clients.md):
//! kennel's service with a pool of `mcp-server-time` that has `mcp = {}`,
//! then an MCP client's session over the Streamable HTTP transport at
//! `/mcp/time`, in plain HTTP so that every message shows: `initialize`
//! (answered from a warm server), a tool call, the session's end. The
//! client accepts JSON only, so each answer is the response alone (an SSE
//! client gets the server's notifications and requests too).
//!
//! The server comes from the folder `.ci/run` installs it into
//! (`target/mcp-venv`); without it this says how to install it and stops.

use std::path::{Path, PathBuf};

use kennel_server::{AppState, Config, Source};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One HTTP/1.1 exchange: the head and body of the answer.
async fn http(
    addr: std::net::SocketAddr,
    method: &str,
    headers: &str,
    body: &str,
) -> (String, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "{method} /mcp/time HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Accept: application/json\r\nContent-Type: application/json\r\n\
         {headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    (head.to_owned(), body.to_owned())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let time =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/mcp-venv/bin/mcp-server-time");
    if !time.exists() {
        println!("install the server first (as .ci/run does):");
        println!(
            "  python3 -m venv target/mcp-venv && target/mcp-venv/bin/pip install mcp-server-time"
        );
        return Ok(());
    }
    let toml = format!(
        "[[pool]]\nname = \"time\"\nargv = [{:?}, \"--local-timezone\", \"UTC\"]\n\
         protocol = \"json-rpc\"\nmcp = {{}}\nstartup = \"parallel\"\n\
         sizing = {{ kind = \"fixed\", workers = 2 }}\n",
        time.display().to_string()
    );
    let config = Config::parse(&toml, &Source::inline("serve-mcp-clients.toml"))?;
    let state = AppState::builder().build();
    state.start_pools(&config, Path::new("kennel")).await?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, kennel_server::app(state)).await });
    println!("an MCP endpoint at http://{addr}/mcp/time");

    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"example","version":"1"}}}"#;
    let (head, body) = http(addr, "POST", "", init).await;
    let session = head
        .lines()
        .find_map(|l| l.strip_prefix("mcp-session-id: "))
        .expect("initialize answers the session's id")
        .to_owned();
    println!("initialize: session {session}\n{}", body.trim());

    let with = format!("Mcp-Session-Id: {session}\r\n");
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_current_time","arguments":{"timezone":"UTC"}}}"#;
    let (_, body) = http(addr, "POST", &with, call).await;
    println!("tools/call:\n{}", body.trim());

    let (head, _) = http(addr, "DELETE", &with, "").await;
    println!("DELETE: {}", head.lines().next().unwrap_or_default());
    Ok(())
}
