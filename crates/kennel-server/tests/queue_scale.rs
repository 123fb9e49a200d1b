//! Past one machine: real `kennel serve` processes share one durable pull
//! consumer of a real `nats-server -js`. They drain a stream with no job
//! lost and each answered once; each takes work as its workers free up (a
//! stuck instance takes none); a `kill -9` loses no job (redelivered after
//! `ack_wait`; duplicates counted); a graceful stop acks every job it
//! started.

#![cfg(target_os = "linux")]

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use support::{Answer, Client, Instance, LIMIT, Nats, NatsAnswer, TempDir, http, queued_pool};

/// A job of about 100 ms on a demo worker.
const JOB: &str = r#"{"sleep_ms": 100}"#;

/// Publishes `n` jobs `job-0` … `job-{n-1}`.
fn publish(client: &Client, n: usize) {
    for i in 0..n {
        client.publish("jobs.q", &format!("job-{i}"), JOB);
    }
}

/// How many answers each instance gave, by its name; `?` for an instance
/// not among `instances`.
fn shares(
    answers: &BTreeMap<String, Vec<NatsAnswer>>,
    instances: &[&Instance],
) -> BTreeMap<String, usize> {
    let mut by = BTreeMap::new();
    for a in answers.values().flatten() {
        let name = instances
            .iter()
            .find(|i| a.instance.ends_with(&format!("/{}", i.pid())))
            .map_or("?".to_owned(), |i| i.name.clone());
        *by.entry(name).or_default() += 1;
    }
    by
}

/// Polls the stream until its work queue is empty and nothing is
/// unacknowledged, within `limit`.
fn wait_empty(client: &Client, limit: Duration) -> (u64, u64, usize) {
    let deadline = Instant::now() + limit;
    loop {
        let backlog = client.backlog("JOBS", "q");
        if backlog == (0, 0, 0) || Instant::now() > deadline {
            return backlog;
        }
    }
}

/// Every job answered once, each answer a success.
fn assert_once(answers: &BTreeMap<String, Vec<NatsAnswer>>, n: usize) {
    assert_eq!(answers.len(), n, "jobs answered");
    for (id, a) in answers {
        assert_eq!(a.len(), 1, "{id} answered {} times: {a:?}", a.len());
        assert_eq!(a[0].status, 200, "{id}: {a:?}");
    }
}

#[test]
fn three_instances_drain_600_jobs_with_none_lost_and_each_answered_once() {
    let test = "three_instances_drain_600_jobs_with_none_lost_and_each_answered_once";
    let Some(nats) = Nats::start(test) else {
        return;
    };
    let dir = TempDir::new("scale600");
    let config = queued_pool(&nats.url, 2, "");
    let a = Instance::start(&dir.0, "a", &config);
    let b = Instance::start(&dir.0, "b", &config);
    let c = Instance::start(&dir.0, "c", &config);
    let client = Client::connect(&nats.url);
    let started = Instant::now();
    publish(&client, 600);
    let answers = client.wait_answered(600);
    let took = started.elapsed();
    let by = shares(&answers, &[&a, &b, &c]);
    eprintln!("600 jobs of 100 ms on 3 x 2 workers: {took:.1?}, shares {by:?}");
    assert_once(&answers, 600);
    // Equal free workers, equal shares (200 each), within a wide margin.
    for i in ["a", "b", "c"] {
        let n = by.get(i).copied().unwrap_or(0);
        assert!((120..=280).contains(&n), "{i} answered {n}: {by:?}");
    }
    assert_eq!(wait_empty(&client, Duration::from_secs(5)), (0, 0, 0));
    let fetched: f64 = [&a, &b, &c]
        .iter()
        .map(|i| i.metric("kennel_jetstream_fetched_total", "q"))
        .sum();
    assert_eq!(fetched, 600.0, "every message was fetched once");
}

