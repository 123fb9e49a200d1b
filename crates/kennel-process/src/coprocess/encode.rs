//! Writing a job in the worker's framing (docs/internals.md): its checked
//! bytes copied, not parsed, into a line or a call's envelope; through a
//! tree only where it must change (kennel's id over its own, a token merged
//! into its `_meta`). A newline or carriage return in checked JSON can only
//! be whitespace between tokens, so each is written as a space.

use std::borrow::Cow;
use std::io::Write;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::rpc;
use crate::error::ProcessError;
use crate::framing::Framing;

/// A job that is itself a call: `{"method": …, "params": …}` and no other
/// key.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallShape<'a> {
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

/// The key of params that may carry their own progress token.
#[derive(Deserialize)]
struct MetaPeek {
    #[serde(default, rename = "_meta")]
    meta: Option<Map<String, Value>>,
}

/// The key of the id kennel adds to a JSON-lines request that is an object
/// (and that a worker echoes in its reply).
pub(crate) const ID_KEY: &str = "kennel_id";

/// `value` as the bytes of a job.
///
/// # Errors
///
/// [`ProcessError::Encode`] for a value serde cannot write.
pub(super) fn json<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, ProcessError> {
    serde_json::to_vec(value).map_err(encode)
}

fn encode(source: serde_json::Error) -> ProcessError {
    ProcessError::Encode { source }
}

/// `job` (checked JSON, without whitespace around it) as a JSON-lines
/// request: the job and a newline; with `id`, a job that is an object gets
/// `"kennel_id": id` as its first key (over a `kennel_id` of its own).
/// Returns whether it got it.
pub(super) fn line(job: &[u8], id: Option<u64>) -> Result<(Vec<u8>, bool), ProcessError> {
    let mut out = Vec::new();
    let carried = match id {
        Some(id) if job.first() == Some(&b'{') => {
            let _ = write!(out, "{{\"{ID_KEY}\":{id}");
            if has_own_id(job) {
                // Its own `kennel_id` goes: through the tree.
                let mut tree: Map<String, Value> = serde_json::from_slice(job).map_err(encode)?;
                tree.remove(ID_KEY);
                rest_of_object(&mut out, &json(&tree)?);
            } else {
                rest_of_object(&mut out, job);
            }
            true
        }
        _ => {
            one_line(&mut out, job);
            false
        }
    };
    out.push(b'\n');
    Ok((out, carried))
}

/// Whether checked JSON bytes of an object have a `kennel_id` key of their
/// own (or duplicate keys, which the tree makes one).
fn has_own_id(b: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct IdPeek {
        #[serde(default, rename = "kennel_id")]
        id: Option<serde::de::IgnoredAny>,
    }
    serde_json::from_slice::<IdPeek>(b).map_or(true, |p| p.id.is_some())
}

/// `job` (checked JSON, without whitespace around it) as a JSON-RPC call
/// with `id` in `framing`: the pool's `method` with the job as params, or
/// the job's own method and params. In `json-rpc`, with `token`, object
/// params get `_meta.progressToken` (the id) unless they carry one.
/// Returns the call and the token its progress carries.
///
/// # Errors
///
/// [`ProcessError::NotACall`] when, without a method, the job is not a
/// call; [`ProcessError::Encode`] for a job serde cannot read back.
pub(super) fn call(
    framing: Framing,
    id: u64,
    method: Option<&str>,
    job: &[u8],
    token: bool,
) -> Result<(Vec<u8>, Value), ProcessError> {
    let (method, params) = match method {
        Some(m) => (Cow::Borrowed(m), Some(job)),
        None => match serde_json::from_slice::<CallShape<'_>>(job) {
            Ok(shape) => (shape.method, shape.params.map(|p| p.get().as_bytes())),
            // Not a call in this shape (another key, duplicate keys…): the
            // tree says what is wrong, or is written again without it.
            Err(_) => {
                let tree: Value = serde_json::from_slice(job).map_err(encode)?;
                check_call(&tree)?;
                return call(framing, id, None, &json(&tree)?, token);
            }
        },
    };
    let own = params.and_then(own_token);
    let add_token = token && framing == Framing::JsonRpc && own.is_none();
    let mut out = Vec::new();
    let _ = write!(out, "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":");
    serde_json::to_writer(&mut out, &*method).map_err(encode)?;
    if let Some(params) = params {
        out.extend_from_slice(b",\"params\":");
        if add_token && params.first() == Some(&b'{') {
            if params.windows(5).any(|w| w == b"_meta") || params.contains(&b'\\') {
                // A `_meta` to merge into, or keys that may be spelt with
                // escapes: through the tree.
                let mut tree: Map<String, Value> =
                    serde_json::from_slice(params).map_err(encode)?;
                let meta = tree.entry("_meta").or_insert_with(|| json!({}));
                if !meta.is_object() {
                    *meta = json!({});
                }
                meta["progressToken"] = id.into();
                serde_json::to_writer(&mut out, &tree).map_err(encode)?;
            } else {
                let _ = write!(out, "{{\"_meta\":{{\"progressToken\":{id}}}");
                rest_of_object(&mut out, params);
            }
        } else if framing == Framing::ContentLength {
            out.extend_from_slice(params);
        } else {
            one_line(&mut out, params);
        }
    }
    out.push(b'}');
    Ok((rpc::frame(framing, out), own.unwrap_or_else(|| id.into())))
}

