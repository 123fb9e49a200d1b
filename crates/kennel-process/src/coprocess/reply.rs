//! What one JSON-lines line after the ready line is: the reply, an error
//! reply, a progress line, or a second ready line (never a reply).

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::error::{NO_MESSAGE, ProcessError};
use crate::json::JsonBytes;
use crate::lines::excerpt;
use crate::progress::Progress;

/// One line, read while a request is in hand.
#[derive(Debug)]
pub(super) enum LineKind {
    /// The reply, as the worker wrote it (the line itself: no copy).
    Reply(JsonBytes),
    /// `{"error":true,…}`.
    Error(ProcessError),
    /// `{"progress":…}` with at most `total` and `message` besides.
    Progress(Progress),
    /// `{"ready":true,…}` again: output no request asked for.
    Ready,
    /// Not JSON: why, and an excerpt of the line.
    NotJson(String, String),
}

/// The keys that decide what an object line is.
#[derive(Deserialize)]
struct Peek<'a> {
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
    #[serde(borrow, default)]
    ready: Option<&'a RawValue>,
    #[serde(borrow, default)]
    progress: Option<&'a RawValue>,
}

/// A progress line has these keys and no other.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProgressLine {
    progress: Value,
    #[serde(default)]
    total: Option<Value>,
    #[serde(default)]
    message: Option<String>,
}

pub(super) fn classify(bytes: Vec<u8>) -> LineKind {
    let reply = match JsonBytes::check(bytes) {
        Ok(reply) => reply,
        Err((err, bytes)) => return LineKind::NotJson(err.to_string(), excerpt(&bytes)),
    };
    let text = reply.as_str();
    if !text.starts_with('{') {
        return LineKind::Reply(reply);
    }
    let Ok(peek) = serde_json::from_str::<Peek<'_>>(text) else {
        // Duplicate keys, say: never one of the kinds below.
        return LineKind::Reply(reply);
    };
    if peek.error.is_some_and(|e| e.get() == "true") {
        return LineKind::Error(error_reply(text));
    }
    if peek.ready.is_some_and(|r| r.get() == "true") {
        return LineKind::Ready;
    }
    if peek.progress.is_some()
        && let Ok(p) = serde_json::from_str::<ProgressLine>(text)
    {
        return LineKind::Progress(Progress::new(p.progress, p.total, p.message));
    }
    LineKind::Reply(reply)
}

/// `{"error":true,"message":…,…}` as a worker error with its other fields.
pub(super) fn error_reply(text: &str) -> ProcessError {
    let mut fields: Map<String, Value> = serde_json::from_str(text).unwrap_or_default();
    fields.remove("error");
    let message = message_of(fields.remove("message"));
    ProcessError::Worker {
        message,
        fields,
        rpc_code: None,
    }
}

pub(super) fn message_of(message: Option<Value>) -> String {
    match message {
        Some(Value::String(message)) if !message.is_empty() => message,
        None | Some(Value::Null) | Some(Value::String(_)) => NO_MESSAGE.to_owned(),
        Some(other) => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(line: &str) -> String {
        match classify(line.as_bytes().to_vec()) {
            LineKind::Reply(raw) => format!("reply {raw}"),
            LineKind::Error(e) => format!("error {e}"),
            LineKind::Progress(p) => format!("progress {}", p.to_json()),
            LineKind::Ready => "ready".into(),
            LineKind::NotJson(..) => "not json".into(),
        }
    }

    #[test]
    fn each_kind_of_line_is_told_apart() {
        assert_eq!(kind(r#"{"b":1, "a":2.50}"#), r#"reply {"b":1, "a":2.50}"#);
        assert_eq!(kind("[1,2]"), "reply [1,2]");
        assert_eq!(kind(r#"{"error":false}"#), r#"reply {"error":false}"#);
        assert_eq!(
            kind(r#"{"error":true,"message":"no"}"#),
            "error worker reported an error: no"
        );
        assert_eq!(
            kind(r#"{"progress":3,"total":10,"message":"page 3"}"#),
            r#"progress {"message":"page 3","progress":3,"total":10}"#
        );
        assert_eq!(
            kind(r#"{"progress":3,"pages":[]}"#),
            r#"reply {"progress":3,"pages":[]}"#,
            "other keys: a reply"
        );
        assert_eq!(kind(r#"{"ready":true}"#), "ready");
        assert_eq!(kind("hello"), "not json");
    }

    #[test]
    fn an_error_reply_keeps_its_fields() {
        let ProcessError::Worker {
            message, fields, ..
        } = error_reply(r#"{"error":true,"message":"too long","status":422,"code":"too_long"}"#)
        else {
            panic!()
        };
        assert_eq!(message, "too long");
        assert_eq!(
            Value::Object(fields),
            serde_json::json!({"status":422,"code":"too_long"})
        );
    }
}
