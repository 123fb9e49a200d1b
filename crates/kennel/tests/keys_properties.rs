//! Keyed pools under random sequences (proptest), on the paused clock: jobs
//! of a few keys, of none, and of a key whose load (and a worker's start
//! for it) fails, some dropped while
//! they wait, load or run, of tenants at priorities; workers that crash;
//! clock steps; and the size, `keys_per_worker`, `max_workers_per_key`,
//! `max_key_wait`, the binding, the tenants' table, the keys kept warm, the
//! key memory budget, the eviction, `min_idle` and the recycling
//! (`max_lifetime`, `max_jobs`, `max_surge`) changed on the live pool.
//! Whatever the sequence, no job runs on a worker without its key, no
//! worker holds more keys than `keys_per_worker` has allowed, every job not
//! dropped ends (with its reply, `load-failed` or `warmup-failed` for the
//! key that fails, and for no other, or, once a worker has crashed, the
//! error that says so: none is left waiting for ever), and the pool ends
//! with nothing lent or waiting.
//!
//! `PROPTEST_CASES=N` runs N sequences (default 256).

#[path = "keyed/holder.rs"]
mod holder;
mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use holder::{Holder, PER_KEY, Signals, builder_with, key, new_log};
use kennel::{
    Error, ExitStatus, Fixed, Key, KeyBinding, Pool, Priority, Reconfig, RunOptions, Tenant,
    TenantShare,
};
use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;
use support::sequences::{
    Churn, all_end, cases, churn, close_empty, paused_runtime, set, set_churn, spawn_job,
};

#[derive(Debug, Clone)]
enum Op {
    /// A job of key `k{n}` (`bad` for 8: its load, or a worker's start
    /// for it, fails), or of none; it
    /// runs `run_ms`, and is dropped after `drop_ms` if set.
    /// Of tenant `t{n}` if set, at a priority (0 low, 1 normal, 2 high).
    Job {
        key: Option<u8>,
        run_ms: u16,
        drop_ms: Option<u16>,
        tenant: Option<u8>,
        priority: u8,
    },
    /// The clock moves on.
    Step(u16),
    Size(usize),
    KeysPerWorker(usize),
    MaxWorkersPerKey(Option<usize>),
    MaxKeyWait(u16),
    Spawn(bool),
    /// The tenants' table: `t{n}`'s weight and `max_running`.
    Tenants(Vec<(u8, u32, Option<usize>)>),
    /// Key `k{n}` (or `bad`) kept warm on so many workers, or none.
    MinWorkersPerKey(Option<(u8, usize)>),
    /// A budget of so many keys' memory, or none.
    KeyMemoryBudget(Option<u64>),
    /// The `n`th worker made (modulo how many were) ends as if it crashed,
    /// if it has not ended yet.
    Crash(usize),
    /// How the pool lets workers go.
    Churn(Churn),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (
            prop::option::weighted(0.85, 0u8..9),
            0u16..1500,
            prop::option::weighted(0.2, 0u16..3000),
            prop::option::weighted(0.5, 0u8..3),
            0u8..3,
        )
            .prop_map(|(key, run_ms, drop_ms, tenant, priority)| Op::Job {
                key,
                run_ms,
                drop_ms,
                tenant,
                priority
            }),
        4 => (0u16..2500).prop_map(Op::Step),
        1 => (1usize..=4).prop_map(Op::Size),
        1 => (1usize..=3).prop_map(Op::KeysPerWorker),
        1 => prop::option::of(1usize..=2).prop_map(Op::MaxWorkersPerKey),
        1 => (1u16..2000).prop_map(Op::MaxKeyWait),
        1 => any::<bool>().prop_map(Op::Spawn),
        1 => prop::collection::vec((0u8..3, 1u32..4, prop::option::of(1usize..3)), 0..3)
            .prop_map(Op::Tenants),
        1 => prop::option::of((0u8..9, 1usize..3)).prop_map(Op::MinWorkersPerKey),
        1 => prop::option::of(1u64..7).prop_map(Op::KeyMemoryBudget),
        1 => (0usize..8).prop_map(Op::Crash),
        // Lifetimes above a load (1 s): a shorter one keeps each worker
        // loading a key kept warm for all its life.
        2 => churn(5).prop_map(Op::Churn),
    ]
}

fn key_name(n: u8) -> String {
    if n == 8 {
        "bad".into()
    } else {
        format!("k{n}")
    }
}

/// Runs one job as `Op::Job` says; what it must end with is checked here.
async fn one_job(
    pool: Pool<Holder>,
    k: Option<String>,
    run: Duration,
    class: (Option<Tenant>, Priority),
    most_keys: Arc<AtomicUsize>,
    crashes: Arc<AtomicUsize>,
) -> Result<(), String> {
    let want = k.clone();
    let body = async move |w: &mut Holder| {
        let most = most_keys.load(Ordering::SeqCst);
        assert!(
            w.held.len() <= most,
            "worker {} holds {:?}, more than {most} keys",
            w.id,
            w.held
        );
        if let Some(want) = &want {
            assert!(
                w.held.contains(want) || w.born_for.as_ref().is_some_and(|b| b.as_str() == want),
                "worker {} got a job of {want} without the key ({:?}, started for {:?})",
                w.id,
                w.held,
                w.born_for
            );
        }
        tokio::time::sleep(run).await;
    };
    let mut options = RunOptions::new().priority(class.1);
    if let Some(tenant) = class.0 {
        options = options.tenant(tenant);
    }
    if let Some(k) = &k {
        options = options.key(key(k));
    }
    let got = pool.run_with(options, body).await;
    let crashed = crashes.load(Ordering::SeqCst) > 0;
    match (got, k.as_deref()) {
        (Ok(()), _) => Ok(()),
        // Loading `bad` fails, and so does starting a worker for it (`spawn`).
        (Err(Error::LoadFailed { .. } | Error::WarmupFailed { .. }), Some("bad")) => Ok(()),
        // A worker that crashed under the job, as it started or loaded.
        (Err(Error::Crashed { .. } | Error::WarmupFailed { .. } | Error::LoadFailed { .. }), _)
            if crashed =>
        {
            Ok(())
        }
        (other, k) => Err(format!("a job of {k:?} ended with {other:?}")),
    }
}

