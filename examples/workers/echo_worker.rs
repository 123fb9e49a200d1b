//! A kennel worker in Rust: the JSON-lines protocol of docs/PROTOCOL.md with
//! nothing but the standard library and `serde_json`.
//!
//! It writes `{"ready":true}` once warm, then reads one JSON request per line
//! on stdin and writes one JSON reply per line on stdout. It echoes each
//! request back, except `{"op":"error","message":…}`, which it answers with
//! an error reply. It exits when stdin ends.
//!
//! ```text
//! cargo run -p kennel-process --example echo_worker
//! ```

use std::io::{BufRead, Write};

use serde_json::{Value, json};

fn handle(request: Value) -> Result<Value, String> {
    if request.get("op").and_then(Value::as_str) == Some("error") {
        let message = request.get("message").and_then(Value::as_str);
        return Err(message.unwrap_or("asked to fail").to_owned());
    }
    Ok(request)
}

fn main() -> std::io::Result<()> {
    // The warm-up goes here (load a model, open a session). Logs go to
    // stderr: kennel forwards them to `tracing`.
    eprintln!("echo worker warming up");

    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", json!({"ready": true}))?;
    out.flush()?;

    for line in std::io::stdin().lock().lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let reply = match serde_json::from_str::<Value>(&line) {
            Ok(request) => match handle(request) {
                Ok(reply) => reply,
                Err(message) => json!({"error": true, "message": message}),
            },
            Err(err) => json!({"error": true, "message": format!("bad request: {err}")}),
        };
        // One reply, one line: compact JSON never contains a newline.
        writeln!(out, "{reply}")?;
        out.flush()?;
    }
    // stdin ended: kennel is closing the worker.
    Ok(())
}
