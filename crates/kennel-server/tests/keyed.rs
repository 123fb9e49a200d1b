//! Jobs that carry a key, over HTTP against the real `kennel serve` and
//! real worker processes (`examples/workers/keyed_sdk.py`, which holds
//! state per key and fails a job whose key it does not hold): the
//! `Kennel-Key` header and the pool's `key` pointer route every job to a
//! worker holding its key; a key that breaks a rule is a 400 `bad-key`;
//! a key whose load failed is refused for a while, with its failure;
//! the workers' keys are listed; `/metrics` grows no series per key; a
//! config that would put an unchecked key into a worker's argv is refused.
//! (A JSON-RPC pool's `load_method` and a spawn-bound pool's argv:
//! `keyed_bindings.rs`.)

#![cfg(target_os = "linux")]

mod served;

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::{Value, json};
use served::{Server, Stderr};

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// A pool of 2 `keyed_sdk.py` workers, each holding one key at a time,
/// its jobs' keys read at `/key` and matched against `^[a-z0-9._-]+$`.
fn keyed_config() -> String {
    format!(
        r#"[server]
listen = "127.0.0.1:0"

[[pool]]
name = "models"
argv = ["python3", "{REPO}/examples/workers/keyed_sdk.py"]
env = {{ PYTHONPATH = "{REPO}/sdk/python" }}
sizing = {{ kind = "fixed", workers = 2 }}
group = "g"
key = "/key"
key_pattern = "^[a-z0-9._-]+$"
keys_per_worker = 1
"#
    )
}

/// A request's headers.
type Headers<'a> = &'a [(&'a str, &'a str)];

fn start_keyed(name: &str) -> Server {
    Server::start(name, &keyed_config(), &[], &[], Stderr::Collected)
}

