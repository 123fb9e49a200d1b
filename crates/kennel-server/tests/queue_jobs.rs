//! Queued pools keep each job's record and answer in JetStream (the
//! `KENNEL_JOBS` bucket of a real `nats-server -js`): an asynchronous job
//! is answered by any instance, and watched there (its progress, then its
//! end); `Idempotency-Key` runs one job; a cancel
//! reaches a queued and a running job; a poison job is failed with its
//! last error; a frozen instance's job is failed `interrupted`, not run
//! again, and its real answer wins once it wakes. Across a restart of
//! NATS: `queue_restart.rs`.

#![cfg(target_os = "linux")]

mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Instant;

use serde_json::Value;
use support::counted::{counted_pool, runs};
use support::{Answer, Client, Instance, LIMIT, Nats, TempDir, http, queued_pool};

/// A real NATS, a directory, and the config of a queued pool `count` of
/// one counting worker on it.
fn counted(test: &str) -> Option<(Nats, TempDir, String)> {
    let nats = Nats::start(test)?;
    let dir = TempDir::new(test);
    let config = counted_pool(&nats.url, &dir.0, 1, "");
    Some((nats, dir, config))
}

/// Waits until a worker has counted a job (it counts one before it works
/// on it).
fn wait_counted(dir: &Path) {
    let deadline = Instant::now() + LIMIT;
    while runs(dir).is_empty() {
        assert!(Instant::now() < deadline, "no job reached a worker");
        std::thread::yield_now();
    }
}

/// POSTs `body` as an asynchronous job; its id, checked against the 202's
/// `Location`.
fn submit(addr: SocketAddr, pool: &str, body: &str, extra: &[(&str, &str)]) -> String {
    let mut headers = vec![("Prefer", "respond-async")];
    headers.extend_from_slice(extra);
    let path = format!("/pools/{pool}/jobs");
    let Answer {
        status,
        head,
        body: text,
    } = http(addr, "POST", &path, &headers, body);
    assert_eq!(status, 202, "{text}");
    let id = serde_json::from_str::<Value>(&text).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        head.to_ascii_lowercase()
            .contains(&format!("location: /jobs/{id}")),
        "{head}"
    );
    id
}

/// `GET /jobs/{id}` until its state is `state`; the job.
fn wait_state(addr: SocketAddr, id: &str, state: &str) -> Value {
    let deadline = Instant::now() + LIMIT;
    loop {
        let Answer { status, body, .. } = http(addr, "GET", &format!("/jobs/{id}"), &[], "");
        if status == 200 {
            let job: Value = serde_json::from_str(&body).unwrap();
            if job["state"] == state {
                return job;
            }
        }
        // Each request paces the next one.
        assert!(Instant::now() < deadline, "{id} never {state}: {body}");
    }
}

