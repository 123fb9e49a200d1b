//! What a worker says of itself when ready: the fields of its ready line
//! besides `ready` are kept in its status row (`Pool::workers`).

#![cfg(target_os = "linux")]

mod common;

use common::within;
use kennel_process::CoprocessSpec;
use serde_json::json;

fn sh(script: &str) -> CoprocessSpec {
    CoprocessSpec::new(["sh", "-c", script])
}

#[tokio::test]
async fn a_workers_row_shows_the_fields_of_its_ready_line() {
    let pool = sh(r#"echo '{"ready":true,"model":"ocr-v2","device":"cpu"}'; exec cat"#)
        .pool()
        .startup(kennel::Parallel)
        .sizing(kennel::Fixed(1))
        .build()
        .expect("pool");
    within("ready", async {
        while pool.stats().idle < 1 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    let about = pool.workers()[0].about.clone().expect("what it said");
    let about: serde_json::Value = serde_json::from_str(&about).expect("JSON");
    assert_eq!(about, json!({"model": "ocr-v2", "device": "cpu"}));
    pool.close().await;
}
