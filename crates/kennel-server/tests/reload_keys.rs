//! What a reload does by the class of the key that changed, against the
//! real `kennel serve` and real worker processes: a key a live change does
//! not apply (`protocol`, `upload_limit`, `threads`, `probe_request`)
//! replaces the pool (a new worker pid, the new behaviour seen by a job),
//! `sizing` changes it in place (the same pids), and a removed pool leaves
//! nothing behind. (`queue`: `tests/queue_reload.rs`.)

#![cfg(target_os = "linux")]

mod served;

use nix::sys::signal::Signal;
use serde_json::{Value, json};
use served::{Server, Stderr};

/// A worker that tells, in each reply, its pid, the framing the job came
/// in, its `KENNEL_THREADS` and the last probe it was sent; a job
/// `{"hold": path}` holds the worker until that file exists.
const WHO: &str = r#"import json, os, sys, time
probe = None
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    if not line.strip():
        continue
    msg = json.loads(line)
    rpc = isinstance(msg, dict) and msg.get("jsonrpc") == "2.0"
    if rpc and "id" not in msg:
        continue
    params = msg.get("params") if rpc else msg
    if isinstance(params, dict) and "probe" in params:
        probe = params["probe"]
    if isinstance(params, dict) and "hold" in params:
        while not os.path.exists(params["hold"]):
            time.sleep(0.01)
    result = {"pid": os.getpid(), "framing": "json-rpc" if rpc else "json-lines",
              "threads": os.environ.get("KENNEL_THREADS"), "probe": probe}
    out = {"jsonrpc": "2.0", "id": msg["id"], "result": result} if rpc else result
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
"#;

/// The job every test sends: a JSON-RPC call in `json-rpc`, an object in
/// `json-lines`.
const JOB: &str = r#"{"method": "who", "params": {}}"#;

/// The config: `[server]` with a 2 KiB body limit, then one pool `who`
/// running [`WHO`] with `extra` keys.
fn config(extra: &str) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nbody_limit = \"2KiB\"\n\n[[pool]]\nname = \"who\"\nargv = [\"python3\", \"{{dir}}/who.py\"]\nsizing = {{ kind = \"fixed\", workers = 1 }}\nprobe_on_lend = true\n{extra}"
    )
}

fn start(name: &str, extra: &str) -> Server {
    let server = Server::start(name, &config(extra), &[], &[], Stderr::Collected);
    std::fs::write(server.dir.0.join("who.py"), WHO).unwrap();
    server
}

/// Runs one job on `who` and answers the worker's reply.
fn who(server: &Server) -> Value {
    let a = server.http("POST", "/pools/who/jobs", &[], JOB);
    assert_eq!(a.status, 200, "{}", a.body);
    a.json()
}

/// Writes `extra` as the pool's keys, sends SIGHUP and waits until a job
/// runs on a worker other than `before`: the pool was replaced. Answers
/// that job's reply.
fn replaced_by_sighup(server: &Server, extra: &str, before: &Value) -> Value {
    let text = config(extra).replace("{dir}", &server.dir.0.display().to_string());
    std::fs::write(&server.config, text).unwrap();
    server.signal(Signal::SIGHUP);
    let mut reply = Value::Null;
    server.eventually("a job runs on a new worker", || {
        reply = who(server);
        reply["pid"] != before["pid"]
    });
    reply
}

#[test]
fn a_changed_protocol_replaces_the_pool_and_the_job_comes_in_the_new_framing() {
    let server = start("reload-protocol", "");
    let first = who(&server);
    assert_eq!(first["framing"], "json-lines", "{first}");
    let after = replaced_by_sighup(&server, "protocol = \"json-rpc\"\n", &first);
    assert_eq!(after["framing"], "json-rpc", "{after}");
    server.eventually("the reload is logged", || {
        server.log().contains("replaced: who (protocol)")
    });
}

#[test]
fn a_changed_threads_replaces_the_pool_and_the_worker_gets_the_new_budget() {
    let server = start("reload-threads", "threads = 1\n");
    let first = who(&server);
    assert_eq!(first["threads"], "1", "{first}");
    let after = replaced_by_sighup(&server, "threads = 2\n", &first);
    assert_eq!(after["threads"], "2", "{after}");
}

#[test]
fn a_changed_probe_request_replaces_the_pool_and_the_worker_is_probed_with_it() {
    // A worker is probed when a job takes it from idle: from the second
    // job of a worker on.
    let server = start("reload-probe", "probe_request = { probe = \"a\" }\n");
    who(&server);
    let first = who(&server);
    assert_eq!(first["probe"], "a", "{first}");
    let after = replaced_by_sighup(&server, "probe_request = { probe = \"b\" }\n", &first);
    let again = who(&server);
    assert_eq!(again["pid"], after["pid"], "{again}");
    assert_eq!(again["probe"], "b", "{again}");
}