/// Checks that a job is a method call: `{"method": "…", "params": …}`.
fn check_call(job: &Value) -> Result<(), ProcessError> {
    let not_a_call = |why: &str| ProcessError::NotACall {
        message: format!(
            "{why} (allowed: {{\"method\": \"…\", \"params\": …}}, or a pool with a method)"
        ),
    };
    let Value::Object(map) = job else {
        return Err(not_a_call("it is not an object"));
    };
    let Some(Value::String(_)) = map.get("method") else {
        return Err(not_a_call("it has no \"method\" string"));
    };
    if let Some(key) = map.keys().find(|k| *k != "method" && *k != "params") {
        return Err(not_a_call(&format!("it has the key {key:?}")));
    }
    Ok(())
}

/// The progress token params carry themselves (`_meta.progressToken`).
fn own_token(params: &[u8]) -> Option<Value> {
    if params.first() != Some(&b'{') {
        return None;
    }
    let peek = serde_json::from_slice::<MetaPeek>(params).ok()?;
    peek.meta?.remove("progressToken").filter(|t| !t.is_null())
}

/// Appends the rest of the checked JSON object `object` after a member
/// already written: a comma unless it has no member, then its members.
fn rest_of_object(out: &mut Vec<u8>, object: &[u8]) {
    let rest = &object[1..];
    if rest.iter().find(|c| !c.is_ascii_whitespace()) != Some(&b'}') {
        out.push(b',');
    }
    one_line(out, rest);
}

