//! Keys against real child processes: a load and an unload are requests
//! of kennel's own that the Python SDK's hooks serve
//! (`examples/workers/keyed_sdk.py`, state per key), in every framing; a
//! worker started for one key finds it in `KENNEL_KEY` and in its argv.

#![cfg(target_os = "linux")]

mod common;

use common::within;
use kennel::{Key, SlotInfo, Worker};
use kennel_process::{Coprocess, CoprocessSpec, Framing, ProcessError};
use serde_json::{Value, json};

const KEYED_SDK: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/workers/keyed_sdk.py"
);
const SDK_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../sdk/python");

/// The keyed example worker in `framing` (its jobs a call of `infer` in
/// JSON-RPC), without a load method.
fn keyed(framing: Framing) -> CoprocessSpec {
    CoprocessSpec::new(["python3", KEYED_SDK])
        .env("PYTHONPATH", SDK_PATH)
        .env("KENNEL_FRAMING", framing.as_str())
        .framing(framing)
        .method("infer")
}

/// The keyed worker with the SDK's load and unload methods in JSON-RPC.
fn keyed_with_methods(framing: Framing) -> CoprocessSpec {
    keyed(framing)
        .load_method("kennel/load")
        .unload_method("kennel/unload")
}

async fn held(w: &mut Coprocess) -> Value {
    within("held", w.request(&json!({"op": "held"})))
        .await
        .unwrap()["held"]
        .clone()
}

#[tokio::test]
async fn a_load_and_an_unload_reach_the_worker_and_its_reply_is_success() {
    for framing in Framing::ALL {
        let mut w = keyed_with_methods(framing).spawn().unwrap();
        // Through the trait, as a pool calls them.
        within("load a", Worker::load(&mut w, "a")).await.unwrap();
        within("load b", Worker::load(&mut w, "b")).await.unwrap();
        let reply = within("job of a", w.request(&json!({"key": "a"})))
            .await
            .unwrap();
        assert_eq!(reply["state"], "model-a", "{framing}");
        within("unload a", Worker::unload(&mut w, "a"))
            .await
            .unwrap();
        assert_eq!(held(&mut w).await, json!(["b"]), "{framing}");
        let err = within("job of a", w.request(&json!({"key": "a"})))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ProcessError::Worker { message, .. } if message.contains("not loaded")),
            "{framing}: {err}"
        );
        w.close().await;
    }
}

#[tokio::test]
async fn an_error_reply_to_a_load_is_err_with_the_workers_message_alone() {
    for framing in Framing::ALL {
        let mut w = keyed_with_methods(framing).spawn().unwrap();
        within("load a", w.load("a")).await.unwrap();
        let err = within("load", Worker::load(&mut w, "missing-x"))
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "no model named 'missing-x'", "{framing}");
        // The worker serves on, with the keys it held.
        assert!(w.is_alive(), "{framing}");
        assert_eq!(held(&mut w).await, json!(["a"]), "{framing}");
        w.close().await;
    }
}

#[tokio::test]
async fn without_a_load_method_a_json_rpc_load_sends_nothing_and_succeeds() {
    for framing in [Framing::JsonRpc, Framing::ContentLength] {
        let mut w = keyed(framing).spawn().unwrap();
        within("load", Worker::load(&mut w, "a")).await.unwrap();
        within("unload", Worker::unload(&mut w, "a")).await.unwrap();
        // Had the load been sent, the worker would hold the key.
        assert_eq!(held(&mut w).await, json!([]), "{framing}");
        // A key that would fail to load: nothing was asked, so no error.
        within("load", w.load("missing-x")).await.unwrap();
        w.close().await;
    }
}

#[tokio::test]
async fn a_json_rpc_load_is_a_call_of_the_load_method_with_the_key() {
    // A worker that answers each call with every call it got so far, as
    // [method, params].
    const WORKER: &str = r#"
import json, sys
calls = []
for line in sys.stdin:
    call = json.loads(line)
    calls.append([call["method"], call.get("params")])
    print(json.dumps(dict(jsonrpc="2.0", id=call["id"], result=calls)), flush=True)
"#;
    let mut w = CoprocessSpec::new(["python3", "-c", WORKER])
        .framing(Framing::JsonRpc)
        .method("job")
        .load_method("models/load")
        .unload_method("models/unload")
        .spawn()
        .unwrap();
    // The reply to a load is not handed on: it is success, whatever it says.
    within("load", w.load("m 1")).await.unwrap();
    within("unload", w.unload("m 1")).await.unwrap();
    let reply = within("job", w.request(&json!({"n": 1}))).await.unwrap();
    assert_eq!(
        reply,
        json!([
            ["models/load", {"key": "m 1"}],
            ["models/unload", {"key": "m 1"}],
            ["job", {"n": 1}]
        ])
    );
    w.close().await;
}