#[test]
fn a_job_waiting_when_its_pool_is_replaced_runs_on_the_new_pool() {
    let server = start("reload-waiting", "threads = 1\n");
    let first = who(&server);
    let release = server.dir.0.join("release");
    let hold = json!({ "hold": release }).to_string();
    let addr = server.addr;
    // A holds the one worker; B waits for it.
    let a = std::thread::spawn(move || served::http(addr, "POST", "/pools/who/jobs", &[], &hold));
    server.wait_count("who", "lent", 1, &[]);
    let b = std::thread::spawn(move || served::http(addr, "POST", "/pools/who/jobs", &[], JOB));
    server.wait_count("who", "waiting", 1, &[]);
    // The reload replaces the pool while B waits: the old pool closes, A
    // finishes within its job grace, and B runs once, on the new pool.
    let text = config("threads = 2\n").replace("{dir}", &server.dir.0.display().to_string());
    std::fs::write(&server.config, text).unwrap();
    server.signal(Signal::SIGHUP);
    let b = b.join().unwrap();
    assert_eq!(b.status, 200, "{}", b.body);
    assert_eq!(b.json()["threads"], "2", "{}", b.body);
    std::fs::write(&release, "").unwrap();
    let a = a.join().unwrap();
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(
        a.json()["pid"],
        first["pid"],
        "A ran on the old pool's worker"
    );
}

#[test]
fn a_changed_upload_limit_replaces_the_pool_and_a_larger_upload_is_taken() {
    let server = start("reload-upload", "upload_limit = \"4KiB\"\n");
    let upload = |server: &Server| {
        let binary = [("Content-Type", "application/octet-stream")];
        server.http("POST", "/pools/who/jobs", &binary, &"x".repeat(6 * 1024))
    };
    assert_eq!(upload(&server).status, 413);
    let first = who(&server);
    replaced_by_sighup(&server, "upload_limit = \"8KiB\"\n", &first);
    let a = upload(&server);
    assert_eq!(a.status, 200, "{}", a.body);
}

#[test]
fn a_changed_sizing_changes_the_pool_in_place_and_keeps_its_workers() {
    let server = start("reload-sizing", "");
    let first = who(&server);
    let text = config("")
        .replace("workers = 1", "workers = 2")
        .replace("{dir}", &server.dir.0.display().to_string());
    std::fs::write(&server.config, text).unwrap();
    let a = server.http("POST", "/reload", &[], "");
    assert_eq!(a.status, 200, "{}", a.body);
    let done = a.json();
    assert_eq!(done["pools"]["who"]["done"], "reconfigured", "{done}");
    let stats = server.get_json("/pools/who/stats");
    assert_eq!(stats["capacity"], 2, "{stats}");
    // The worker that ran before runs the next job (the lowest idle slot).
    assert_eq!(who(&server)["pid"], first["pid"]);
}

#[test]
fn a_removed_pool_leaves_nothing_behind() {
    let two = |gone_extra: &str| {
        format!(
            "{}\n[[pool]]\nname = \"gone\"\nargv = [\"python3\", \"{{dir}}/who.py\"]\n{gone_extra}",
            config("")
        )
    };
    let with_gone = two("upload_limit = \"8KiB\"\nsizing = { kind = \"fixed\", workers = 3 }\n");
    let server = Server::start("reload-removed", &with_gone, &[], &[], Stderr::Collected);
    std::fs::write(server.dir.0.join("who.py"), WHO).unwrap();
    let dir = server.dir.0.display().to_string();
    let binary = [("Content-Type", "application/octet-stream")];
    let upload = "x".repeat(6 * 1024);
    let a = server.http("POST", "/pools/gone/jobs", &binary, &upload);
    assert_eq!(a.status, 200, "{}", a.body);
    let metrics = server.http("GET", "/metrics", &[], "").body;
    assert!(metrics.contains("pool=\"gone\""), "{metrics}");

    std::fs::write(&server.config, config("").replace("{dir}", &dir)).unwrap();
    let a = server.http("POST", "/reload", &[], "");
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.json()["pools"], json!({"gone": {"done": "removed"}}));
    assert_eq!(
        server.http("POST", "/pools/gone/jobs", &[], JOB).status,
        404
    );
    assert_eq!(
        server.http("GET", "/pools/gone/config", &[], "").status,
        404
    );
    let metrics = server.http("GET", "/metrics", &[], "").body;
    assert!(!metrics.contains("pool=\"gone\""), "{metrics}");
    assert!(metrics.contains("pool=\"who\""), "{metrics}");

    // Back under the same name with neither key: the old upload limit and
    // sizing are not its own.
    std::fs::write(&server.config, two("").replace("{dir}", &dir)).unwrap();
    let a = server.http("POST", "/reload", &[], "");
    assert_eq!(a.json()["pools"], json!({"gone": {"done": "added"}}));
    let a = server.http("POST", "/pools/gone/jobs", &binary, &upload);
    assert_eq!(a.status, 413, "{}", a.body);
    let live = server.get_json("/pools/gone/config");
    assert_eq!(
        live["sizing"],
        json!({"kind": "fixed", "workers": 2}),
        "{live}"
    );
}
