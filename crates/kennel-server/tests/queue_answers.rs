//! A pool fed by a real `nats-server -js`: its answers are the HTTP route's
//! bodies and error kinds; a reply or a worker's error is acked, a crash is
//! delivered again until `max_deliver` and then answered and terminated, a
//! job that is not JSON is answered `bad-json` and terminated; HTTP into a
//! queued pool goes through the stream; a job object gets its id.

#![cfg(target_os = "linux")]

mod support;

use serde_json::{Value, json};
use support::{Answer, Client, Instance, Nats, TempDir, http, queued_pool};

/// One instance with a queued pool `q` and the same pool without a queue,
/// `direct`.
fn setup(test: &str, queue_extra: &str) -> Option<(Nats, TempDir, Instance, Client)> {
    let nats = Nats::start(test)?;
    let dir = TempDir::new(test);
    let config = format!(
        r#"{}
[[pool]]
name = "direct"
argv = ["@kennel", "worker", "demo", "--warmup", "0s"]
startup = "parallel"
sizing = {{ kind = "fixed", workers = 1 }}
job_timeout = "5m"
"#,
        queued_pool(&nats.url, 2, queue_extra)
    );
    let instance = Instance::start(&dir.0, "a", &config);
    let client = Client::connect(&nats.url);
    Some((nats, dir, instance, client))
}

/// The body without what differs between two runs of one job.
fn steady(mut body: Value) -> Value {
    for key in ["pid", "millis", "job", "slot"] {
        if let Some(map) = body.as_object_mut() {
            map.remove(key);
        }
    }
    body
}

