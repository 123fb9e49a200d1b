//! `CoprocessSpec::pool`: a pool of coprocesses from one spec, each worker
//! told its pool and slot in `KENNEL_POOL` and `KENNEL_SLOT`.
//!
//! Real processes need real time, so this runs on the real clock with short,
//! bounded waits.

#![cfg(target_os = "linux")]

mod common;

use common::{fixture, within};
use kennel::{Fixed, Parallel};
use kennel_process::{Coprocess, ProcessError};
use serde_json::{Value, json};

/// The worker's value of the environment variable `name`.
async fn env_of(worker: &mut Coprocess, name: &str) -> Result<Value, ProcessError> {
    worker.request(&json!({"op": "env", "name": name})).await
}

#[tokio::test]
async fn each_worker_of_a_spec_pool_knows_its_pool_and_slot() {
    let pool = fixture(&[])
        .env("KENNEL_POOL", "overridden by the pool")
        .pool()
        .name("labelled")
        .startup(Parallel)
        .sizing(Fixed(2))
        .build()
        .expect("a pool");

    // Hold both workers at once, so that each slot answers.
    let first = within("a first lease", pool.lend())
        .await
        .expect("a worker");
    let second = within("a second lease", pool.lend())
        .await
        .expect("a worker");
    let mut seen = Vec::new();
    for mut lease in [first, second] {
        let worker: &mut Coprocess = &mut lease;
        let pool_name = within("env", env_of(worker, "KENNEL_POOL"))
            .await
            .expect("env");
        let slot = within("env", env_of(worker, "KENNEL_SLOT"))
            .await
            .expect("env");
        seen.push((pool_name, slot));
    }
    seen.sort_by_key(|(_, slot)| slot.to_string());
    assert_eq!(
        seen,
        [
            (json!("labelled"), json!("0")),
            (json!("labelled"), json!("1")),
        ]
    );
    within("close", pool.close()).await;
}
