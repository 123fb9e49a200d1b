//! `Coprocess::relay`: a client's request through a JSON-RPC worker with
//! the worker's notifications and requests handed to the client, the
//! client's answer written back, and the response under the client's id
//! (what kennel's MCP gateway does per request).

use kennel_process::{CoprocessSpec, Framing, Handshake, ProcessError, Relay};
use serde_json::{Value, json};
use tokio::sync::mpsc;

const ASKS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/workers/rpc_asks.py");

fn spec() -> CoprocessSpec {
    CoprocessSpec::new(["python3", ASKS])
        .framing(Framing::JsonRpc)
        .handshake(Handshake::mcp())
}

#[tokio::test]
async fn a_relayed_request_hands_the_worker_messages_to_the_client_and_its_answer_back() {
    let mut worker = spec().spawn().unwrap();
    let (seen_tx, mut seen) = mpsc::unbounded_channel::<Value>();
    let (answer_tx, answers) = mpsc::channel(4);
    // The client takes every message, and answers the worker's request.
    let mut relay = Relay::new(
        move |message: Value| {
            if message["method"] == "roots/list" {
                let answer = json!({"jsonrpc": "2.0", "id": message["id"], "result": {"roots": [{"uri": "file:///w"}]}});
                answer_tx.try_send(answer).unwrap();
            }
            seen_tx.send(message).is_ok()
        },
        answers,
    );
    let request = json!({"jsonrpc": "2.0", "id": "client-7", "method": "ask",
                         "params": {"_meta": {"progressToken": "t"}}});
    let response = worker.relay(&request, &mut relay).await.unwrap();
    assert_eq!(
        response["id"], "client-7",
        "the client's own id: {response}"
    );
    assert_eq!(response["result"]["given"]["roots"][0]["uri"], "file:///w");
    let mut methods = Vec::new();
    while let Ok(m) = seen.try_recv() {
        methods.push(m["method"].as_str().unwrap().to_owned());
        if m["method"] == "notifications/progress" {
            assert_eq!(m["params"]["progressToken"], "t", "the client's token");
        }
    }
    assert_eq!(
        methods,
        [
            "notifications/progress",
            "notifications/message",
            "roots/list"
        ]
    );
    // The same worker goes on with the next request.
    let next = json!({"jsonrpc": "2.0", "id": 8, "method": "echo", "params": {"a": 1}});
    let response = worker.relay(&next, &mut relay).await.unwrap();
    assert_eq!(
        response,
        json!({"jsonrpc": "2.0", "id": 8, "result": {"a": 1}})
    );
}

#[tokio::test]
async fn a_request_the_client_does_not_take_is_answered_by_kennel() {
    let mut worker = spec().spawn().unwrap();
    let (_answers_tx, answers) = mpsc::channel(1);
    // A client that takes nothing: the worker's roots/list is answered
    // "method not found" by kennel, and the call goes on.
    let mut relay = Relay::new(|_| false, answers);
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "ask"});
    let response = worker.relay(&request, &mut relay).await.unwrap();
    assert_eq!(response["result"]["given"], Value::Null, "{response}");
}

#[tokio::test]
async fn a_message_without_a_method_is_not_relayed() {
    let mut worker = spec().spawn().unwrap();
    let (_tx, answers) = mpsc::channel(1);
    let mut relay = Relay::new(|_| true, answers);
    let err = worker
        .relay(&json!({"id": 1}), &mut relay)
        .await
        .unwrap_err();
    assert!(matches!(err, ProcessError::NotACall { .. }), "{err:?}");
}