#[test]
fn the_header_and_the_pointer_route_every_job_to_a_worker_holding_its_key() {
    let server = start_keyed("keyed-route");
    let keys = ["a", "b", "c", "d"];
    let addr = server.addr;
    // 8 clients, 40 jobs each, keys interleaved; odd clients name the key
    // in the header, even ones only in the body (the pool's pointer).
    let clients: Vec<_> = (0..8)
        .map(|client| {
            std::thread::spawn(move || {
                let mut wrong = Vec::new();
                for i in 0..40 {
                    let key = keys[(client + i) % keys.len()];
                    let body = json!({ "key": key }).to_string();
                    let header = [("Kennel-Key", key)];
                    let headers: &[(&str, &str)] = if client % 2 == 1 { &header } else { &[] };
                    let a = served::http(addr, "POST", "/pools/models/jobs", headers, &body);
                    let ok = a.status == 200
                        && a.json()["key"] == key
                        && a.json()["state"] == format!("model-{key}");
                    if !ok {
                        wrong.push(format!("{key}: {} {}", a.status, a.body));
                    }
                }
                wrong
            })
        })
        .collect();
    let wrong: Vec<String> = clients
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    assert!(
        wrong.is_empty(),
        "{} of 320 jobs were not answered from their key's state: {:?}\n{}",
        wrong.len(),
        &wrong[..wrong.len().min(5)],
        server.log()
    );

    // The workers list the keys they hold: one each, of those sent.
    let a = server.http(
        "POST",
        "/pools/models/jobs",
        &[("Kennel-Key", "a")],
        r#"{"key":"a"}"#,
    );
    assert_eq!(a.status, 200, "{}", a.body);
    let rows = server.get_json("/pools/models/workers");
    let held: Vec<Vec<String>> = rows["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| serde_json::from_value(w["keys"].clone()).unwrap())
        .collect();
    assert!(
        held.iter().all(|k| k.len() <= 1),
        "one key per worker: {rows}"
    );
    let all: BTreeSet<&str> = held.iter().flatten().map(String::as_str).collect();
    assert!(all.contains("a"), "{rows}");
    assert!(all.is_subset(&BTreeSet::from(keys)), "{rows}");

    // A job without a key takes any worker.
    let a = server.http("POST", "/pools/models/jobs", &[], r#"{"op":"held"}"#);
    assert_eq!(a.status, 200, "{}", a.body);
}

#[test]
fn a_key_that_breaks_a_rule_is_a_400_naming_the_rule_and_quoting_no_more_than_a_prefix() {
    let server = start_keyed("keyed-bad");
    let long = "k".repeat(300);
    let outside = format!("Model/{}", "x".repeat(200));
    let cases: [(Headers<'_>, String, &str); 5] = [
        (
            &[("Kennel-Key", long.as_str())],
            r#"{"key":"a"}"#.to_owned(),
            "the job's key (the Kennel-Key header): a key is at most 256 bytes; this one is 300",
        ),
        (
            &[("Kennel-Key", "a\tb")],
            r#"{"key":"a"}"#.to_owned(),
            "the job's key (the Kennel-Key header): a key is printable ASCII (space to `~`); byte 1 is '\\t'",
        ),
        (
            &[],
            r#"{"key":"a\u0001b"}"#.to_owned(),
            "the job's key (the body at /key): a key is printable ASCII (space to `~`); byte 1 is '\\u{1}'",
        ),
        (
            &[],
            json!({ "key": outside }).to_string(),
            "the job's key (the body at /key) does not match the pool's key_pattern \"^[a-z0-9._-]+$\"; it begins \"Model/xxxxxxxxxxxxxxxxxxxxxxxxxx\"…",
        ),
        (
            &[],
            r#"{"key":7}"#.to_owned(),
            "the job's key at /key is a number (allowed: a string)",
        ),
    ];
    for (headers, body, message) in cases {
        let a = server.http("POST", "/pools/models/jobs", headers, &body);
        assert_eq!(a.status, 400, "{body}: {}", a.body);
        assert_eq!(
            a.json(),
            json!({ "error": "bad-key", "message": message }),
            "{body}"
        );
    }
    // A group's pools hold their keys each: a group job takes none.
    let a = server.http(
        "POST",
        "/groups/g/jobs",
        &[("Kennel-Key", "a")],
        r#"{"key":"a"}"#,
    );
    assert_eq!(a.status, 400, "{}", a.body);
    assert_eq!(a.json()["error"], "bad-key", "{}", a.body);
    // No worker was started or loaded for them.
    let rows = server.get_json("/pools/models/workers");
    for w in rows["workers"].as_array().unwrap() {
        assert_eq!(w["jobs"], 0, "{rows}");
        assert_eq!(w["keys"], json!([]), "{rows}");
    }
}

#[test]
fn a_key_the_worker_cannot_load_is_a_502_load_failed_with_its_message() {
    let server = start_keyed("keyed-load-failed");
    let a = server.http("POST", "/pools/models/jobs", &[], r#"{"key":"missing-x"}"#);
    assert_eq!(a.status, 502, "{}", a.body);
    assert_eq!(a.json()["error"], "load-failed", "{}", a.body);
    let message = a.json()["message"].as_str().unwrap().to_owned();
    assert!(
        message.starts_with("the worker could not load key \"missing-x\": "),
        "{message}"
    );
    assert!(message.contains("no model named 'missing-x'"), "{message}");
    // The worker keeps serving.
    let a = server.http("POST", "/pools/models/jobs", &[], r#"{"key":"b"}"#);
    assert_eq!(a.status, 200, "{}", a.body);
}

#[test]
fn a_key_whose_load_failed_is_answered_its_failure_at_once_until_it_is_tried_again() {
    let server = start_keyed("keyed-refused");
    // The key is refused for 1 s after its failure, then 2, 4 … after each
    // failure in a row: whatever this machine's pace, a job comes within
    // a refusal before the windows outgrow it.
    let mut tries = Vec::new();
    let refused = loop {
        let a = server.http("POST", "/pools/models/jobs", &[], r#"{"key":"missing-y"}"#);
        assert_eq!(a.status, 502, "{}", a.body);
        assert_eq!(a.json()["error"], "load-failed", "{}", a.body);
        let message = a.json()["message"].as_str().unwrap().to_owned();
        assert!(
            message.starts_with(
                "the worker could not load key \"missing-y\": no model named 'missing-y'"
            ),
            "{message}"
        );
        if message.contains("tried again in") {
            break message;
        }
        tries.push(message);
        assert!(tries.len() < 6, "never refused: {tries:#?}");
    };
    let n = tries.len();
    let last = if n == 1 {
        "(the key's last try failed: it is tried again in ".to_owned()
    } else {
        format!("(the key's last {n} tries failed: it is tried again in ")
    };
    assert!(refused.contains(&last), "{refused}");
    assert!(refused.ends_with(" s)"), "{refused}");
    // Other keys are served meanwhile.
    let a = server.http("POST", "/pools/models/jobs", &[], r#"{"key":"b"}"#);
    assert_eq!(a.status, 200, "{}", a.body);
}

/// A worker that answers every request at once, loads included.
const QUICK: &str = r#"import json, sys
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    msg = json.loads(line)
    sys.stdout.write(json.dumps({"kennel_id": msg.get("kennel_id"), "ok": True}) + "\n")
    sys.stdout.flush()
"#;

/// The series `/metrics` answers (its lines that are not comments).
fn series(server: &Server) -> Vec<String> {
    let a = server.http("GET", "/metrics", &[], "");
    assert_eq!(a.status, 200);
    a.body
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.rsplit_once(' ').map_or(l, |(name, _)| name).to_owned())
        .collect()
}

#[test]
fn ten_thousand_distinct_keys_add_no_series_to_the_metrics() {
    // Every key is new: `max_key_wait = "1ms"` lets a job whose key no
    // worker holds claim a worker after 1 ms rather than 250 ms.
    let config = "[server]\nlisten = \"127.0.0.1:0\"\n\n[[pool]]\nname = \"quick\"\nargv = [\"python3\", \"{dir}/quick.py\"]\nsizing = { kind = \"fixed\", workers = 2 }\nkeys_per_worker = 4\nmax_key_wait = \"1ms\"\n";
    let server = Server::start("keyed-metrics", config, &[], &[], Stderr::Collected);
    std::fs::write(server.dir.0.join("quick.py"), QUICK).unwrap();
    let addr = server.addr;
    let run = |from: usize, to: usize| {
        let threads = 8;
        let clients: Vec<_> = (0..threads)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in (from + t..to).step_by(threads) {
                        let key = format!("key-{i}");
                        let a = served::http(
                            addr,
                            "POST",
                            "/pools/quick/jobs",
                            &[("Kennel-Key", &key)],
                            "{}",
                        );
                        assert_eq!(a.status, 200, "{key}: {}", a.body);
                    }
                })
            })
            .collect();
        for c in clients {
            c.join().unwrap();
        }
    };
    run(0, 10);
    // A first scrape adds the series of `GET /metrics` itself.
    series(&server);
    let after_10 = series(&server);
    run(10, 10_000);
    let after_10_000 = series(&server);
    assert_eq!(after_10, after_10_000);
    let text = server.http("GET", "/metrics", &[], "").body;
    let loads = served::sample(&text, "kennel_key_loads_total{pool=\"quick\"}");
    assert!(loads >= 10_000.0, "every key was loaded: {loads}");
    assert!(!text.contains("key-9999"), "no key is a label");
}

#[test]
fn a_config_that_would_put_an_unchecked_key_into_a_worker_is_refused_naming_the_key() {
    let dir = served::TempDir::new("keyed-check");
    let check = |toml: &str| {
        let (code, _, stderr) = served::check(&dir, toml);
        assert_eq!(code, Some(2), "accepted:\n{toml}");
        stderr
    };
    let pool = "[[pool]]\nname = \"m\"\n";
    let e = check(&format!(
        "{pool}argv = [\"llama-server\", \"--model\", \"/models/{{key}}.gguf\"]\nkey_binding = \"spawn\"\n"
    ));
    assert!(
        e.contains("`pool[0].key_pattern`: is required when the argv holds {key}"),
        "{e}"
    );
    let e = check(&format!("{pool}argv = [\"w\"]\nkey_pattern = \"[a-z\"\n"));
    assert!(e.contains("`pool[0].key_pattern`"), "{e}");
    assert!(e.contains("is not a regular expression: "), "{e}");
    let e = check(&format!(
        "{pool}argv = [\"w\"]\nload_method = \"kennel/load\"\n"
    ));
    assert!(
        e.contains("`pool[0].load_method`: is for the JSON-RPC protocols"),
        "{e}"
    );
    // A config that passes says how its jobs' keys are read.
    let (code, stdout, _) = served::check(&dir, &keyed_config());
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        stdout.contains("  keys            from the Kennel-Key header, else the body at \"/key\"; matching ^[a-z0-9._-]+$; load, 1 per worker\n"),
        "{stdout}"
    );
}

#[test]
fn a_reload_changes_the_key_pattern_in_place() {
    let server = start_keyed("keyed-reload");
    let a = server.http("POST", "/pools/models/jobs", &[], r#"{"key":"a-1"}"#);
    assert_eq!(a.status, 200, "{}", a.body);
    let pids = |rows: Value| -> Vec<Value> {
        rows["workers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["pid"].clone())
            .collect()
    };
    let before = pids(server.get_json("/pools/models/workers"));
    let text = keyed_config().replace("^[a-z0-9._-]+$", "^[a-z]+$");
    std::fs::write(&server.config, text).unwrap();
    let a = server.http("POST", "/reload", &[], "");
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(
        a.json()["pools"]["models"]["done"],
        "reconfigured",
        "{}",
        a.body
    );
    let a = server.http("POST", "/pools/models/jobs", &[], r#"{"key":"a-1"}"#);
    assert_eq!(a.status, 400, "{}", a.body);
    assert_eq!(a.json()["error"], "bad-key");
    // The same workers: the pool was not replaced.
    assert_eq!(pids(server.get_json("/pools/models/workers")), before);
}

#[test]
fn kennel_run_takes_each_lines_key_at_the_pointer_or_every_jobs_from_key() {
    let dir = served::TempDir::new("keyed-run");
    let config = dir.0.join("kennel.toml");
    std::fs::write(&config, keyed_config()).unwrap();
    let jobs = dir.0.join("jobs.jsonl");
    let run = |lines: &str, args: &[&str]| {
        std::fs::write(&jobs, lines).unwrap();
        let out = Command::new(served::kennel_bin())
            .args(["run", "--quiet", "--config"])
            .arg(&config)
            .args(args)
            .arg(&jobs)
            .output()
            .unwrap();
        let rows: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (
            out.status.code(),
            rows,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let lines: String = (0..20)
        .map(|i| format!("{{\"key\":\"{}\"}}\n", ["a", "b", "c"][i % 3]))
        .collect();
    let (code, rows, stderr) = run(&lines, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(
            row["state"],
            format!("model-{}", ["a", "b", "c"][i % 3]),
            "{row}"
        );
    }
    // `--key` gives every job its key: a body without one is still routed.
    let (code, rows, stderr) = run("{\"key\":\"b\"}\n{\"op\":\"held\"}\n", &["--key", "b"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(rows[0]["state"], "model-b", "{rows:?}");
    assert_eq!(rows[1]["held"], json!(["b"]), "{rows:?}");
    // A line whose key breaks a rule fails alone.
    let (code, rows, _) = run("{\"key\":7}\n{\"key\":\"a\"}\n", &[]);
    assert_eq!(code, Some(1));
    assert_eq!(rows[0]["error"], "bad-key", "{rows:?}");
    assert_eq!(rows[1]["state"], "model-a", "{rows:?}");
    // A `--key` that breaks one is refused before any job runs.
    let (code, rows, stderr) = run("{\"key\":\"a\"}\n", &["--key", "Bad/Key"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(rows.is_empty());
    assert!(
        stderr.contains("kennel: the job's key (--key) does not match the pool's key_pattern"),
        "{stderr}"
    );
}
