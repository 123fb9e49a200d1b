//! A reload that changes a pool's `[pool.queue]` replaces the pool with its
//! queue: a new worker, and the jobs of the stream taken the new way.

#![cfg(target_os = "linux")]

mod support;

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::{Value, json};
use support::{Client, Instance, Nats, TempDir};

/// The pids of pool `echo`'s workers.
fn pids(a: &Instance) -> Vec<Value> {
    let rows = a.get("/pools/echo/workers");
    rows["workers"]
        .as_array()
        .unwrap_or_else(|| panic!("{rows}"))
        .iter()
        .map(|w| w["pid"].clone())
        .collect()
}

#[test]
fn a_changed_queue_replaces_the_pool_and_its_jobs_are_taken_the_new_way() {
    let test = "a_changed_queue_replaces_the_pool_and_its_jobs_are_taken_the_new_way";
    let Some(nats) = Nats::start(test) else {
        return;
    };
    let dir = TempDir::new(test);
    let echo = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/workers/echo.py"
    );
    let config = format!(
        "[[pool]]\nname = \"echo\"\nargv = [\"python3\", \"{echo}\"]\nsizing = {{ kind = \"fixed\", workers = 1 }}\n\n[pool.queue]\nnats = \"{}\"\nstream = \"ECHO\"\nsubject = \"jobs.echo\"\n",
        nats.url
    );
    let a = Instance::start(&dir.0, "a", &config);
    let client = Client::connect(&nats.url);
    client.publish("jobs.echo", "job-0", r#"{"text": "hi"}"#);
    let answers = client.wait_answered(1);
    assert_eq!(
        answers["job-0"][0].body,
        json!({"text": "hi", "_kennel": {"id": "job-0", "delivery": 1}})
    );
    let before = pids(&a);
    assert_eq!(before.len(), 1, "{before:?}");

    // `job_meta = false`: the jobs reach the worker as sent.
    let path = dir.0.join("a.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let edited = text.replace(
        "subject = \"jobs.echo\"\n",
        "subject = \"jobs.echo\"\njob_meta = false\n",
    );
    assert_ne!(edited, text);
    std::fs::write(&path, edited).unwrap();
    a.signal(Signal::SIGHUP);
    let deadline = Instant::now() + Duration::from_secs(30);
    for i in 1.. {
        let id = format!("job-{i}");
        client.publish("jobs.echo", &id, r#"{"text": "hi"}"#);
        let answers = client.wait_answered(i + 1);
        if answers[&id][0].body == json!({"text": "hi"}) {
            break;
        }
        assert!(Instant::now() < deadline, "the queue was never replaced");
    }
    let after = pids(&a);
    assert_eq!(after.len(), 1, "{after:?}");
    assert_ne!(after, before);
}
