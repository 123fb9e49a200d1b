//! Route jobs by key (docs/recipes/route-jobs-by-key.md): three models
//! behind one pool of two Python workers (`examples/workers/keyed_sdk.py`,
//! the SDK's `load_key`/`unload_key` hooks), each worker holding up to two.
//! Jobs of the three models come interleaved; each runs on a worker that
//! holds its model, loaded once, and the pool says where each key lives.
//!
//! Needs `python3`; the SDK is read from `sdk/python`.

use std::path::PathBuf;
use std::time::Duration;

use kennel::{Event, Fixed, Key, RunOptions};
use kennel_process::{Coprocess, CoprocessSpec};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let pool = CoprocessSpec::new(["python3".into(), root.join("examples/workers/keyed_sdk.py")])
        .env("PYTHONPATH", root.join("sdk/python"))
        // A load takes 200 ms here; a real model takes seconds.
        .env("KEYED_LOAD_SECONDS", "0.2")
        .pool()
        .name("models")
        .sizing(Fixed(2))
        .with_options(|o| {
            o.keys_per_worker = 2;
            o.max_key_wait = Duration::from_millis(100);
        })
        .build()?;
    let mut events = pool.events();

    // Four clients send jobs of three models, interleaved.
    let mut clients = Vec::new();
    for client in 0..4 {
        let pool = pool.clone();
        clients.push(tokio::spawn(async move {
            let mut answers = Vec::new();
            for n in 0..10 {
                let model = ["small", "large", "small", "vision"][(client + n) % 4];
                let key = Key::new(model).expect("a valid key");
                let reply = pool
                    .run_with(RunOptions::new().key(key), async |w: &mut Coprocess| {
                        w.request(&json!({"key": model})).await
                    })
                    .await
                    .expect("a worker")
                    .expect("a reply");
                answers.push(reply["state"].as_str().unwrap_or_default().to_owned());
            }
            answers
        }));
    }
    let mut answered = 0;
    for c in clients {
        answered += c.await?.len();
    }
    let mut loads = 0;
    while let Ok(event) = events.try_recv() {
        if let Event::Loaded { slot, key, took } = event {
            loads += 1;
            println!("worker:loaded slot {slot} key {key} in {took:.1?}");
        }
    }
    println!("{answered} jobs, {loads} loads");
    for row in pool.workers() {
        let keys: Vec<&str> = row.keys.iter().map(Key::as_str).collect();
        println!("slot {} holds {keys:?}", row.slot);
    }
    pool.close().await;
    Ok(())
}
