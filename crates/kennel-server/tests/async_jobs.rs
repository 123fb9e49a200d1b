//! Asynchronous jobs against the real `kennel serve`: 202 and `Location`,
//! the states a job goes through, cancel of a queued and of a running job,
//! `Idempotency-Key`, and accepted jobs that outlive a `kill -9` of kennel
//! (counted by the worker: none lost, none run twice).

mod served;
mod support;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{Value, json};
use served::{Server, Stderr};

fn count_worker() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/async_workers/count.py")
}

/// A config: the demo pool and a counting pool (counting into `count`),
/// both of `workers`, the store in `state`.
fn config(workers: usize, state: &str, count: &str) -> String {
    format!(
        r#"[server]
listen = "127.0.0.1:0"
state_dir = "{state}"

[[pool]]
name = "demo"
argv = ["@kennel", "worker", "demo", "--warmup", "10ms"]
startup = "parallel"
sizing = {{ kind = "fixed", workers = {workers} }}

[[pool]]
name = "count"
argv = ["python3", "{}"]
env = {{ COUNT_FILE = "{count}" }}
startup = "parallel"
sizing = {{ kind = "fixed", workers = {workers} }}
"#,
        count_worker().display()
    )
}

fn submit(server: &Server, pool: &str, body: &Value, extra: &[(&str, &str)]) -> served::Answer {
    let mut headers = vec![
        ("Prefer", "respond-async"),
        ("Content-Type", "application/json"),
    ];
    headers.extend_from_slice(extra);
    server.http(
        "POST",
        &format!("/pools/{pool}/jobs"),
        &headers,
        &body.to_string(),
    )
}

fn accepted(a: &served::Answer) -> String {
    assert_eq!(a.status, 202, "{}", a.body);
    let body: Value = serde_json::from_str(&a.body).unwrap();
    let id = body["id"].as_str().unwrap().to_owned();
    assert!(
        a.head
            .to_ascii_lowercase()
            .contains(&format!("location: /jobs/{id}")),
        "{}",
        a.head
    );
    id
}

fn job(server: &Server, id: &str) -> Value {
    let a = server.http("GET", &format!("/jobs/{id}"), &[], "");
    assert_eq!(a.status, 200, "{}", a.body);
    serde_json::from_str(&a.body).unwrap()
}

fn state_of(server: &Server, id: &str) -> String {
    job(server, id)["state"].as_str().unwrap().to_owned()
}

#[test]
fn an_async_job_is_answered_202_with_its_location_and_runs_to_done() {
    let server = Server::start(
        "async-done",
        &config(1, "{dir}/state", "{dir}/count.txt"),
        &[],
        &[],
        Stderr::Collected,
    );
    let id = accepted(&submit(&server, "demo", &json!({"sleep_ms": 10}), &[]));
    server.eventually("the job done", || state_of(&server, &id) == "done");
    let done = job(&server, &id);
    assert_eq!(done["pool"], "demo");
    assert_eq!(done["attempts"], 1);
    assert!(done["result"]["pid"].is_u64(), "the worker's reply: {done}");
    assert!(done["finished"].as_str().unwrap().ends_with('Z'), "{done}");
    // An id nobody gave: 404.
    let a = server.http("GET", "/jobs/0123456789", &[], "");
    assert_eq!(a.status, 404);
    assert!(a.body.contains("no-such-job"), "{}", a.body);
}

#[test]
fn a_watcher_gets_the_progress_of_an_async_job_then_its_end() {
    let server = Server::start(
        "async-events",
        &config(1, "{dir}/state", "{dir}/count.txt"),
        &[],
        &[],
        Stderr::Collected,
    );
    // Queued behind a first job of a second, so that the watch begins
    // before it runs.
    let first = accepted(&submit(&server, "count", &json!({"n": 1, "ms": 1000}), &[]));
    server.eventually("the first running", || {
        state_of(&server, &first) == "running"
    });
    let id = accepted(&submit(
        &server,
        "count",
        &json!({"n": 2, "ms": 10, "steps": 3}),
        &[],
    ));
    let a = server.http(
        "GET",
        &format!("/jobs/{id}/events"),
        &[("Accept", "text/event-stream")],
        "",
    );
    assert_eq!(a.status, 200);
    let events: Vec<&str> = a
        .body
        .lines()
        .filter_map(|l| l.strip_prefix("event:").map(str::trim))
        .collect();
    assert_eq!(
        events,
        ["progress", "progress", "progress", "end"],
        "{}",
        a.body
    );
    let end: Value = serde_json::from_str(
        a.body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .next_back()
            .unwrap()
            .trim(),
    )
    .unwrap();
    assert_eq!(end["state"], "done");
    assert_eq!(end["result"]["n"], 2);
    // A job over already: its end at once.
    let a = server.http("GET", &format!("/jobs/{first}/events"), &[], "");
    assert!(a.body.starts_with("event: end"), "{}", a.body);
}

