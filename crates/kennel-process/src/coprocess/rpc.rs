//! JSON-RPC 2.0 messages: the requests and notifications kennel writes, and
//! what a message from the worker is, for the request in hand.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::reply::message_of;
use crate::error::ProcessError;
use crate::framing::Framing;
use crate::json::null;
use crate::progress::Progress;

/// What a message from the worker is.
#[derive(Debug)]
pub(super) enum Inbound {
    /// A response: its id when it is a whole number, and its outcome.
    Response {
        id: Option<u64>,
        outcome: Result<Box<RawValue>, ProcessError>,
    },
    /// A progress notification with this token.
    Progress { token: Value, progress: Progress },
    /// A request from the worker to kennel (MCP's `ping`, `roots/list`,
    /// LSP's `workspace/configuration`…).
    Request {
        id: Box<RawValue>,
        method: String,
        params: Option<Value>,
    },
    /// Any other notification.
    Notification,
    /// Not a JSON-RPC message: why.
    NotRpc(String),
}

/// Why JSON that is no JSON-RPC message is skipped.
const NOT_RPC: &str = "JSON, but not a JSON-RPC message";

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    params: Option<Value>,
}

pub(super) fn classify(bytes: &[u8]) -> Inbound {
    // A derived struct would also read an array.
    let object = bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    let envelope = match serde_json::from_slice::<Envelope<'_>>(bytes) {
        Ok(envelope) if object => envelope,
        _ => {
            return match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
                Ok(_) => Inbound::NotRpc(NOT_RPC.to_owned()),
                Err(err) => Inbound::NotRpc(err.to_string()),
            };
        }
    };
    if let Some(method) = envelope.method {
        return match envelope.id {
            Some(id) => Inbound::Request {
                id: id.to_owned(),
                method: method.into_owned(),
                params: envelope.params,
            },
            None => match progress_of(&method, envelope.params) {
                Some((token, progress)) => Inbound::Progress { token, progress },
                None => Inbound::Notification,
            },
        };
    }
    let Some(id) = envelope.id else {
        return match envelope.error {
            // `"id": null`: the worker could not read a request. Nobody's
            // reply.
            Some(error) if !error.is_null() => Inbound::Response {
                id: None,
                outcome: Err(failure(error)),
            },
            _ => Inbound::NotRpc(NOT_RPC.to_owned()),
        };
    };
    let id = serde_json::from_str::<u64>(id.get()).ok();
    let outcome = match envelope.error {
        Some(error) if !error.is_null() => Err(failure(error)),
        _ => Ok(envelope.result.map_or_else(null, |r| r.to_owned())),
    };
    Inbound::Response { id, outcome }
}

/// A JSON-RPC error object as a worker error with its code, message and
/// data.
fn failure(error: Value) -> ProcessError {
    let Value::Object(mut error) = error else {
        return ProcessError::Worker {
            message: message_of(Some(error)),
            fields: Map::new(),
            rpc_code: None,
        };
    };
    let rpc_code = error.get("code").and_then(Value::as_i64);
    let message = message_of(error.remove("message"));
    let fields = match error.remove("data") {
        Some(Value::Object(data)) => data,
        None | Some(Value::Null) => Map::new(),
        Some(other) => Map::from_iter([("data".to_owned(), other)]),
    };
    ProcessError::Worker {
        message,
        fields,
        rpc_code,
    }
}

/// MCP's `notifications/progress` (`progressToken`) or LSP's `$/progress`
/// (`token`, `value`).
fn progress_of(method: &str, params: Option<Value>) -> Option<(Value, Progress)> {
    let Some(Value::Object(mut params)) = params else {
        return None;
    };
    match method {
        "notifications/progress" => {
            let token = params.remove("progressToken")?;
            Some((token, Progress::from_object(params)))
        }
        "$/progress" => {
            let token = params.remove("token")?;
            let progress = match params.remove("value") {
                Some(Value::Object(value)) => Progress::from_object(value),
                Some(other) => Progress::new(other, None, None),
                None => Progress::new(Value::Null, None, None),
            };
            Some((token, progress))
        }
        _ => None,
    }
}

/// A request of kennel's own with `id` (the handshake, a ping), or without
/// one a notification, framed (without params when `None`).
pub(super) fn message(
    framing: Framing,
    id: Option<u64>,
    method: &str,
    params: Option<&Value>,
) -> Vec<u8> {
    let mut body = json!({"jsonrpc": "2.0", "method": method});
    if let Some(id) = id {
        body["id"] = id.into();
    }
    if let Some(params) = params {
        body["params"] = params.clone();
    }
    frame(framing, body.to_string().into_bytes())
}