#[tokio::test]
async fn a_json_lines_load_is_the_line_kennel_load_with_kennel_id() {
    // A worker that echoes each line; kennel takes its id back out.
    const ECHO: &str = r#"
import json, sys
print(json.dumps(dict(ready=True)), flush=True)
seen = []
for line in sys.stdin:
    request = json.loads(line)
    if request.get("op") == "seen":
        print(json.dumps(dict(kennel_id=request["kennel_id"], seen=seen)), flush=True)
        continue
    seen.append(request)
    print(line, end="", flush=True)
"#;
    let mut w = CoprocessSpec::new(["python3", "-c", ECHO]).spawn().unwrap();
    within("load", w.load("a")).await.unwrap();
    within("unload", w.unload("a")).await.unwrap();
    let seen = within("seen", w.request(&json!({"op": "seen"})))
        .await
        .unwrap();
    assert_eq!(
        seen["seen"],
        json!([{"kennel_id": 1, "kennel_load": "a"}, {"kennel_id": 2, "kennel_unload": "a"}])
    );
    w.close().await;
}

#[tokio::test]
async fn a_worker_that_dies_during_a_load_fails_it() {
    const DIES: &str = r#"
import json, sys
print(json.dumps(dict(ready=True)), flush=True)
sys.stdin.readline()
sys.exit(3)
"#;
    let mut w = CoprocessSpec::new(["python3", "-c", DIES]).spawn().unwrap();
    let err = within("load", w.load("a")).await.unwrap_err();
    assert!(matches!(err, ProcessError::Crashed { .. }), "{err}");
    assert!(!w.is_alive());
}

/// Starts `spec` for `key`'s worker as a pool's factory does, and asks it
/// what it was started with.
async fn started_with(spec: &CoprocessSpec, key: Option<&str>) -> Value {
    let mut info = SlotInfo::new("keyed", 0);
    info.key = key.map(|k| Key::new(k).unwrap());
    let mut w = spec.for_slot(&info).spawn().unwrap();
    let reply = within("argv", w.request(&json!({}))).await.unwrap();
    w.close().await;
    reply
}

/// A worker that answers each request with its argv (past the program)
/// and the variables `KENNEL_KEY` and `MODEL_PATH`.
fn argv_worker() -> CoprocessSpec {
    const WORKER: &str = r#"
import json, os, sys
print(json.dumps(dict(ready=True)), flush=True)
for line in sys.stdin:
    env = dict((k, os.environ.get(k)) for k in ("KENNEL_KEY", "MODEL_PATH"))
    print(json.dumps(dict(argv=sys.argv[1:], env=env)), flush=True)
"#;
    CoprocessSpec::new(["python3", "-c", WORKER, "--model={key}", "{key}/{key}"])
        .env("MODEL_PATH", "/models/{key}.bin")
        .job_ids(false)
}

#[tokio::test]
async fn a_worker_started_for_a_key_finds_it_in_kennel_key_argv_and_env() {
    // Shell characters and spaces reach the program as they are: no shell.
    let key = r#"m 1;$(echo no)'"`"#;
    let reply = started_with(&argv_worker(), Some(key)).await;
    assert_eq!(
        reply["argv"],
        json!([format!("--model={key}"), format!("{key}/{key}")])
    );
    assert_eq!(reply["env"]["KENNEL_KEY"], key);
    assert_eq!(reply["env"]["MODEL_PATH"], format!("/models/{key}.bin"));
}

#[tokio::test]
async fn a_worker_started_without_a_key_gets_its_argv_as_written_and_no_kennel_key() {
    let reply = started_with(&argv_worker(), None).await;
    assert_eq!(reply["argv"], json!(["--model={key}", "{key}/{key}"]));
    assert_eq!(reply["env"]["KENNEL_KEY"], Value::Null);
    assert_eq!(reply["env"]["MODEL_PATH"], "/models/{key}.bin");
}
