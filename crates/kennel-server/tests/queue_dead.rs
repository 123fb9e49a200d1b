//! Dead letters of a pool fed by a real `nats-server -js`: a job that
//! crashes its worker on every delivery is given up on after
//! `max_deliver`, and kept with its last error, its deliveries and the job
//! itself where `GET /pools/{name}/dead` lists it; so is a job that is not
//! JSON, at once. A pool without a queue lists none.

#![cfg(target_os = "linux")]

mod support;

use serde_json::Value;
use support::{Answer, Client, Instance, Nats, TempDir, http, queued_pool};

#[test]
fn a_poison_job_ends_in_the_dead_letters_after_max_deliver_with_its_last_error() {
    let test = "a_poison_job_ends_in_the_dead_letters";
    let Some(nats) = Nats::start(test) else {
        return;
    };
    let dir = TempDir::new(test);
    let config = format!(
        r#"{}
[[pool]]
name = "direct"
argv = ["@kennel", "worker", "demo", "--warmup", "0s"]
sizing = {{ kind = "fixed", workers = 1 }}
"#,
        queued_pool(&nats.url, 2, "max_deliver = 3\nnak_delay = \"100ms\"")
    );
    let a = Instance::start(&dir.0, "a", &config);
    let client = Client::connect(&nats.url);
    let dead = || -> Vec<Value> {
        let Answer { status, body, .. } = http(a.addr, "GET", "/pools/q/dead", &[], "");
        assert_eq!(status, 200, "{body}");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["pool"], "q");
        body["dead"].as_array().unwrap().clone()
    };
    assert!(dead().is_empty(), "none yet");
    client.publish("jobs.q", "ok-1", r#"{"iterations": 1000}"#);
    client.publish("jobs.q", "poison", r#"{"crash": true}"#);
    client.publish("jobs.q", "garbled", "{not json");
    let answers = client.wait_answered(3);
    assert_eq!(answers["poison"][0].delivery, 3, "{answers:#?}");
    let letters = dead();
    assert_eq!(letters.len(), 2, "{letters:#?}");
    let poison = letters.iter().find(|l| l["id"] == "poison").unwrap();
    assert_eq!(poison["deliveries"], 3);
    assert_eq!(poison["reason"], "max-deliver");
    assert_eq!(poison["error"]["error"], "crashed");
    assert_eq!(poison["job"], r#"{"crash": true}"#);
    assert_eq!(poison["pool"], "q");
    let garbled = letters.iter().find(|l| l["id"] == "garbled").unwrap();
    assert_eq!(garbled["deliveries"], 1);
    assert_eq!(garbled["reason"], "bad-json");
    // Counted by reason; the job that ran is no dead letter.
    assert_eq!(a.metric("kennel_jetstream_terminated_total", "q"), 2.0);
    let Answer { status, body, .. } = http(a.addr, "GET", "/pools/q/dead?limit=1", &[], "");
    assert_eq!(status, 200);
    let one: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(one["dead"].as_array().unwrap().len(), 1, "the newest only");
    let Answer { status, body, .. } = http(a.addr, "GET", "/pools/q/dead?limit=many", &[], "");
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"],
        "bad-request"
    );
    // A pool without a queue gives up on none.
    let Answer { status, body, .. } = http(a.addr, "GET", "/pools/direct/dead", &[], "");
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["dead"],
        serde_json::json!([])
    );
}