/// A response to a request of the worker's, framed: `result`, or without
/// one "method not found" (the spec's answers decide which).
pub(super) fn answer(
    framing: Framing,
    id: &RawValue,
    method: &str,
    result: Option<Value>,
) -> Vec<u8> {
    let id: Value = serde_json::from_str(id.get()).unwrap_or(Value::Null);
    let body = match result {
        Some(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        None => json!({"jsonrpc": "2.0", "id": id, "error": {
            "code": -32601,
            "message": format!("kennel does not serve {method:?}"),
        }}),
    };
    frame(framing, body.to_string().into_bytes())
}

/// The cancel notification of the framing, for request `id`.
pub(super) fn cancel(framing: Framing, id: u64) -> Vec<u8> {
    let (method, params) = match framing {
        Framing::ContentLength => ("$/cancelRequest", json!({"id": id})),
        _ => (
            "notifications/cancelled",
            json!({"requestId": id, "reason": "the job was aborted or timed out"}),
        ),
    };
    message(framing, None, method, Some(&params))
}

/// `body` framed: a line, or a `Content-Length` frame.
pub(super) fn frame(framing: Framing, mut body: Vec<u8>) -> Vec<u8> {
    if framing == Framing::ContentLength {
        let mut framed = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        framed.append(&mut body);
        framed
    } else {
        body.push(b'\n');
        body
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_gets_a_progress_token_in_json_rpc_only() {
        let params = json!({"name": "x"});
        let request = |framing, method| {
            let job = super::super::encode::json(&params).unwrap();
            super::super::encode::call(framing, 7, Some(method), &job, true)
                .unwrap()
                .0
        };
        let line = request(Framing::JsonRpc, "tools/call");
        let v: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(v["params"]["_meta"]["progressToken"], 7);
        assert_eq!(v["params"]["name"], "x");
        assert!(line.ends_with(b"\n"));
        let framed = request(Framing::ContentLength, "m");
        let text = String::from_utf8(framed).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert_eq!(head, format!("Content-Length: {}", body.len()));
        assert!(!body.contains("_meta"));
    }

    #[test]
    fn responses_progress_and_requests_are_told_apart() {
        let r = classify(br#"{"jsonrpc":"2.0","id":3,"result":{"b":1,"a":[1.50]}}"#);
        let Inbound::Response {
            id: Some(3),
            outcome: Ok(raw),
        } = r
        else {
            panic!("{r:?}")
        };
        assert_eq!(raw.get(), r#"{"b":1,"a":[1.50]}"#);
        let r = classify(br#"{"jsonrpc":"2.0","id":3,"result":null}"#);
        assert!(
            matches!(r, Inbound::Response { id: Some(3), outcome: Ok(raw) } if raw.get() == "null")
        );
        let r = classify(br#"{"jsonrpc":"2.0","id":4,"error":{"code":-32000,"message":"no","data":{"status":422}}}"#);
        let Inbound::Response {
            id: Some(4),
            outcome:
                Err(ProcessError::Worker {
                    message,
                    fields,
                    rpc_code,
                }),
        } = r
        else {
            panic!()
        };
        assert_eq!((message.as_str(), rpc_code), ("no", Some(-32000)));
        assert_eq!(fields["status"], 422);
        let r = classify(br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":5,"progress":1,"total":2}}"#);
        assert!(matches!(r, Inbound::Progress { token, .. } if token == 5));
        let r = classify(br#"{"jsonrpc":"2.0","method":"$/progress","params":{"token":5,"value":{"progress":1}}}"#);
        assert!(matches!(r, Inbound::Progress { token, .. } if token == 5));
        let r = classify(br#"{"jsonrpc":"2.0","id":"s1","method":"ping"}"#);
        assert!(matches!(r, Inbound::Request { method, .. } if method == "ping"));
        let r = classify(
            br#"{"jsonrpc":"2.0","id":2,"method":"workspace/configuration","params":{"items":[]}}"#,
        );
        assert!(matches!(r, Inbound::Request { params: Some(p), .. } if p["items"] == json!([])));
        let not_rpc = |b: &[u8]| match classify(b) {
            Inbound::NotRpc(why) => why,
            other => panic!("{other:?}"),
        };
        assert_eq!(not_rpc(br#"{"ready":true}"#), NOT_RPC);
        assert_eq!(not_rpc(b"[1]"), NOT_RPC);
        assert!(not_rpc(b"Starting...").starts_with("expected value"));
    }
}
