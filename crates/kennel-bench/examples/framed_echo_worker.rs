//! An echo worker in JSON lines or JSON-RPC (`argv[1]`: `json-lines` or
//! `json-rpc`), for the framing benchmark (`examples/talk.rs`): the same
//! work in both (read a line, parse it, write the echo), so that what
//! differs is kennel's side.

use std::io::{BufRead, Write};

use serde_json::{Value, json};

fn main() -> std::io::Result<()> {
    let rpc = std::env::args().nth(1).as_deref() == Some("json-rpc");
    let mut out = std::io::stdout().lock();
    if !rpc {
        writeln!(out, "{}", json!({"ready": true}))?;
        out.flush()?;
    }
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let Ok(mut request) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let reply = if rpc {
            if request.get("id").is_none() {
                continue; // a notification
            }
            let id = request["id"].take();
            let params = request["params"].take();
            json!({"jsonrpc": "2.0", "id": id, "result": params})
        } else {
            request
        };
        writeln!(out, "{reply}")?;
        out.flush()?;
    }
    Ok(())
}
