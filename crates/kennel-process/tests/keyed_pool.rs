//! Keyed jobs through a pool of real processes: a job reaches a worker that
//! holds its key's state (`examples/workers/keyed_sdk.py`, Python SDK
//! workers that load keys). The language server pooled by workspace is in
//! `lsp.rs`.

#![cfg(target_os = "linux")]

mod common;

use std::time::Duration;

use common::within;
use kennel::{Fixed, Key, RunOptions};
use kennel_process::{Coprocess, CoprocessSpec};
use serde_json::json;

const KEYED_SDK: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/workers/keyed_sdk.py"
);
const SDK_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../sdk/python");

#[tokio::test]
async fn a_thousand_jobs_of_four_keys_each_reach_a_worker_holding_their_keys_state() {
    let pool = CoprocessSpec::new(["python3", KEYED_SDK])
        .env("PYTHONPATH", SDK_PATH)
        .pool()
        .name("keyed")
        .sizing(Fixed(2))
        .with_options(|o| {
            // One key per worker, switched often: a short starvation bound
            // keeps the test quick.
            o.keys_per_worker = 1;
            o.max_key_wait = Duration::from_millis(2);
        })
        .build()
        .unwrap();
    let mut clients = Vec::new();
    for client in 0..8u64 {
        let pool = pool.clone();
        clients.push(tokio::spawn(async move {
            let mut wrong = Vec::new();
            // A small fixed walk over the keys, different per client.
            let mut x = client * 7 + 3;
            for _ in 0..125 {
                x = (x * 1_103_515_245 + 12_345) % 2_147_483_648;
                let k = ["a", "b", "c", "d"][(x >> 16) as usize % 4];
                let options = RunOptions::new().key(Key::new(k).unwrap());
                let reply = pool
                    .run_with(options, async |w: &mut Coprocess| {
                        w.request(&json!({"key": k})).await
                    })
                    .await
                    .expect("a worker")
                    .expect("a reply from a worker holding the key");
                if reply["key"] != k || reply["state"] != format!("model-{k}") {
                    wrong.push(reply);
                }
            }
            wrong
        }));
    }
    let mut wrong = Vec::new();
    for c in clients {
        wrong.extend(within("clients", c).await.unwrap());
    }
    assert!(
        wrong.is_empty(),
        "answered without their key's state: {wrong:?}"
    );
    let held: Vec<Vec<Key>> = pool.workers().into_iter().map(|r| r.keys).collect();
    assert!(held.iter().all(|k| k.len() <= 1), "{held:?}");
    within("close", pool.close()).await;
}
