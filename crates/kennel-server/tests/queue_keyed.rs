//! Jobs with a key in a pool fed by a real `nats-server -js`: over HTTP the
//! key (the `Kennel-Key` header, or the pool's pointer) travels with the
//! job through the stream and the job reaches a worker holding its key
//! (`examples/workers/keyed_sdk.py` fails a job whose key it does not
//! hold); a message published to the stream has its key read at the
//! pool's pointer, and one whose key breaks a rule is answered `bad-key`
//! and terminated.

#![cfg(target_os = "linux")]

mod served;
mod support;

use serde_json::json;
use support::{Client, Instance, Nats, TempDir, queued_pool};

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

#[test]
fn a_queued_jobs_key_travels_with_it_to_a_worker_holding_the_key() {
    let test = "a_queued_jobs_key_travels_with_it_to_a_worker_holding_the_key";
    let Some(nats) = Nats::start(test) else {
        return;
    };
    let dir = TempDir::new(test);
    let keyed = format!(
        "argv = [\"python3\", \"{REPO}/examples/workers/keyed_sdk.py\"]\nenv = {{ PYTHONPATH = \"{REPO}/sdk/python\" }}\nkey = \"/key\"\nkey_pattern = \"^[a-z]+$\""
    );
    let config = queued_pool(&nats.url, 2, "").replace(
        "argv = [\"@kennel\", \"worker\", \"demo\", \"--warmup\", \"0s\"]",
        &keyed,
    );
    let a = Instance::start(&dir.0, "a", &config);
    for i in 0..24 {
        let key = ["a", "b", "c"][i % 3];
        let body = json!({ "key": key }).to_string();
        let header = [("Kennel-Key", key)];
        let headers: &[(&str, &str)] = if i % 2 == 1 { &header } else { &[] };
        let answer = served::http(a.addr, "POST", "/pools/q/jobs", headers, &body);
        assert_eq!(answer.status, 200, "{key}: {}", answer.body);
        assert_eq!(
            answer.json()["state"],
            format!("model-{key}"),
            "{}",
            answer.body
        );
    }
    let bad = served::http(
        a.addr,
        "POST",
        "/pools/q/jobs",
        &[("Kennel-Key", "A")],
        "{\"key\":\"a\"}",
    );
    assert_eq!(bad.status, 400, "refused before the stream: {}", bad.body);

    let client = Client::connect(&nats.url);
    client.publish("jobs.q", "good", r#"{"key":"b"}"#);
    client.publish("jobs.q", "bad", r#"{"key":"B/1"}"#);
    let answers = client.wait_answered(2);
    let good = &answers["good"][0];
    assert_eq!(good.status, 200, "{good:?}");
    assert_eq!(good.body["state"], "model-b", "{good:?}");
    let bad = &answers["bad"][0];
    assert_eq!(bad.status, 400, "{bad:?}");
    assert_eq!(bad.body["error"], "bad-key", "{bad:?}");
    assert_eq!(bad.delivery, 1, "terminated, not delivered again");
    assert_eq!(
        a.metric("kennel_jetstream_terminated_total", "q"),
        1.0,
        "{}",
        a.get("/pools/q/stats")
    );
}
