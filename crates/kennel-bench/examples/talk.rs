//! Two figures of docs/BENCHMARKS.md, measured in one run:
//!
//! - the echo round trip through a kennel pool of one coprocess in
//!   `json-rpc` framing against `json-lines` (the same Rust echo worker,
//!   `framed_echo_worker`), rounds interleaved, the median of each;
//! - the cost of an aborted job for a worker with a 2 s warm-up: with
//!   cancel (the worker answers and is kept) against kill + re-warm, each
//!   timed from the abort to the next job's reply.
//!
//! `cargo run --release -p kennel-bench --example talk` (it builds the
//! echo worker; needs python3 for the warm-up worker).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use kennel::{Fixed, Parallel, Pool};
use kennel_process::{Coprocess, CoprocessSpec, Framing};
use serde_json::json;

const ECHOES: usize = 2_000;
const ROUNDS: usize = 15;
const ABORTS: usize = 3;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn worker() -> PathBuf {
    let path = root().join("target/release/examples/framed_echo_worker");
    if !path.exists() {
        let status = std::process::Command::new(env!("CARGO"))
            .current_dir(root())
            .args([
                "build",
                "--release",
                "-p",
                "kennel-bench",
                "--example",
                "framed_echo_worker",
            ])
            .status()
            .expect("cargo runs");
        assert!(status.success());
    }
    path
}

async fn echo_round(pool: &Pool<Coprocess>, framing: Framing) -> Duration {
    let request = if framing.is_rpc() {
        json!({"method": "echo", "params": {"n": 1, "text": "hello"}})
    } else {
        json!({"n": 1, "text": "hello"})
    };
    let start = Instant::now();
    for _ in 0..ECHOES {
        pool.run(async |w: &mut Coprocess| w.request_raw(&request).await)
            .await
            .unwrap()
            .unwrap();
    }
    start.elapsed() / ECHOES as u32
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// A Python SDK worker with a 2 s warm-up whose jobs spin until cancelled.
const SLOW: &str = r#"
import time
from kennel_worker import serve, cancelled
def load():
    time.sleep(2)
def handle(request):
    if request.get("op") == "spin":
        while not cancelled():
            time.sleep(0.001)
    return {"ok": True}
serve(handle, load=load)
"#;

async fn abort_cost(cancel: bool) -> Duration {
    let pool = CoprocessSpec::new(["python3", "-c", SLOW])
        .env("PYTHONPATH", root().join("sdk/python"))
        .cancel_lines(cancel)
        .pool()
        .startup(Parallel)
        .sizing(Fixed(1))
        .build()
        .unwrap();
    let mut costs = Vec::new();
    for _ in 0..ABORTS {
        pool.run(async |w: &mut Coprocess| w.request(&json!({})).await)
            .await
            .unwrap()
            .unwrap();
        let aborted = tokio::time::timeout(
            Duration::from_millis(50),
            pool.run(async |w: &mut Coprocess| w.request(&json!({"op": "spin"})).await),
        )
        .await;
        assert!(aborted.is_err());
        let start = Instant::now();
        pool.run(async |w: &mut Coprocess| w.request(&json!({})).await)
            .await
            .unwrap()
            .unwrap();
        costs.push(start.elapsed());
    }
    pool.close().await;
    median(costs)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let worker = worker();
    let pool_of = |framing: Framing| {
        CoprocessSpec::new([worker.as_os_str().to_owned(), framing.as_str().into()])
            .framing(framing)
            .pool()
            .startup(Parallel)
            .sizing(Fixed(1))
            .build()
            .unwrap()
    };
    let lines = pool_of(Framing::JsonLines);
    let rpc = pool_of(Framing::JsonRpc);
    // Warm both.
    echo_round(&lines, Framing::JsonLines).await;
    echo_round(&rpc, Framing::JsonRpc).await;
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        a.push(echo_round(&lines, Framing::JsonLines).await);
        b.push(echo_round(&rpc, Framing::JsonRpc).await);
    }
    let mut ratios: Vec<f64> = a
        .iter()
        .zip(&b)
        .map(|(x, y)| y.as_secs_f64() / x.as_secs_f64())
        .collect();
    ratios.sort_by(f64::total_cmp);
    let (best_a, best_b) = (a.iter().min().copied(), b.iter().min().copied());
    let (best_a, best_b) = (best_a.unwrap_or_default(), best_b.unwrap_or_default());
    let (a, b) = (median(a), median(b));
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "echo round trip, json-lines: median {:.1} µs, best {:.1} µs",
        us(a),
        us(best_a)
    );
    println!(
        "echo round trip, json-rpc:   median {:.1} µs, best {:.1} µs",
        us(b),
        us(best_b)
    );
    println!(
        "json-rpc / json-lines: median of paired rounds {:.3}, of medians {:.3}, of best rounds {:.3}",
        ratios[ratios.len() / 2],
        us(b) / us(a),
        us(best_b) / us(best_a)
    );
    lines.close().await;
    rpc.close().await;

    let kept = abort_cost(true).await;
    let killed = abort_cost(false).await;
    println!(
        "abort then next reply, cancel (worker kept): {:.1} ms",
        kept.as_secs_f64() * 1e3
    );
    println!(
        "abort then next reply, kill + 2 s re-warm:   {:.1} ms",
        killed.as_secs_f64() * 1e3
    );
    println!(
        "kill / cancel: {:.0}",
        killed.as_secs_f64() / kept.as_secs_f64()
    );
}
