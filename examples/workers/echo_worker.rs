//! A kennel worker in Rust: the JSON-lines protocol of docs/PROTOCOL.md with
//! nothing but the standard library and `serde_json`.
//!
//! It writes `{"ready":true,"kennel_id":true}` once warm, then reads one JSON
//! request per line on stdin and writes one JSON reply per line on stdout,
//! with the request's `kennel_id` echoed. It echoes each
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
    // `"kennel_id": true`: it echoes kennel's job id in every reply.
    writeln!(out, "{}", json!({"ready": true, "kennel_id": true}))?;
    out.flush()?;

    for line in std::io::stdin().lock().lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let reply = match serde_json::from_str::<Value>(&line) {
            Ok(mut request) => {
                // kennel's job id is kennel's: out of the request, back in
                // the reply, so that the reply is taken only for its job.
                let id = request.as_object_mut().and_then(|r| r.remove("kennel_id"));
                let mut reply = match handle(request) {
                    Ok(reply) => reply,
                    Err(message) => json!({"error": true, "message": message}),
                };
                if let (Some(id), Some(fields)) = (id, reply.as_object_mut()) {
                    fields.insert("kennel_id".to_owned(), id);
                }
                reply
            }
            Err(err) => json!({"error": true, "message": format!("bad request: {err}")}),
        };
        // One reply, one line: compact JSON never contains a newline.
        writeln!(out, "{reply}")?;
        out.flush()?;
    }
    // stdin ended: kennel is closing the worker.
    Ok(())
}
