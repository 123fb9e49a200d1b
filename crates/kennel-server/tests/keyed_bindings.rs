//! How a worker comes to hold a key, against the real `kennel serve` and
//! real worker processes: a JSON-RPC pool loads keys by its `load_method`
//! (`examples/workers/keyed_sdk.py`) and without one sends none; a
//! spawn-bound pool starts a worker with the checked key in its argv and
//! `KENNEL_KEY`.

#![cfg(target_os = "linux")]

mod served;

use serde_json::json;
use served::{Server, Stderr};

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

#[test]
fn a_json_rpc_pool_loads_keys_by_its_load_method_and_without_one_sends_none() {
    let pool = |name: &str, extra: &str| {
        format!(
            r#"
[[pool]]
name = "{name}"
argv = ["python3", "{REPO}/examples/workers/keyed_sdk.py"]
env = {{ PYTHONPATH = "{REPO}/sdk/python", KENNEL_FRAMING = "json-rpc" }}
protocol = "json-rpc"
method = "job"
sizing = {{ kind = "fixed", workers = 1 }}
{extra}
"#
        )
    };
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n{}{}",
        pool(
            "rpc",
            "load_method = \"kennel/load\"\nunload_method = \"kennel/unload\""
        ),
        pool("plain", "")
    );
    let server = Server::start("keyed-rpc", &config, &[], &[], Stderr::Collected);
    for key in ["a", "b", "a"] {
        let body = json!({ "key": key }).to_string();
        let a = server.http("POST", "/pools/rpc/jobs", &[("Kennel-Key", key)], &body);
        assert_eq!(a.status, 200, "{key}: {}\n{}", a.body, server.log());
        assert_eq!(a.json()["state"], format!("model-{key}"), "{}", a.body);
    }
    // One key per worker: `b` unloaded `a`, which was loaded again.
    let rows = server.get_json("/pools/rpc/workers");
    assert_eq!(rows["workers"][0]["keys"], json!(["a"]), "{rows}");
    // Without a load method the key only routes: the worker loaded nothing.
    let a = server.http(
        "POST",
        "/pools/plain/jobs",
        &[("Kennel-Key", "a")],
        r#"{"key":"a"}"#,
    );
    assert_eq!(a.status, 409, "{}", a.body);
    assert_eq!(a.json()["error"], "worker-error", "{}", a.body);
    let rows = server.get_json("/pools/plain/workers");
    assert_eq!(rows["workers"][0]["keys"], json!(["a"]), "{rows}");
}

/// A worker that answers its argv and `KENNEL_KEY`.
const SPAWNED: &str = r#"import json, os, sys
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    msg = json.loads(line)
    out = {"kennel_id": msg.get("kennel_id"), "argv": sys.argv[1:], "key": os.environ.get("KENNEL_KEY")}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
"#;

#[test]
fn a_spawn_bound_pool_starts_a_worker_with_the_checked_key_in_its_argv() {
    let config = "[server]\nlisten = \"127.0.0.1:0\"\n\n[[pool]]\nname = \"llm\"\nargv = [\"python3\", \"{dir}/spawned.py\", \"--model\", \"/models/{key}.gguf\"]\nsizing = { kind = \"fixed\", workers = 1 }\nkey_binding = \"spawn\"\nkey_pattern = \"^[a-z0-9-]+$\"\n";
    let server = Server::start("keyed-spawn", config, &[], &[], Stderr::Collected);
    std::fs::write(server.dir.0.join("spawned.py"), SPAWNED).unwrap();
    for key in ["llama-3", "qwen"] {
        let a = server.http("POST", "/pools/llm/jobs", &[("Kennel-Key", key)], "{}");
        assert_eq!(a.status, 200, "{key}: {}\n{}", a.body, server.log());
        assert_eq!(
            a.json(),
            json!({ "argv": ["--model", format!("/models/{key}.gguf")], "key": key })
        );
    }
    // A job without a key takes the idle worker, whatever its key.
    let a = server.http("POST", "/pools/llm/jobs", &[], "{}");
    assert_eq!(a.json()["key"], "qwen", "{}", a.body);
    // A key the pattern refuses never reaches an argv.
    let a = server.http("POST", "/pools/llm/jobs", &[("Kennel-Key", "../etc")], "{}");
    assert_eq!(a.status, 400, "{}", a.body);
}