#[test]
fn an_ended_job_is_forgotten_after_result_ttl() {
    let toml = config(1, "{dir}/state", "{dir}/count.txt")
        .replace("state_dir = ", "result_ttl = \"1s\"\nstate_dir = ");
    let server = Server::start("async-ttl", &toml, &[], &[], Stderr::Collected);
    let id = accepted(&submit(&server, "count", &json!({"n": 1}), &[]));
    server.eventually("the job done", || state_of(&server, &id) == "done");
    server.eventually("the job forgotten", || {
        server.http("GET", &format!("/jobs/{id}"), &[], "").status == 404
    });
}

#[test]
fn a_queued_job_cancelled_never_runs_and_a_running_one_is_cancelled_on_its_worker() {
    let server = Server::start(
        "async-cancel",
        &config(1, "{dir}/state", "{dir}/count.txt"),
        &[],
        &[],
        Stderr::Collected,
    );
    // The counting worker writes a job's `n` before it works: once 1 is
    // written, the first job is on the worker (the store's `running` says
    // only that it left the store; it may still wait for the worker).
    let count = server.dir.0.join("count.txt");
    let counted = || std::fs::read_to_string(&count).unwrap_or_default();
    let long = accepted(&submit(
        &server,
        "count",
        &json!({"n": 1, "ms": 60_000}),
        &[],
    ));
    server.eventually("the first job on its worker", || counted() == "1\n");
    assert_eq!(state_of(&server, &long), "running");
    let queued = accepted(&submit(&server, "count", &json!({"n": 2}), &[]));
    assert_eq!(state_of(&server, &queued), "queued", "one worker, busy");
    let a = server.http("DELETE", &format!("/jobs/{queued}"), &[], "");
    assert_eq!(a.status, 200, "{}", a.body);
    let cancelled: Value = serde_json::from_str(&a.body).unwrap();
    assert_eq!(cancelled["state"], "cancelled");
    assert_eq!(cancelled["attempts"], 0, "it never ran");
    assert_eq!(cancelled["error"]["error"], "cancelled");
    // The running one: cancelled, and its worker (which cannot stop a job)
    // replaced.
    let before = server.get_json("/pools/count/workers")["workers"][0]["pid"].clone();
    let a = server.http("DELETE", &format!("/jobs/{long}"), &[], "");
    assert_eq!(a.status, 200);
    assert_eq!(state_of(&server, &long), "cancelled");
    server.eventually("the worker replaced", || {
        let now = server.get_json("/pools/count/workers")["workers"][0]["pid"].clone();
        now.is_u64() && now != before
    });
    assert_eq!(counted(), "1\n", "the cancelled queued job never ran");
    // A cancelled job stays cancelled.
    let a = server.http("DELETE", &format!("/jobs/{long}"), &[], "");
    assert!(a.body.contains("\"cancelled\""), "{}", a.body);
}

