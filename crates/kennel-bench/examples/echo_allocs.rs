//! How many allocations one echo job makes through a kennel pool of one
//! [`Coprocess`] (dhat's counting allocator; the pool's lend and the
//! runtime included), the way `kennel serve` ran a job before jobs went
//! through as bytes (the body parsed into a `Value`, written again for the worker, the
//! reply copied into a `RawValue`, then into the response's `String`) and
//! the way it runs one now (the body checked as `JsonBytes`, the reply
//! line handed on).
//!
//! ```text
//! cargo run --release -p kennel-bench --example echo_allocs -- WORKER
//! ```
//!
//! Prints `allocs/tree: per_job=…` and `allocs/bytes: per_job=…`.

use kennel_process::{Coprocess, CoprocessSpec, JsonBytes};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// The body `bench/http.sh` posts.
const BODY: &str = r#"{"n": 1, "text": "hello"}"#;

fn main() {
    let worker = std::env::args().nth(1).expect("usage: echo_allocs WORKER");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let _counting = dhat::Profiler::builder().testing().build();
    let allocs = || dhat::HeapStats::get().total_blocks;
    rt.block_on(async move {
        let pool = kennel_bench::echo_pool(CoprocessSpec::new([worker])).await;
        for _ in 0..200 {
            let job = JsonBytes::new(BODY.as_bytes()).expect("JSON");
            pool.run(async |w: &mut Coprocess| w.request_bytes(&job, None).await)
                .await
                .expect("lent")
                .expect("echoed");
        }
        let jobs_counted = 2_000u64;
        let before = allocs();
        for _ in 0..jobs_counted {
            // Before the bytes went through: a tree in, the reply copied into a
            // `RawValue`, then into the response's `String`.
            let tree: serde_json::Value = serde_json::from_slice(BODY.as_bytes()).expect("JSON");
            let reply = pool
                .run(async |w: &mut Coprocess| w.request_raw(&tree).await)
                .await
                .expect("lent")
                .expect("echoed");
            std::hint::black_box(reply.get().to_owned());
        }
        let tree = allocs() - before;
        let before = allocs();
        for _ in 0..jobs_counted {
            let job = JsonBytes::new(BODY.as_bytes()).expect("JSON");
            let reply = pool
                .run(async |w: &mut Coprocess| w.request_bytes(&job, None).await)
                .await
                .expect("lent")
                .expect("echoed");
            std::hint::black_box(reply.into_bytes());
        }
        let bytes = allocs() - before;
        let per = |n: u64| n as f64 / jobs_counted as f64;
        println!("allocs/tree: per_job={:.2}", per(tree));
        println!("allocs/bytes: per_job={:.2}", per(bytes));
        pool.close().await;
    });
}