/// Appends checked JSON with each newline and carriage return as a space.
fn one_line(out: &mut Vec<u8>, json: &[u8]) {
    out.extend(json.iter().map(|&b| match b {
        b'\n' | b'\r' => b' ',
        b => b,
    }));
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn written(framing: Framing, method: Option<&str>, job: &str, token: bool) -> String {
        let (out, _) = call(framing, 7, method, job.as_bytes(), token).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn bytes_go_out_as_they_came_on_one_line() {
        let (out, _) = line(b"{\"b\":1,\r\n \"a\":2.50}", None).unwrap();
        assert_eq!(out, b"{\"b\":1,   \"a\":2.50}\n");
        assert_eq!(
            written(
                Framing::JsonRpc,
                Some("tools/call"),
                r#"{"z":1,"a":[]}"#,
                false
            ),
            "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"z\":1,\"a\":[]}}\n"
        );
    }

    fn with_id(job: &[u8]) -> (String, bool) {
        let (out, carried) = line(job, Some(7)).unwrap();
        (String::from_utf8(out).unwrap(), carried)
    }

    #[test]
    fn only_an_object_job_carries_its_id_first_and_its_own_is_replaced() {
        let bytes = |b: &'static str| with_id(b.as_bytes());
        assert_eq!(
            bytes(r#"{"b":1, "a":2.50}"#),
            ("{\"kennel_id\":7,\"b\":1, \"a\":2.50}\n".to_owned(), true)
        );
        assert_eq!(bytes("{ }"), ("{\"kennel_id\":7 }\n".to_owned(), true));
        assert_eq!(bytes("[1,2]"), ("[1,2]\n".to_owned(), false));
        assert_eq!(bytes("\"text\""), ("\"text\"\n".to_owned(), false));
        assert_eq!(
            bytes(r#"{"a":"kennel_id \" x"}"#),
            (
                "{\"kennel_id\":7,\"a\":\"kennel_id \\\" x\"}\n".to_owned(),
                true
            ),
            "the key's name in a value, an escape: the bytes as they are"
        );
        for own in [r#"{"kennel_id":3,"a":1}"#, r#"{"kennel\u005fid":3,"a":1}"#] {
            let (text, carried) = bytes(own);
            assert!(carried);
            let v: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(v, json!({"kennel_id": 7, "a": 1}), "{own}");
        }
        let tree = json!({"z": 1, "kennel_id": "mine", "a": [2]});
        let (text, carried) = with_id(&json(&tree).unwrap());
        assert!(carried);
        assert!(text.starts_with("{\"kennel_id\":7,"), "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v, json!({"kennel_id": 7, "z": 1, "a": [2]}));
        assert_eq!(with_id(b"{}").0, "{\"kennel_id\":7}\n");
        assert_eq!(with_id(b"[1]"), ("[1]\n".to_owned(), false));
    }

    #[test]
    fn a_token_is_added_only_when_asked_for_and_missing() {
        let with = written(Framing::JsonRpc, Some("m"), r#"{"z":1}"#, true);
        assert_eq!(
            with,
            "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"m\",\"params\":{\"_meta\":{\"progressToken\":7},\"z\":1}}\n"
        );
        let empty = written(Framing::JsonRpc, Some("m"), "{ }", true);
        let v: Value = serde_json::from_str(&empty).unwrap();
        assert_eq!(v["params"], json!({"_meta": {"progressToken": 7}}));
        let merged = written(
            Framing::JsonRpc,
            Some("m"),
            r#"{"_meta":{"k":1},"z":1}"#,
            true,
        );
        let v: Value = serde_json::from_str(&merged).unwrap();
        assert_eq!(
            v["params"],
            json!({"_meta": {"k": 1, "progressToken": 7}, "z": 1})
        );
        let own = written(
            Framing::JsonRpc,
            Some("m"),
            r#"{"_meta":{"progressToken":"t"}}"#,
            true,
        );
        let v: Value = serde_json::from_str(&own).unwrap();
        assert_eq!(v["params"], json!({"_meta": {"progressToken": "t"}}));
        assert!(!written(Framing::ContentLength, Some("m"), r#"{"z":1}"#, true).contains("_meta"));
    }

    #[test]
    fn a_job_that_is_a_call_keeps_its_method_and_params_and_others_are_refused() {
        let text = written(
            Framing::JsonRpc,
            None,
            r#"{"method":"echo","params":[1, 2]}"#,
            false,
        );
        assert_eq!(
            text,
            "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"echo\",\"params\":[1, 2]}\n"
        );
        let err = call(
            Framing::JsonRpc,
            1,
            None,
            br#"{"method":"m","id":1}"#,
            false,
        )
        .unwrap_err();
        assert!(err.to_string().contains("it has the key \"id\""), "{err}");
        let framed = written(Framing::ContentLength, Some("m"), "[1,\n2]", false);
        let (head, body) = framed.split_once("\r\n\r\n").unwrap();
        assert_eq!(head, format!("Content-Length: {}", body.len()));
        assert!(body.ends_with("\"params\":[1,\n2]}"));
    }

    #[test]
    fn the_token_a_job_carries_is_the_one_its_progress_is_matched_by() {
        let job = br#"{"_meta":{"progressToken":"abc"}}"#;
        let (_, w) = call(Framing::JsonRpc, 3, Some("m"), job, true).unwrap();
        assert_eq!(w, json!("abc"));
        let (_, w) = call(Framing::JsonRpc, 3, Some("m"), b"{}", false).unwrap();
        assert_eq!(w, json!(3));
    }

    #[test]
    fn a_job_is_a_call_only_in_the_shape_of_one() {
        let text = written(
            Framing::JsonRpc,
            None,
            r#"{"params":[1],"method":"m"}"#,
            false,
        );
        assert!(text.contains(r#""method":"m","params":[1]}"#), "{text}");
        let dup = written(
            Framing::JsonRpc,
            None,
            r#"{"method":"a","method":"m"}"#,
            false,
        );
        assert!(dup.contains(r#""method":"m"}"#), "{dup}");
        for (job, why) in [
            ("[1]", "it is not an object"),
            (r#"{"text":"x"}"#, "it has no \"method\" string"),
            (r#"{"method":"m","id":1}"#, "it has the key \"id\""),
        ] {
            let err = call(Framing::JsonRpc, 1, None, job.as_bytes(), false).unwrap_err();
            assert!(err.to_string().contains(why), "{err}");
        }
        let text = written(
            Framing::JsonRpc,
            Some("tools/call"),
            r#"{"name":"t"}"#,
            false,
        );
        assert!(text.ends_with("\"method\":\"tools/call\",\"params\":{\"name\":\"t\"}}\n"));
    }
}