#[test]
fn an_idempotency_key_gives_the_same_job_and_runs_it_once() {
    let server = Server::start(
        "async-idem",
        &config(1, "{dir}/state", "{dir}/count.txt"),
        &[],
        &[],
        Stderr::Collected,
    );
    let body = json!({"n": 7, "ms": 0});
    let first = accepted(&submit(
        &server,
        "count",
        &body,
        &[("Idempotency-Key", "order-7")],
    ));
    let second = accepted(&submit(
        &server,
        "count",
        &body,
        &[("Idempotency-Key", "order-7")],
    ));
    assert_eq!(first, second);
    let other = accepted(&submit(
        &server,
        "count",
        &json!({"n": 8, "ms": 0}),
        &[("Idempotency-Key", "order-8")],
    ));
    assert_ne!(first, other);
    server.eventually("both done", || {
        state_of(&server, &first) == "done" && state_of(&server, &other) == "done"
    });
    let counted = std::fs::read_to_string(server.dir.0.join("count.txt")).unwrap();
    assert_eq!(counted.lines().collect::<Vec<_>>(), ["7", "8"]);
    let bad = submit(&server, "count", &body, &[("Idempotency-Key", "")]);
    assert_eq!(bad.status, 400, "{}", bad.body);
}

#[test]
fn accepted_jobs_outlive_a_kill_9_of_kennel_none_lost_none_run_twice() {
    let dir = served::TempDir::new("async-restart");
    let state = dir.0.join("state");
    let count = dir.0.join("count.txt");
    let toml = config(
        2,
        &state.display().to_string(),
        &count.display().to_string(),
    );
    let mut server = Server::start("async-restart-1", &toml, &[], &[], Stderr::Collected);
    let ids: Vec<String> = (0..100)
        .map(|n| accepted(&submit(&server, "count", &json!({"n": n, "ms": 30}), &[])))
        .collect();
    // Some done, some running, most queued: then kill -9.
    server.eventually("a few jobs done", || {
        ids.iter()
            .filter(|id| state_of(&server, id) == "done")
            .count()
            >= 4
    });
    server.signal(nix::sys::signal::Signal::SIGKILL);
    let _ = server.exit_within(served::LIMIT);
    let server = Server::start("async-restart-2", &toml, &[], &[], Stderr::Collected);
    server.eventually("every accepted job ended", || {
        ids.iter().all(|id| {
            let s = state_of(&server, id);
            s == "done" || s == "failed"
        })
    });
    let mut states = BTreeMap::<String, usize>::new();
    for id in &ids {
        let j = job(&server, id);
        let s = j["state"].as_str().unwrap().to_owned();
        if s == "failed" {
            assert_eq!(j["error"]["error"], "interrupted", "{j}");
        }
        *states.entry(s).or_default() += 1;
    }
    // Each job ran at most once: the worker counted each n at most once.
    let counted = std::fs::read_to_string(&count).unwrap();
    let mut seen = BTreeMap::<&str, usize>::new();
    for n in counted.lines() {
        *seen.entry(n).or_default() += 1;
    }
    let twice: Vec<_> = seen.iter().filter(|(_, c)| **c > 1).collect();
    assert!(twice.is_empty(), "jobs run twice: {twice:?}");
    // Every job done ran once; one failed `interrupted` ran at most once.
    let done = states.get("done").copied().unwrap_or(0);
    assert!(
        seen.len() >= done && seen.len() <= ids.len(),
        "{seen:?} {states:?}"
    );
    eprintln!("after kill -9: {states:?}");
}

#[test]
fn the_queued_jobs_of_a_pool_a_reload_took_out_fail_with_no_such_pool() {
    let toml = config(1, "{dir}/state", "{dir}/count.txt");
    let server = Server::start("async-reload", &toml, &[], &[], Stderr::Collected);
    let running = accepted(&submit(&server, "demo", &json!({"sleep_ms": 60_000}), &[]));
    server.eventually("the first job running", || {
        state_of(&server, &running) == "running"
    });
    let queued = accepted(&submit(&server, "demo", &json!({}), &[]));
    // The file without the demo pool, then a reload.
    let without = std::fs::read_to_string(&server.config).unwrap();
    let start = without.find("[[pool]]\nname = \"demo\"").unwrap();
    let end = without.find("[[pool]]\nname = \"count\"").unwrap();
    let edited = format!("{}{}", &without[..start], &without[end..]);
    std::fs::write(&server.config, edited).unwrap();
    server.signal(nix::sys::signal::Signal::SIGHUP);
    server.eventually("the queued job failed", || {
        state_of(&server, &queued) == "failed"
    });
    assert_eq!(job(&server, &queued)["error"]["error"], "no-such-pool");
}