#[test]
fn shares_follow_free_workers_and_a_stuck_instance_gets_none() {
    let test = "shares_follow_free_workers_and_a_stuck_instance_gets_none";
    let Some(nats) = Nats::start(test) else {
        return;
    };
    let dir = TempDir::new("shares");
    // c alone first: two jobs that hold its two workers for ten minutes.
    let c = Instance::start(&dir.0, "c", &queued_pool(&nats.url, 2, ""));
    let client = Client::connect(&nats.url);
    for i in 0..2 {
        client.publish("jobs.q", &format!("block-{i}"), r#"{"sleep_ms": 600000}"#);
    }
    c.wait_lent("q", 2);
    let a = Instance::start(&dir.0, "a", &queued_pool(&nats.url, 1, ""));
    let b = Instance::start(&dir.0, "b", &queued_pool(&nats.url, 3, ""));
    publish(&client, 200);
    let answers = client.wait_answered(200);
    let by = shares(&answers, &[&a, &b, &c]);
    eprintln!("200 jobs on a (1 worker), b (3), c (2, stuck): shares {by:?}");
    assert_once(&answers, 200);
    assert_eq!(by.get("c"), None, "the stuck instance answered: {by:?}");
    let (na, nb) = (
        by.get("a").copied().unwrap_or(0),
        by.get("b").copied().unwrap_or(0),
    );
    // 1 : 3 free workers, so about 50 : 150.
    assert!((20..=80).contains(&na), "a answered {na}: {by:?}");
    assert!((120..=180).contains(&nb), "b answered {nb}: {by:?}");
    // The stuck instance still answers over HTTP: another one runs the job.
    let Answer { status, head, body } =
        http(c.addr, "POST", "/pools/q/jobs", &[], r#"{"sleep_ms": 1}"#);
    assert_eq!(status, 200, "{body}");
    let head = head.to_ascii_lowercase();
    assert!(
        head.contains(&format!("/{}\r\n", a.pid())) || head.contains(&format!("/{}\r\n", b.pid())),
        "not run by a or b: {head}"
    );
    assert_eq!(
        c.metric("kennel_jetstream_fetched_total", "q"),
        2.0,
        "c fetched only its two"
    );
}

#[test]
fn a_kill_9_mid_run_loses_no_job() {
    let test = "a_kill_9_mid_run_loses_no_job";
    let Some(nats) = Nats::start(test) else {
        return;
    };
    let dir = TempDir::new("kill9");
    // Jobs that may run twice: those c ran are run again elsewhere (a
    // pool that does not say so fails them `interrupted`).
    let config = queued_pool(&nats.url, 2, "ack_wait = \"2s\"").replace(
        "job_timeout = \"5m\"",
        "job_timeout = \"5m\"\nretry_on_crash = 1",
    );
    let a = Instance::start(&dir.0, "a", &config);
    let b = Instance::start(&dir.0, "b", &config);
    let c = Instance::start(&dir.0, "c", &config);
    let client = Client::connect(&nats.url);
    publish(&client, 300);
    client.wait_answered(100);
    // Killed while both its workers run a job it has not acked.
    c.wait_lent("q", 2);
    c.signal(Signal::SIGKILL);
    let killed = Instant::now();
    let answers = client.wait_answered(300);
    let by = shares(&answers, &[&a, &b, &c]);
    let duplicates: usize = answers.values().map(|a| a.len() - 1).sum();
    let redelivered = a.metric("kennel_jetstream_redelivered_total", "q")
        + b.metric("kennel_jetstream_redelivered_total", "q");
    let late: Vec<&str> = answers
        .iter()
        .filter(|(_, a)| a.iter().any(|x| x.delivery > 1))
        .map(|(id, _)| id.as_str())
        .collect();
    eprintln!(
        "kill -9 of c: 300 jobs answered {:.1?} after the kill; shares {by:?}; redelivered {redelivered} ({late:?}); duplicate answers {duplicates}",
        killed.elapsed()
    );
    assert_eq!(answers.len(), 300, "a job was lost");
    assert!(answers.values().flatten().all(|x| x.status == 200));
    assert!(redelivered >= 1.0, "c's unacked jobs were not redelivered");
    assert!(!late.is_empty());
    assert_eq!(wait_empty(&client, Duration::from_secs(5)), (0, 0, 0));
}

#[test]
fn a_graceful_stop_acks_every_job_it_started() {
    let test = "a_graceful_stop_acks_every_job_it_started";
    let Some(nats) = Nats::start(test) else {
        return;
    };
    let dir = TempDir::new("graceful");
    // A long ack_wait: a job c left unacked would stay in the stream for
    // 30 s, past this test's look.
    let config = queued_pool(&nats.url, 2, "ack_wait = \"30s\"");
    let a = Instance::start(&dir.0, "a", &config);
    let b = Instance::start(&dir.0, "b", &config);
    let mut c = Instance::start(&dir.0, "c", &config);
    let client = Client::connect(&nats.url);
    publish(&client, 300);
    client.wait_answered(100);
    c.wait_lent("q", 2);
    c.signal(Signal::SIGTERM);
    let stopping = Instant::now();
    let status = c.child.wait().unwrap();
    let stopped = stopping.elapsed();
    assert!(status.success(), "c exited with {status}");
    let answers = client.wait_answered(300);
    let by = shares(&answers, &[&a, &b, &c]);
    eprintln!("SIGTERM to c: it stopped in {stopped:.1?}; shares {by:?}");
    assert_once(&answers, 300);
    assert!(by.get("c").copied().unwrap_or(0) >= 2, "{by:?}");
    // Every job c started was acked before it exited: nothing waits for
    // its ack_wait.
    let (messages, pending, unacked) = wait_empty(&client, Duration::from_secs(5));
    assert_eq!((messages, pending, unacked), (0, 0, 0));
    assert!(stopping.elapsed() < LIMIT);
}
