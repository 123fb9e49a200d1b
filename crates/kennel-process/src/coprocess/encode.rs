//! Writing a job in the worker's framing: a tree through serde, bytes as
//! they are (docs/internals.md).
//!
//! Bytes already checked to be one JSON value are copied, not parsed: the
//! JSON-lines request is the job's bytes and a newline, the JSON-RPC call
//! the envelope around them. A newline or carriage return in checked JSON
//! can only be whitespace between tokens (JSON strings cannot hold them
//! raw), so each is written as a space and the message stays one line.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::rpc;
use crate::error::ProcessError;
use crate::framing::Framing;

/// A job to write.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Job<'a> {
    /// A tree, written through serde.
    Value(&'a Value),
    /// Bytes checked to be one JSON value, written as they are.
    Bytes(&'a [u8]),
}

/// The params of a JSON-RPC call.
#[derive(Debug, Clone, Copy)]
enum Params<'a> {
    None,
    Value(&'a Value),
    Bytes(&'a [u8]),
}

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

/// The keys of params that say they carry their own progress token.
#[derive(Deserialize)]
struct MetaPeek {
    #[serde(default, rename = "_meta")]
    meta: Option<TokenPeek>,
}

#[derive(Deserialize)]
struct TokenPeek {
    #[serde(default, rename = "progressToken")]
    progress_token: Option<Value>,
}

/// The key of the id kennel adds to a JSON-lines request that is an object
/// (and that a worker echoes in its reply).
pub(crate) const ID_KEY: &str = "kennel_id";

/// Writes `job` as JSON lines (the job and a newline) into `out`; with
/// `id`, a job that is an object gets `"kennel_id": id` as its first key
/// (over a `kennel_id` of its own). Returns whether it got it.
///
/// # Errors
///
/// [`ProcessError::Encode`] for a tree serde cannot write.
pub(super) fn line(out: &mut Vec<u8>, job: Job<'_>, id: Option<u64>) -> Result<bool, ProcessError> {
    let encode = |source| ProcessError::Encode { source };
    let carried = match (job, id) {
        (Job::Value(Value::Object(fields)), Some(id)) => {
            write_id(out, id);
            for (key, value) in fields.iter().filter(|(k, _)| *k != ID_KEY) {
                out.push(b',');
                serde_json::to_writer(&mut *out, key).map_err(encode)?;
                out.push(b':');
                serde_json::to_writer(&mut *out, value).map_err(encode)?;
            }
            out.push(b'}');
            true
        }
        (Job::Bytes(b), Some(id)) if b.first() == Some(&b'{') => {
            if has_own_id(b) {
                // Its own `kennel_id` goes: through the tree.
                let tree: Value = serde_json::from_slice(b).map_err(encode)?;
                return line(out, Job::Value(&tree), Some(id));
            }
            write_id(out, id);
            let rest = &b[1..];
            if rest.iter().find(|c| !c.is_ascii_whitespace()) != Some(&b'}') {
                out.push(b',');
            }
            one_line(out, rest);
            true
        }
        (Job::Value(v), _) => {
            serde_json::to_writer(&mut *out, v).map_err(encode)?;
            false
        }
        (Job::Bytes(b), _) => {
            one_line(out, b);
            false
        }
    };
    out.push(b'\n');
    Ok(carried)
}

/// `{"kennel_id":id`, the start of a request that carries its id.
fn write_id(out: &mut Vec<u8>, id: u64) {
    out.extend_from_slice(b"{\"");
    out.extend_from_slice(ID_KEY.as_bytes());
    out.extend_from_slice(b"\":");
    out.extend_from_slice(id.to_string().as_bytes());
}

/// Whether checked JSON bytes of an object have a `kennel_id` key of their
/// own (looked for through serde only when the key, or an escape that could
/// spell it, is in the bytes).
fn has_own_id(b: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct IdPeek {
        #[serde(default, rename = "kennel_id")]
        id: Option<serde::de::IgnoredAny>,
    }
    if !b.contains(&b'\\') && !b.windows(ID_KEY.len()).any(|w| w == ID_KEY.as_bytes()) {
        return false;
    }
    // Duplicate keys fail here: the tree then keeps one.
    serde_json::from_slice::<IdPeek>(b).map_or(true, |p| p.id.is_some())
}

/// Writes `job` as a JSON-RPC call with `id` in `framing` into `out`: the
/// pool's `method` with the job as params, or the job's own method and
/// params. In `json-rpc`, with `token`, object params get
/// `_meta.progressToken` (the id) unless they carry one. Returns the token
/// the call's progress carries.
///
/// # Errors
///
/// [`ProcessError::NotACall`] when, without a method, the job is not a
/// call; [`ProcessError::Encode`] for a tree serde cannot write.
pub(super) fn call(
    out: &mut Vec<u8>,
    framing: Framing,
    id: u64,
    method: Option<&str>,
    job: Job<'_>,
    token: bool,
) -> Result<Value, ProcessError> {
    let (method, params): (Cow<'_, str>, Params<'_>) = match (method, job) {
        (Some(m), Job::Value(v)) => (m.into(), Params::Value(v)),
        (Some(m), Job::Bytes(b)) => (m.into(), Params::Bytes(b)),
        (None, Job::Value(v)) => {
            let (m, p) = rpc::call_of(None, v)?;
            (m.into(), p.map_or(Params::None, Params::Value))
        }
        (None, Job::Bytes(b)) => match serde_json::from_slice::<CallShape<'_>>(b) {
            Ok(shape) => (
                shape.method,
                shape
                    .params
                    .map_or(Params::None, |p| Params::Bytes(p.get().as_bytes())),
            ),
            // Not a call in the fast shape (another key, duplicate keys…):
            // the tree says what is wrong, or writes it.
            Err(_) => {
                let tree: Value =
                    serde_json::from_slice(b).map_err(|source| ProcessError::Encode { source })?;
                return call(out, framing, id, None, Job::Value(&tree), token);
            }
        },
    };
    let own = own_token(params);
    let add_token = token && framing == Framing::JsonRpc && own.is_none();
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.to_string().as_bytes());
    out.extend_from_slice(b",\"method\":");
    serde_json::to_writer(&mut *out, &*method).map_err(|source| ProcessError::Encode { source })?;
    match params {
        Params::None => {}
        Params::Value(v) => {
            out.extend_from_slice(b",\"params\":");
            let with_token = add_token && v.is_object();
            rpc::write_params(out, v, with_token.then_some(id))?;
        }
        Params::Bytes(b) => {
            out.extend_from_slice(b",\"params\":");
            if add_token && b.first() == Some(&b'{') {
                if b.windows(5).any(|w| w == b"_meta") || b.contains(&b'\\') {
                    // A `_meta` to merge into, or keys that may be spelt
                    // with escapes: through the tree.
                    let tree: Value = serde_json::from_slice(b)
                        .map_err(|source| ProcessError::Encode { source })?;
                    rpc::write_params(out, &tree, Some(id))?;
                } else {
                    out.extend_from_slice(b"{\"_meta\":{\"progressToken\":");
                    out.extend_from_slice(id.to_string().as_bytes());
                    out.push(b'}');
                    let rest = &b[1..];
                    if rest.iter().find(|c| !c.is_ascii_whitespace()) != Some(&b'}') {
                        out.push(b',');
                    }
                    one_line(out, rest);
                }
            } else if framing == Framing::ContentLength {
                out.extend_from_slice(b);
            } else {
                one_line(out, b);
            }
        }
    }
    out.push(b'}');
    if framing == Framing::ContentLength {
        let header = format!("Content-Length: {}\r\n\r\n", out.len());
        out.splice(0..0, header.into_bytes());
    } else {
        out.push(b'\n');
    }
    Ok(own.unwrap_or_else(|| id.into()))
}

