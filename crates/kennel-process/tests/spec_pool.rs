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

/// The values of `names` in each of the pool's two workers (both held at
/// once, so that each slot answers).
async fn each_worker(pool: &kennel::Pool<Coprocess>, names: [&str; 2]) -> Vec<[Value; 2]> {
    let first = within("a first lease", pool.lend())
        .await
        .expect("a worker");
    let second = within("a second lease", pool.lend())
        .await
        .expect("a worker");
    let mut seen = Vec::new();
    for mut lease in [first, second] {
        let worker: &mut Coprocess = &mut lease;
        let a = within("env", env_of(worker, names[0])).await.expect("env");
        let b = within("env", env_of(worker, names[1])).await.expect("env");
        seen.push([a, b]);
    }
    seen
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

    let mut seen: Vec<(Value, Value)> = each_worker(&pool, ["KENNEL_POOL", "KENNEL_SLOT"])
        .await
        .into_iter()
        .map(|[a, b]| (a, b))
        .collect();
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

#[tokio::test]
async fn a_worker_placed_on_a_gpu_finds_it_in_cuda_visible_devices() {
    // The GPUs are a test computer's; the processes and their
    // environment are real.
    let computer = kennel::TestComputer::new(4, 64 << 30);
    computer.add_gpu("0", 80 << 30).add_gpu("1", 80 << 30);
    let pool = fixture(&[])
        .env("CUDA_VISIBLE_DEVICES", "overridden by the pool")
        .pool()
        .name("gpus")
        .computer(computer)
        .with_options(|o| o.gpus_per_worker = Some(kennel::GpusPerWorker::Devices(1)))
        .startup(Parallel)
        .sizing(Fixed(2))
        .build()
        .expect("a pool");
    let mut seen: Vec<(Value, Value)> = each_worker(&pool, ["CUDA_VISIBLE_DEVICES", "KENNEL_GPU"])
        .await
        .into_iter()
        .map(|[a, b]| (a, b))
        .collect();
    seen.sort_by_key(|(_, gpu)| gpu.to_string());
    assert_eq!(
        seen,
        [
            (json!("GPU-test-0"), json!("0")),
            (json!("GPU-test-1"), json!("1")),
        ]
    );
    within("close", pool.close()).await;
}
