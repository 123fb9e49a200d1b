//! The reference reading of the protocol (docs/PROTOCOL.md) that the
//! property tests hold a worker's answers against.

use serde_json::Value;

/// What the protocol says a worker's output must give.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expect {
    Reply(Value),
    WorkerError(String),
    Protocol,
    Crashed,
}

/// The reference reading of `out`, written by a worker that then exits.
pub(crate) fn expect_reply(out: &[u8], limit: usize) -> Expect {
    let mut rest = out;
    loop {
        let (line, more) = match rest.iter().position(|&b| b == b'\n') {
            Some(at) => (&rest[..at], Some(&rest[at + 1..])),
            None => (rest, None),
        };
        if line.len() > limit {
            return Expect::Protocol;
        }
        // A last line with no newline is never a reply: the stream ended.
        let Some(more) = more else {
            return Expect::Crashed;
        };
        rest = more;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        return match serde_json::from_slice::<Value>(line) {
            Ok(v) if v.get("error") == Some(&Value::Bool(true)) => {
                Expect::WorkerError(error_message(&v))
            }
            // A second ready line is never a reply (ADR 0036).
            Ok(v) if v.get("ready") == Some(&Value::Bool(true)) => Expect::Protocol,
            // A progress line: read on for the reply.
            Ok(v) if is_progress(&v) => continue,
            Ok(v) => Expect::Reply(v),
            Err(_) => Expect::Protocol,
        };
    }
}

/// Whether `out` goes on, after the line the reference takes as the reply
/// (or error reply), with more than whitespace: a line no request asked for.
pub(crate) fn more_after_reply(out: &[u8]) -> bool {
    let mut rest = out;
    while let Some(at) = rest.iter().position(|&b| b == b'\n') {
        let line = &rest[..at];
        rest = &rest[at + 1..];
        let skipped = line.iter().all(u8::is_ascii_whitespace)
            || serde_json::from_slice::<Value>(line).is_ok_and(|v| is_progress(&v));
        if !skipped {
            return rest.iter().any(|b| !b.is_ascii_whitespace());
        }
    }
    false
}

/// `{"progress": …}` with at most `total` and a string `message` besides.
fn is_progress(v: &Value) -> bool {
    let Some(map) = v.as_object() else {
        return false;
    };
    map.get("progress").is_some_and(|p| !p.is_null())
        && map
            .keys()
            .all(|k| matches!(k.as_str(), "progress" | "total" | "message"))
        && map
            .get("message")
            .is_none_or(|m| m.is_string() || m.is_null())
}

fn error_message(v: &Value) -> String {
    match v.get("message") {
        Some(Value::String(m)) if !m.is_empty() => m.clone(),
        None | Some(Value::Null) | Some(Value::String(_)) => {
            "worker returned an error with no message".to_owned()
        }
        Some(other) => other.to_string(),
    }
}

/// What the reference says `ready()` gives when the worker writes `pre`
/// and a newline before its own ready line.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ExpectReady {
    Ready,
    NotReady(String),
    Protocol,
}

pub(crate) fn expect_ready(pre: &[u8], limit: usize) -> ExpectReady {
    for line in pre.split(|&b| b == b'\n') {
        if line.len() > limit {
            return ExpectReady::Protocol;
        }
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Value>(line) {
            Ok(v) if v.get("ready") == Some(&Value::Bool(true)) => return ExpectReady::Ready,
            Ok(v) if v.get("error") == Some(&Value::Bool(true)) => {
                return ExpectReady::NotReady(error_message(&v));
            }
            // Anything else before the ready line is skipped.
            _ => {}
        }
    }
    ExpectReady::Ready
}
