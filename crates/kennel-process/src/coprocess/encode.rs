//! Writing a job in the worker's framing into the coprocess's reused
//! buffer: a tree through serde, bytes as they are (docs/internals.md).
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

/// A buffer grown past this is dropped after its request, so that one
/// large job does not keep its memory for the worker's life.
pub(super) const KEEP_BUFFER_BYTES: usize = 64 * 1024;

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

/// What the request in hand needs besides its bytes: the token its
/// progress carries.
#[derive(Debug)]
pub(super) struct Written {
    pub(super) token: Value,
}

/// Writes `job` as JSON lines (the job and a newline) into `out`.
///
/// # Errors
///
/// [`ProcessError::Encode`] for a tree serde cannot write.
pub(super) fn line(out: &mut Vec<u8>, job: Job<'_>) -> Result<(), ProcessError> {
    match job {
        Job::Value(v) => {
            serde_json::to_writer(&mut *out, v)
                .map_err(|source| ProcessError::Encode { source })?;
        }
        Job::Bytes(b) => one_line(out, b),
    }
    out.push(b'\n');
    Ok(())
}

/// Writes `job` as a JSON-RPC call with `id` in `framing` into `out`: the
/// pool's `method` with the job as params, or the job's own method and
/// params. In `json-rpc`, with `token`, object params get
/// `_meta.progressToken` (the id) unless they carry one.
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
) -> Result<Written, ProcessError> {
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
    write_number(out, id);
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
                    write_number(out, id);
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
    Ok(Written {
        token: own.unwrap_or_else(|| id.into()),
    })
}

/// The progress token params carry themselves (`_meta.progressToken`).
fn own_token(params: Params<'_>) -> Option<Value> {
    match params {
        Params::None => None,
        Params::Value(v) => v.get("_meta")?.get("progressToken").cloned(),
        Params::Bytes(b) => {
            if b.first() != Some(&b'{') || !b.windows(13).any(|w| w == b"progressToken") {
                // Without the key spelt out, none (an escaped spelling is
                // looked for through serde below).
                if !b.contains(&b'\\') {
                    return None;
                }
            }
            serde_json::from_slice::<MetaPeek>(b)
                .ok()?
                .meta?
                .progress_token
        }
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

fn write_number(out: &mut Vec<u8>, n: u64) {
    use std::io::Write;
    // Writing to a Vec cannot fail.
    let _ = write!(out, "{n}");
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
        line(&mut out, Job::Bytes(b"{\"b\":1,\r\n \"a\":2.50}")).unwrap();
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
        assert_eq!(w.token, json!("abc"));
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
        assert_eq!(w.token, json!(3));
    }
}
