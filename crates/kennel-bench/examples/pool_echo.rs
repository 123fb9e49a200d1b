//! The direct-pool figure of the HTTP bench (`bench/http.sh`): one echo
//! job after another through a kennel pool of one [`Coprocess`], with the
//! same body as the HTTP requests and the same echo worker, on a 2-thread
//! runtime; no HTTP. What `kennel serve` adds is its figure minus this one.
//!
//! ```text
//! cargo run --release -p kennel-bench --example pool_echo -- WORKER [JOBS]
//! ```
//!
//! Prints `pool/direct: p50_us=… p99_us=… mean_us=…`.

use std::time::{Duration, Instant};

use kennel_process::{Coprocess, CoprocessSpec};

/// The body `bench/http.sh` posts.
const BODY: &str = r#"{"n": 1, "text": "hello"}"#;

fn main() {
    let mut args = std::env::args().skip(1);
    let worker = args.next().expect("usage: pool_echo WORKER [JOBS]");
    let jobs: usize = args.next().map_or(20_000, |n| n.parse().expect("a number"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async move {
        let pool = kennel_bench::echo_pool(CoprocessSpec::new([worker])).await;
        let request: serde_json::Value = serde_json::from_str(BODY).expect("JSON");
        let mut times = Vec::with_capacity(jobs);
        for i in 0..jobs + jobs / 10 {
            let start = Instant::now();
            let reply = pool
                .run(async |w: &mut Coprocess| w.request_raw(&request).await)
                .await
                .expect("lent")
                .expect("echoed");
            std::hint::black_box(reply);
            // The first tenth warms up.
            if i >= jobs / 10 {
                times.push(start.elapsed());
            }
        }
        times.sort();
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let mean = times.iter().map(|d| us(*d)).sum::<f64>() / times.len() as f64;
        println!(
            "pool/direct: p50_us={:.1} p99_us={:.1} mean_us={:.1}",
            us(times[times.len() / 2]),
            us(times[times.len() * 99 / 100]),
            mean
        );
        pool.close().await;
    });
}