#[test]
fn queued_answers_are_the_http_bodies_and_kinds() {
    let Some((_nats, _dir, a, client)) = setup(
        "queued_answers_are_the_http_bodies_and_kinds",
        "max_deliver = 2\nnak_delay = \"100ms\"",
    ) else {
        return;
    };
    let jobs = [
        ("ok", r#"{"iterations": 1000}"#),
        ("fail", r#"{"fail": "model not loaded"}"#),
        ("crash", r#"{"crash": true}"#),
        ("notjson", "{not json"),
    ];
    for (id, body) in jobs {
        client.publish("jobs.q", id, body);
    }
    let answers = client.wait_answered(jobs.len());
    assert_eq!(answers.len(), jobs.len(), "{answers:#?}");
    for (id, body) in jobs {
        let got = &answers[id];
        assert_eq!(got.len(), 1, "{id} answered {} times", got.len());
        let Answer {
            status,
            body: direct,
            ..
        } = http(a.addr, "POST", "/pools/direct/jobs", &[], body);
        let direct: Value = serde_json::from_str(&direct).unwrap();
        assert_eq!(got[0].status, status, "{id}: {:?} vs {direct}", got[0]);
        assert_eq!(got[0].body["error"], direct["error"], "{id}");
        if id != "crash" {
            assert_eq!(steady(got[0].body.clone()), steady(direct), "{id}");
        }
    }
    // The crash ran on both deliveries; its answer carries the last words.
    assert_eq!(answers["crash"][0].delivery, 2);
    assert_eq!(
        answers["crash"][0].body["stderr"].as_array().map(Vec::len),
        Some(2)
    );
    assert_eq!(a.metric("kennel_jetstream_acked_total", "q"), 2.0);
    assert_eq!(a.metric("kennel_jetstream_naked_total", "q"), 1.0);
    assert_eq!(a.metric("kennel_jetstream_terminated_total", "q"), 2.0);
    assert_eq!(a.metric("kennel_jetstream_redelivered_total", "q"), 1.0);
    assert_eq!(a.metric("kennel_jetstream_fetched_total", "q"), 5.0);
    // Nothing is left in the work queue.
    assert_eq!(client.backlog("JOBS", "q"), (0, 0, 0));
}

#[test]
fn http_into_a_queued_pool_goes_through_the_stream_and_answers_as_http() {
    let Some((_nats, _dir, a, _client)) = setup(
        "http_into_a_queued_pool_goes_through_the_stream_and_answers_as_http",
        "",
    ) else {
        return;
    };
    let Answer { status, head, body } = http(
        a.addr,
        "POST",
        "/pools/q/jobs",
        &[],
        r#"{"iterations": 10}"#,
    );
    assert_eq!(status, 200, "{body}");
    assert!(
        head.to_ascii_lowercase().contains("kennel-job-id: http-"),
        "{head}"
    );
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["done"], true);
    let Answer { status, body, .. } =
        http(a.addr, "POST", "/pools/q/jobs", &[], r#"{"fail": "no"}"#);
    assert_eq!(status, 500);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        json!({"error": "worker-error", "message": "no"})
    );
    assert_eq!(a.metric("kennel_jetstream_fetched_total", "q"), 2.0);
    // Bad JSON never reaches the stream: the route refuses it first.
    let Answer { status, .. } = http(a.addr, "POST", "/pools/q/jobs", &[], "{");
    assert_eq!(status, 400);
    assert_eq!(a.metric("kennel_jetstream_fetched_total", "q"), 2.0);
}

#[test]
fn a_job_object_gets_its_id_and_delivery_for_dedupe() {
    let test = "a_job_object_gets_its_id_and_delivery_for_dedupe";
    let Some(nats) = Nats::start(test) else {
        return;
    };
    let dir = TempDir::new(test);
    let echo = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/workers/echo.py"
    );
    let config = format!(
        r#"[[pool]]
name = "echo"
argv = ["python3", "{echo}"]
sizing = {{ kind = "fixed", workers = 1 }}

[pool.queue]
nats = "{}"
stream = "ECHO"
subject = "jobs.echo"
"#,
        nats.url
    );
    let _a = Instance::start(&dir.0, "a", &config);
    let client = Client::connect(&nats.url);
    client.publish("jobs.echo", "job-7", r#"{"text": "hi"}"#);
    client.publish("jobs.echo", "job-8", r#"["not", "an", "object"]"#);
    let answers = client.wait_answered(2);
    assert_eq!(
        answers["job-7"][0].body,
        json!({"text": "hi", "_kennel": {"id": "job-7", "delivery": 1}})
    );
    // Only an object gets the key: anything else reaches the worker as sent.
    assert_eq!(answers["job-8"][0].body, json!(["not", "an", "object"]));
}

#[test]
fn a_queued_http_job_whose_answer_is_late_is_answered_504_queue_timeout() {
    let test = "a_queued_http_job_whose_answer_is_late_is_answered_504_queue_timeout";
    let Some(nats) = Nats::start(test) else {
        return;
    };
    let dir = TempDir::new(test);
    let config = support::queued_pool(&nats.url, 1, "reply_timeout = \"300ms\"");
    let a = Instance::start(&dir.0, "a", &config);
    let client = Client::connect(&nats.url);
    // The one worker is held; the HTTP job waits in the stream.
    client.publish("jobs.q", "hold", r#"{"sleep_ms": 2000}"#);
    a.wait_lent("q", 1);
    let Answer { status, head, body } =
        http(a.addr, "POST", "/pools/q/jobs", &[], r#"{"iterations": 1}"#);
    assert_eq!(status, 504, "{body}");
    // The answer names the job, whose result GET /jobs/{id} gives later.
    let id = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("kennel-job-id: ")
                .map(str::to_owned)
        })
        .expect("a job id");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        json!({"error": "queue-timeout", "message": format!("the job is queued but its result did not come within 300ms; it may still run, as job {id} (GET /jobs/{id} gives its result)")})
    );
    let deadline = std::time::Instant::now() + support::LIMIT;
    loop {
        let job = a.get(&format!("/jobs/{id}"));
        if job["state"] == "done" {
            assert_eq!(job["result"]["done"], true, "{job}");
            break;
        }
        // Each request paces the next one.
        assert!(std::time::Instant::now() < deadline, "{job}");
    }
}

#[test]
fn an_instance_whose_nats_is_gone_is_not_ready() {
    let test = "an_instance_whose_nats_is_gone_is_not_ready";
    let Some(nats) = Nats::start(test) else {
        return;
    };
    let dir = TempDir::new(test);
    let a = Instance::start(&dir.0, "a", &support::queued_pool(&nats.url, 1, ""));
    // Ready once the pool's first worker is.
    let deadline = std::time::Instant::now() + support::LIMIT;
    loop {
        let Answer { status, body, .. } = http(a.addr, "GET", "/readyz", &[], "");
        if status == 200 {
            break;
        }
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap(),
            json!({"status": "unavailable", "pools": {"q": "warming"}})
        );
        assert!(std::time::Instant::now() < deadline, "never ready: {body}");
        std::thread::yield_now();
    }
    drop(nats);
    let deadline = std::time::Instant::now() + support::LIMIT;
    loop {
        let Answer { status, body, .. } = http(a.addr, "GET", "/readyz", &[], "");
        if status == 503 {
            assert_eq!(
                serde_json::from_str::<Value>(&body).unwrap(),
                json!({"status": "unavailable", "pools": {"q": "queue-down"}})
            );
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still ready: {body}");
    }
}

#[test]
fn a_job_answered_503_while_nats_is_down_never_runs_once_it_is_back() {
    let test = "a_job_answered_503_while_nats_is_down_never_runs";
    let Some(mut nats) = Nats::start(test) else {
        return;
    };
    let dir = TempDir::new(test);
    let a = Instance::start(&dir.0, "a", &support::queued_pool(&nats.url, 1, ""));
    let ready = |want: u16| {
        let deadline = std::time::Instant::now() + support::LIMIT;
        loop {
            let Answer { status, body, .. } = http(a.addr, "GET", "/readyz", &[], "");
            if status == want {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "readyz never {want}: {body}"
            );
            std::thread::yield_now();
        }
    };
    ready(200);
    nats.stop();
    ready(503);
    let Answer { status, body, .. } = http(a.addr, "POST", "/pools/q/jobs", &[], r#"{"n": 1}"#);
    assert_eq!(status, 503, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"], "queue-unavailable");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("was not stored and will not run"),
        "{body}"
    );
    // NATS comes back with its store: a later job runs, and it is the only
    // one the queue ever delivered (the refused job was kept nowhere).
    nats.restart();
    ready(200);
    let Answer { status, body, .. } = http(a.addr, "POST", "/pools/q/jobs", &[], r#"{"n": 2}"#);
    assert_eq!(status, 200, "{body}");
    assert_eq!(a.metric("kennel_jetstream_fetched_total", "q"), 1.0);
    let client = Client::connect(&nats.url);
    assert_eq!(client.backlog("JOBS", "q"), (0, 0, 0));
}
