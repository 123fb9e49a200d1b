//! What one JSON-lines line after the ready line is: the reply, an error
//! reply, a progress line, or a second ready line (never a reply); and the
//! job id it carries, if any.

use std::ops::Range;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::encode::ID_KEY;
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
    /// `{"progress":…}` with at most `total`, `message` and `kennel_id`
    /// besides.
    Progress(Progress),
    /// `{"ready":true,…}` again: output no request asked for.
    Ready,
    /// Not JSON: why, and an excerpt of the line.
    NotJson(String, String),
}

/// The `kennel_id` a line carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum LineId {
    /// None: a line that is not an object, or an object without the key.
    Absent,
    /// A job's id; for a reply, where the member `"kennel_id": n` is in
    /// it (with a comma), when it is spelt plainly.
    Id(u64, Option<Range<usize>>),
    /// A value that is no job's id, as written.
    Other(String),
}

/// One line, classified.
#[derive(Debug)]
pub(super) struct Line {
    pub(super) kind: LineKind,
    pub(super) id: LineId,
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
    #[serde(borrow, default, rename = "kennel_id")]
    id: Option<&'a RawValue>,
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
    #[serde(default, rename = "kennel_id")]
    _id: Option<serde::de::IgnoredAny>,
}

pub(super) fn classify(bytes: Vec<u8>) -> Line {
    let reply = match JsonBytes::check(bytes) {
        Ok(reply) => reply,
        Err((err, bytes)) => {
            return Line {
                kind: LineKind::NotJson(err.to_string(), excerpt(&bytes)),
                id: LineId::Absent,
            };
        }
    };
    let text = reply.as_str();
    if !text.starts_with('{') {
        return Line {
            kind: LineKind::Reply(reply),
            id: LineId::Absent,
        };
    }
    let Ok(peek) = serde_json::from_str::<Peek<'_>>(text) else {
        // Duplicate keys, say: never one of the kinds below.
        return Line {
            kind: LineKind::Reply(reply),
            id: LineId::Absent,
        };
    };
    let id = match peek.id {
        None => LineId::Absent,
        Some(raw) => match raw.get().parse::<u64>() {
            Ok(n) => LineId::Id(n, member(text, raw.get())),
            Err(_) => LineId::Other(raw.get().to_owned()),
        },
    };
    let kind = if peek.error.is_some_and(|e| e.get() == "true") {
        LineKind::Error(error_reply(text))
    } else if peek.ready.is_some_and(|r| r.get() == "true") {
        LineKind::Ready
    } else if peek.progress.is_some()
        && let Ok(p) = serde_json::from_str::<ProgressLine>(text)
    {
        LineKind::Progress(Progress::new(p.progress, p.total, p.message))
    } else {
        LineKind::Reply(reply)
    };
    Line { kind, id }
}

/// Where the member whose value is `value` (a slice of `text`, a top-level
/// object) is, with the comma that joins it to another: `None` when its
/// key is not spelt plainly as `"kennel_id"`.
fn member(text: &str, value: &str) -> Option<Range<usize>> {
    let blank = |c: char| matches!(c, ' ' | '\t' | '\n' | '\r');
    let value_at = (value.as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
    let end = value_at + value.len();
    let before = text.get(..value_at)?.trim_end_matches(blank);
    let before = before.strip_suffix(':')?.trim_end_matches(blank);
    let key_at = before
        .strip_suffix('"')?
        .strip_suffix(ID_KEY)?
        .strip_suffix('"')?
        .len();
    let head = text[..key_at].trim_end_matches(blank);
    if head.ends_with(',') {
        return Some(head.len() - 1..end);
    }
    let after = &text[end..];
    let rest = after.trim_start_matches(blank);
    if rest.starts_with(',') {
        return Some(key_at..end + (after.len() - rest.len()) + 1);
    }
    Some(key_at..end)
}

/// The reply with its `kennel_id` taken out, the rest byte for byte
/// (through the tree when the key is spelt with escapes).
pub(super) fn without_id(mut reply: JsonBytes, at: Option<Range<usize>>) -> JsonBytes {
    if let Some(at) = at {
        reply.cut(at);
        return reply;
    }
    match reply.to_value() {
        Ok(Value::Object(mut fields)) => {
            fields.remove(ID_KEY);
            JsonBytes::from_value(&Value::Object(fields)).unwrap_or(reply)
        }
        _ => reply,
    }
}

/// `{"error":true,"message":…,…}` as a worker error with its other fields
/// (its `kennel_id` left out).
pub(super) fn error_reply(text: &str) -> ProcessError {
    let mut fields: Map<String, Value> = serde_json::from_str(text).unwrap_or_default();
    fields.remove("error");
    fields.remove(ID_KEY);
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
        match classify(line.as_bytes().to_vec()).kind {
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

    /// The reply to job 7 as handed on, from the line the worker wrote.
    fn taken(line: &str) -> String {
        let Line {
            kind: LineKind::Reply(raw),
            id: LineId::Id(7, at),
        } = classify(line.as_bytes().to_vec())
        else {
            panic!("not a reply to job 7: {line}")
        };
        without_id(raw, at).as_str().to_owned()
    }

    #[test]
    fn the_id_comes_out_of_a_reply_and_the_rest_stays_byte_for_byte() {
        assert_eq!(
            taken(r#"{"kennel_id":7,"b":1, "a":2.50}"#),
            r#"{"b":1, "a":2.50}"#
        );
        assert_eq!(
            taken(r#"{"b":1 , "kennel_id" : 7 , "a":2.50}"#),
            r#"{"b":1  , "a":2.50}"#
        );
        assert_eq!(taken(r#"{"b":[1], "kennel_id":7}"#), r#"{"b":[1]}"#);
        assert_eq!(taken(r#"{ "kennel_id":7 }"#), "{  }");
        assert_eq!(taken(r#"{"kennel\u005fid":7,"a":2.50}"#), r#"{"a":2.5}"#);
        assert_eq!(
            taken(r#"{"a":{"kennel_id":1},"kennel_id":7}"#),
            r#"{"a":{"kennel_id":1}}"#
        );
    }

    #[test]
    fn a_line_says_which_job_it_is_for() {
        let id = |line: &str| classify(line.as_bytes().to_vec()).id;
        assert_eq!(id(r#"{"a":1}"#), LineId::Absent);
        assert_eq!(id(r#"[{"kennel_id":1}]"#), LineId::Absent);
        assert_eq!(id(r#"{"kennel_id":"x"}"#), LineId::Other("\"x\"".into()));
        assert!(matches!(
            id(r#"{"error":true,"kennel_id":3}"#),
            LineId::Id(3, _)
        ));
        let line = classify(br#"{"kennel_id":3,"progress":1,"total":2}"#.to_vec());
        assert!(matches!(line.kind, LineKind::Progress(_)), "{line:?}");
        let ProcessError::Worker { fields, .. } =
            error_reply(r#"{"kennel_id":3,"error":true,"code":1}"#)
        else {
            panic!()
        };
        assert_eq!(Value::Object(fields), serde_json::json!({"code": 1}));
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