#[test]
fn an_asynchronous_job_of_a_queued_pool_is_answered_by_any_instance_and_an_idempotency_key_runs_it_once()
 {
    let Some((nats, dir, config)) =
        counted("an_asynchronous_job_of_a_queued_pool_is_answered_by_any_instance")
    else {
        return;
    };
    let a = Instance::start(&dir.0, "a", &config);
    let b = Instance::start(&dir.0, "b", &config);
    let id = submit(a.addr, "count", r#"{"n": 1}"#, &[]);
    let job = wait_state(b.addr, &id, "done");
    assert_eq!(job["result"]["n"], 1, "{job}");
    assert_eq!(job["attempts"], 1, "{job}");
    assert_eq!(job["pool"], "count");
    // Two POSTs with one Idempotency-Key, to two instances: one job.
    let key = [("Idempotency-Key", "batch 7 line 1")];
    let first = submit(a.addr, "count", r#"{"n": 2}"#, &key);
    let second = submit(b.addr, "count", r#"{"n": 2}"#, &key);
    assert_eq!(first, second);
    wait_state(a.addr, &first, "done");
    // A later job runs after it (one worker each, a FIFO stream).
    let Answer { status, body, .. } = http(a.addr, "POST", "/pools/count/jobs", &[], r#"{"n": 3}"#);
    assert_eq!(status, 200, "{body}");
    assert_eq!(runs(&dir.0), BTreeMap::from([(1, 1), (2, 1), (3, 1)]));
    // An id no job has.
    let Answer { status, body, .. } = http(b.addr, "GET", "/jobs/job-unknown", &[], "");
    assert_eq!(status, 404, "{body}");
    // Jobs published straight to the stream: one with no Nats-Msg-Id (its
    // id is `<stream>:<sequence>`), one whose id a key could not be.
    let client = Client::connect(&nats.url);
    client.publish("jobs.count", "", r#"{"n": 4}"#);
    client.publish("jobs.count", "job 5", r#"{"n": 5}"#);
    let answers = client.wait_answered(2);
    let ids: Vec<&String> = answers.keys().collect();
    assert!(ids.iter().any(|id| id.starts_with("COUNT:")), "{ids:?}");
    for id in ids {
        let path = format!("/jobs/{}", id.replace(' ', "%20"));
        let Answer { status, body, .. } = http(b.addr, "GET", &path, &[], "");
        assert_eq!(status, 200, "{id}: {body}");
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap()["state"],
            "done"
        );
    }
}

#[test]
fn a_queued_jobs_progress_reaches_a_watcher_on_any_instance_then_its_end() {
    let Some((_nats, dir, config)) =
        counted("a_queued_jobs_progress_reaches_a_watcher_on_any_instance")
    else {
        return;
    };
    let a = Instance::start(&dir.0, "a", &config);
    let b = Instance::start(&dir.0, "b", &config);
    // Three progress items 300 ms apart; b watches whichever runs it.
    let id = submit(a.addr, "count", r#"{"n": 1, "steps": 3, "ms": 300}"#, &[]);
    let Answer {
        status,
        body: stream,
        ..
    } = http(b.addr, "GET", &format!("/jobs/{id}/events"), &[], "");
    assert_eq!(status, 200, "{stream}");
    // The data of each event, by its name.
    let lines: Vec<&str> = stream.lines().map(str::trim_end).collect();
    let data = |name: &str| -> Vec<Value> {
        lines
            .windows(2)
            .filter(|w| w[0] == format!("event: {name}"))
            .filter_map(|w| w[1].strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    };
    let items = data("progress");
    assert!(!items.is_empty(), "{stream}");
    assert!(items.iter().all(|i| i["total"] == 3), "{items:?}");
    assert_eq!(items.last().unwrap()["progress"], 3, "{items:?}");
    let end = data("end");
    assert_eq!(end.len(), 1, "{stream}");
    let end = &end[0];
    assert_eq!(end["state"], "done", "{end}");
    assert_eq!(end["result"]["n"], 1, "{end}");
}

#[test]
fn a_cancelled_queued_job_never_runs_and_a_running_one_is_cancelled_on_its_worker() {
    let Some((_nats, dir, config)) =
        counted("a_cancelled_queued_job_never_runs_and_a_running_one_is_cancelled")
    else {
        return;
    };
    let a = Instance::start(&dir.0, "a", &config);
    let running = submit(a.addr, "count", r#"{"n": 1, "ms": 600000}"#, &[]);
    wait_state(a.addr, &running, "running");
    wait_counted(&dir.0);
    let queued = submit(a.addr, "count", r#"{"n": 2}"#, &[]);
    assert_eq!(wait_state(a.addr, &queued, "queued")["attempts"], 0);
    for id in [&queued, &running] {
        let Answer { status, body, .. } = http(a.addr, "DELETE", &format!("/jobs/{id}"), &[], "");
        assert_eq!(status, 200, "{body}");
        let job: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(job["state"], "cancelled", "{job}");
        assert_eq!(job["error"]["error"], "cancelled", "{job}");
    }
    // The worker is free again (the long job was cancelled on it), and the
    // cancelled queued job, delivered first, was passed over.
    let Answer { status, body, .. } = http(a.addr, "POST", "/pools/count/jobs", &[], r#"{"n": 3}"#);
    assert_eq!(status, 200, "{body}");
    assert_eq!(runs(&dir.0), BTreeMap::from([(1, 1), (3, 1)]));
    // Counted by the passed-over message's own task.
    a.wait_metric("kennel_jetstream_deduplicated_total", "count", 1.0);
    assert_eq!(wait_state(a.addr, &running, "cancelled")["attempts"], 1);
}

#[test]
fn a_poison_job_is_failed_with_its_last_error_and_attempts_at_get_jobs() {
    let test = "a_poison_job_is_failed_with_its_last_error_and_attempts_at_get_jobs";
    let Some(nats) = Nats::start(test) else {
        return;
    };
    let dir = TempDir::new(test);
    let config = queued_pool(&nats.url, 1, "max_deliver = 3\nnak_delay = \"100ms\"");
    let a = Instance::start(&dir.0, "a", &config);
    let id = submit(a.addr, "q", r#"{"crash": true}"#, &[]);
    let job = wait_state(a.addr, &id, "failed");
    assert_eq!(job["attempts"], 3, "{job}");
    assert_eq!(job["error"]["error"], "crashed", "{job}");
    let dead = a.get("/pools/q/dead");
    assert_eq!(dead["dead"][0]["id"], id.as_str(), "{dead}");
}

#[test]
fn a_frozen_instances_job_is_failed_interrupted_not_run_twice_and_its_real_answer_wins() {
    let Some((_nats, dir, config)) =
        counted("a_frozen_instances_job_is_failed_interrupted_not_run_twice")
    else {
        return;
    };
    let a = Instance::start(&dir.0, "a", &config);
    let id = submit(a.addr, "count", r#"{"n": 1, "ms": 3000}"#, &[]);
    wait_counted(&dir.0);
    // a is frozen (SIGSTOP) mid-job; b gets the job's message again once
    // a's in-progress acks stop for ack_wait, and waits ack_wait and 5 s
    // more for a to say it still runs.
    let b = Instance::start(&dir.0, "b", &config);
    a.signal(nix::sys::signal::Signal::SIGSTOP);
    let job = wait_state(b.addr, &id, "failed");
    assert_eq!(job["error"]["error"], "interrupted", "{job}");
    // a wakes, finishes the job and stores its answer over `interrupted`.
    a.signal(nix::sys::signal::Signal::SIGCONT);
    let job = wait_state(b.addr, &id, "done");
    assert_eq!(job["result"]["n"], 1, "{job}");
    assert_eq!(runs(&dir.0), BTreeMap::from([(1, 1)]));
}