/// The progress token params carry themselves (`_meta.progressToken`).
fn own_token(params: Params<'_>) -> Option<Value> {
    match params {
        Params::None => None,
        Params::Value(v) => v.get("_meta")?.get("progressToken").cloned(),
        Params::Bytes(b) if b.first() == Some(&b'{') => {
            serde_json::from_slice::<MetaPeek>(b)
                .ok()?
                .meta?
                .progress_token
        }
        Params::Bytes(_) => None,
    }
}

/// Appends checked JSON with each newline and carriage return as a space.
fn one_line(out: &mut Vec<u8>, json: &[u8]) {
    let at = out.len();
    out.extend_from_slice(json);
    if json.iter().any(|&b| b == b'\n' || b == b'\r') {
        for b in &mut out[at..] {
            if *b == b'\n' || *b == b'\r' {
                *b = b' ';
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn written(framing: Framing, method: Option<&str>, job: &str, token: bool) -> String {
        let mut out = Vec::new();
        call(
            &mut out,
            framing,
            7,
            method,
            Job::Bytes(job.as_bytes()),
            token,
        )
        .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn bytes_go_out_as_they_came_on_one_line() {
        let mut out = Vec::new();
        line(&mut out, Job::Bytes(b"{\"b\":1,\r\n \"a\":2.50}"), None).unwrap();
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

    fn with_id(job: Job<'_>) -> (String, bool) {
        let mut out = Vec::new();
        let carried = line(&mut out, job, Some(7)).unwrap();
        (String::from_utf8(out).unwrap(), carried)
    }

    #[test]
    fn only_an_object_job_carries_its_id_first_and_its_own_is_replaced() {
        let bytes = |b: &'static str| with_id(Job::Bytes(b.as_bytes()));
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
        let (text, carried) = with_id(Job::Value(&tree));
        assert!(carried);
        assert!(text.starts_with("{\"kennel_id\":7,"), "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v, json!({"kennel_id": 7, "z": 1, "a": [2]}));
        assert_eq!(with_id(Job::Value(&json!({}))).0, "{\"kennel_id\":7}\n");
        assert_eq!(
            with_id(Job::Value(&json!([1]))),
            ("[1]\n".to_owned(), false)
        );
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
        let mut out = Vec::new();
        let err = call(
            &mut out,
            Framing::JsonRpc,
            1,
            None,
            Job::Bytes(br#"{"method":"m","id":1}"#),
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
        let mut out = Vec::new();
        let w = call(
            &mut out,
            Framing::JsonRpc,
            3,
            Some("m"),
            Job::Bytes(br#"{"_meta":{"progressToken":"abc"}}"#),
            true,
        )
        .unwrap();
        assert_eq!(w, json!("abc"));
        out.clear();
        let w = call(
            &mut out,
            Framing::JsonRpc,
            3,
            Some("m"),
            Job::Bytes(b"{}"),
            false,
        )
        .unwrap();
        assert_eq!(w, json!(3));
    }
}
