//! A thread budget per worker: each worker's environment carries its share
//! of the host's cores for the pool's size as it starts, and workers started
//! after a resize get the new share.

#![cfg(target_os = "linux")]

mod common;

use common::within;
use kennel::{Fixed, Parallel, Reconfig};
use kennel_process::{Coprocess, CoprocessSpec, ThreadBudget};
use serde_json::{Value, json};

/// A worker that answers each job with its thread variables.
fn spec() -> CoprocessSpec {
    CoprocessSpec::new([
        "sh",
        "-c",
        r#"echo '{"ready":true}'
        while read line; do
          echo "{\"omp\":\"$OMP_NUM_THREADS\",\"mkl\":\"$MKL_NUM_THREADS\",\"openblas\":\"$OPENBLAS_NUM_THREADS\",\"kennel\":\"$KENNEL_THREADS\",\"slot\":$KENNEL_SLOT}"
        done"#,
    ])
    .threads(ThreadBudget::Share)
}

fn share(size: usize) -> String {
    let cores = std::thread::available_parallelism().unwrap().get();
    (cores / size).max(1).to_string()
}

async fn ask(pool: &kennel::Pool<Coprocess>) -> Value {
    within(
        "a job",
        pool.run(async |w: &mut Coprocess| w.request(&json!({})).await),
    )
    .await
    .expect("lent")
    .expect("a reply")
}

#[tokio::test]
async fn a_workers_environment_carries_its_thread_budget_and_follows_the_size_after_a_resize() {
    let pool = spec()
        .pool()
        .name("budget")
        .startup(Parallel)
        .sizing(Fixed(2))
        .build()
        .expect("pool");
    let reply = ask(&pool).await;
    for var in ["omp", "mkl", "openblas", "kennel"] {
        assert_eq!(reply[var], share(2), "{var}: {reply}");
    }

    // One slot now: the running worker keeps its budget; the next one
    // started gets the new share.
    pool.reconfigure(Reconfig::new().sizing(Fixed(1)))
        .expect("resized");
    let reply = ask(&pool).await;
    assert_eq!(reply["omp"], share(2), "{reply}");
    let lease = within("a lease", pool.lend()).await.expect("lent");
    lease.fail();
    let reply = ask(&pool).await;
    assert_eq!(reply["omp"], share(1), "{reply}");
    assert_eq!(reply["kennel"], share(1), "{reply}");
    pool.close().await;
}

#[tokio::test]
async fn a_thread_variable_the_spec_sets_is_left_as_it_is() {
    let pool = spec()
        .env("OMP_NUM_THREADS", "7")
        .pool()
        .sizing(Fixed(1))
        .build()
        .expect("pool");
    let reply = ask(&pool).await;
    assert_eq!(reply["omp"], "7");
    assert_eq!(reply["mkl"], share(1));
    pool.close().await;
}
