//! A thread budget per worker: each worker's environment carries its share
//! of the host's cores for the pool's size as it starts, and workers started
//! after a resize get the new share (running ones too, with
//! `replace_on_resize`).

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
async fn with_replace_on_resize_the_running_worker_is_replaced_to_carry_the_new_sizes_budget() {
    let pool = spec()
        .pool()
        .name("rebudget")
        .startup(Parallel)
        .sizing(Fixed(2))
        .with_options(|o| o.replace_on_resize = true)
        .build()
        .expect("pool");
    let reply = ask(&pool).await;
    assert_eq!(reply["kennel"], share(2), "{reply}");

    // One slot now: its idle worker, started for two, is replaced at once,
    // and the next job gets a worker with one slot's share.
    pool.reconfigure(Reconfig::new().sizing(Fixed(1)))
        .expect("resized");
    let reply = ask(&pool).await;
    for var in ["omp", "mkl", "openblas", "kennel"] {
        assert_eq!(reply[var], share(1), "{var}: {reply}");
    }
    assert_eq!(reply["slot"], 0, "{reply}");
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

/// A worker that answers each job with the CPUs the kernel lets it run on,
/// read from its own `/proc/self/status`, and what it was told.
fn pinned() -> CoprocessSpec {
    CoprocessSpec::new([
        "python3",
        "-c",
        r#"
import json, os, sys
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    status = open("/proc/self/status").read()
    allowed = [l.split(":", 1)[1].strip() for l in status.splitlines() if l.startswith("Cpus_allowed_list")][0]
    print(json.dumps({"allowed": allowed, "told": os.environ.get("KENNEL_CPUS"), "threads": os.environ.get("KENNEL_THREADS"), "slot": int(os.environ["KENNEL_SLOT"])}), flush=True)
"#,
    ])
    .threads(ThreadBudget::Share)
    .pin(true)
}

/// This test process's own CPUs, as the kernel lists them.
fn own_cpus() -> Vec<usize> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_owned();
    let mut cpus = Vec::new();
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<usize>().unwrap()..=b.parse().unwrap()),
            None => cpus.push(part.parse().unwrap()),
        }
    }
    cpus
}

/// CPUs as the kernel lists them: runs as `a-b`, joined by commas.
fn list(cpus: &[usize]) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &c in cpus {
        match runs.last_mut() {
            Some((_, hi)) if *hi + 1 == c => *hi = c,
            _ => runs.push((c, c)),
        }
    }
    runs.iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[tokio::test]
async fn a_pinned_worker_runs_only_on_its_share_of_the_cpus_and_follows_the_size() {
    let cpus = own_cpus();
    if cpus.len() < 2 {
        eprintln!("SKIPPED: this process may use one CPU only; pinning shares out at least 2");
        return;
    }
    let pool = pinned()
        .pool()
        .name("pinned")
        .startup(Parallel)
        .sizing(Fixed(2))
        .build()
        .expect("pool");
    // Both workers, each on half of the CPUs, told which.
    let half = cpus.len() / 2;
    let (a, b) = (
        within("a lease", pool.lend()).await.expect("lent"),
        within("a lease", pool.lend()).await.expect("lent"),
    );
    let mut seen = Vec::new();
    for mut lease in [a, b] {
        seen.push(
            within("a job", lease.request(&json!({})))
                .await
                .expect("reply"),
        );
    }
    seen.sort_by_key(|r| r["slot"].as_u64());
    for (slot, reply) in seen.iter().enumerate() {
        let share = list(&cpus[slot * half..(slot + 1) * half]);
        assert_eq!(reply["allowed"], share.as_str(), "slot {slot}: {reply}");
        assert_eq!(reply["told"], share.as_str(), "slot {slot}: {reply}");
        assert_eq!(reply["threads"], half.to_string(), "{reply}");
    }

    // One slot now: the next worker started has every CPU again.
    pool.reconfigure(Reconfig::new().sizing(Fixed(1)))
        .expect("resized");
    let lease = within("a lease", pool.lend()).await.expect("lent");
    lease.fail();
    let reply = ask(&pool).await;
    assert_eq!(reply["allowed"], list(&cpus).as_str(), "{reply}");
    assert_eq!(
        reply["told"],
        Value::Null,
        "a worker on every CPU is not pinned"
    );
    pool.close().await;
}

#[tokio::test]
async fn an_unpinned_worker_keeps_every_cpu() {
    let cpus = own_cpus();
    let pool = pinned()
        .pin(false)
        .pool()
        .startup(Parallel)
        .sizing(Fixed(2))
        .build()
        .expect("pool");
    let reply = ask(&pool).await;
    assert_eq!(reply["allowed"], list(&cpus).as_str(), "{reply}");
    assert_eq!(reply["told"], Value::Null);
    pool.close().await;
}