fn tenant(n: u8) -> Tenant {
    Tenant::new(&format!("t{n}")).expect("a tenant name")
}

/// Plays `ops` on a keyed pool of `workers` holding up to `per` keys each.
fn play(workers: usize, per: usize, ops: &[Op]) -> Result<(), String> {
    let rt = paused_runtime();
    rt.block_on(async {
        let (log, born) = new_log();
        let signals = Signals::default();
        let crashes = Arc::new(AtomicUsize::new(0));
        let pool = builder_with(workers, &log, &born, &signals)
            .with_options(move |o| {
                o.keys_per_worker = per;
                // Room for every job of a sequence: none is turned away.
                o.max_waiting = Some(64);
                // Crashes never turn jobs away (the breaker's own tests
                // check it).
                o.break_after_failed_starts = None;
            })
            .build()
            .map_err(|e| e.to_string())?;
        let most_keys = Arc::new(AtomicUsize::new(per));
        let mut jobs = Vec::new();
        for op in ops {
            match op.clone() {
                Op::Job {
                    key,
                    run_ms,
                    drop_ms,
                    tenant: t,
                    priority,
                } => {
                    let priority =
                        [Priority::Low, Priority::Normal, Priority::High][usize::from(priority)];
                    let job = one_job(
                        pool.clone(),
                        key.map(key_name),
                        Duration::from_millis(run_ms.into()),
                        (t.map(tenant), priority),
                        most_keys.clone(),
                        crashes.clone(),
                    );
                    jobs.push(spawn_job(job, drop_ms));
                }
                Op::Step(ms) => tokio::time::sleep(Duration::from_millis(ms.into())).await,
                Op::Size(n) => {
                    pool.reconfigure(Reconfig::new().sizing(Fixed(n)))
                        .map_err(|e| e.to_string())?;
                }
                Op::KeysPerWorker(n) => {
                    most_keys.fetch_max(n, Ordering::SeqCst);
                    set(&pool, move |o| o.keys_per_worker = n)?;
                }
                Op::MaxWorkersPerKey(n) => set(&pool, move |o| o.max_workers_per_key = n)?,
                Op::MaxKeyWait(ms) => {
                    let wait = Duration::from_millis(ms.into());
                    set(&pool, move |o| o.max_key_wait = wait)?;
                }
                Op::Spawn(spawn) => {
                    let binding = if spawn {
                        KeyBinding::Spawn
                    } else {
                        KeyBinding::Load
                    };
                    set(&pool, move |o| o.key_binding = binding)?;
                }
                Op::Tenants(table) => {
                    let table: BTreeMap<Tenant, TenantShare> = table
                        .into_iter()
                        .map(|(n, weight, max_running)| {
                            let mut share = TenantShare::weight(weight);
                            share.max_running = max_running;
                            (tenant(n), share)
                        })
                        .collect();
                    set(&pool, move |o| o.tenants = table)?;
                }
                Op::MinWorkersPerKey(warm) => {
                    let warm: BTreeMap<Key, usize> = warm
                        .map(|(k, n)| (key(&key_name(k)), n))
                        .into_iter()
                        .collect();
                    set(&pool, move |o| o.min_workers_per_key = warm)?;
                }
                Op::KeyMemoryBudget(keys) => {
                    let budget = keys.map(|n| n * PER_KEY);
                    set(&pool, move |o| o.key_memory_budget = budget)?;
                }
                Op::Churn(churn) => set_churn(&pool, &churn)?,
                Op::Crash(n) => {
                    let signals = signals.lock().unwrap();
                    if let Some(signal) = signals.get(n % signals.len().max(1))
                        && !signal.has_exited()
                    {
                        crashes.fetch_add(1, Ordering::SeqCst);
                        signal.exit(ExitStatus::Code(101));
                    }
                }
            }
        }
        all_end(jobs).await?;
        // Keys kept warm may still be loading, and load again on each
        // worker that recycling replaces: no more recycling from now on.
        set(&pool, |o| {
            o.max_lifetime = None;
            o.max_jobs = None;
        })?;
        tokio::time::sleep(Duration::from_secs(60)).await;
        let alive = || {
            signals
                .lock()
                .unwrap()
                .iter()
                .filter(|s| !s.has_exited())
                .count()
        };
        close_empty(&pool, alive).await?;
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(256), .. ProptestConfig::default() })]

    #[test]
    fn any_sequence_runs_every_job_on_a_worker_that_holds_its_key_and_ends_it(
        workers in 1usize..=4,
        per in 1usize..=3,
        ops in prop::collection::vec(op(), 1..120),
    ) {
        play(workers, per, &ops).map_err(TestCaseError::fail)?;
    }
}
