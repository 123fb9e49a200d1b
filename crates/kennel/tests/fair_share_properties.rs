//! Tenants sharing an unkeyed pool under random sequences (proptest), on
//! the paused clock: jobs of three tenants and of none, at the three
//! priorities, some dropped while they wait or run; workers that crash;
//! clock steps; and the tenants' table (weights, `max_queued`,
//! `max_running`), the size, `max_waiting`, `max_queue_wait`, the
//! eviction, `min_idle` and the recycling changed on the live pool.
//! Whatever the sequence, a tenant whose every table so far bounded its
//! running jobs never runs more than the highest of those bounds at once;
//! every job not dropped ends, with its reply or with the error a limit or
//! a crash of the sequence explains (none is left waiting for ever); and
//! the pool ends with nothing lent or waiting.
//!
//! `PROPTEST_CASES=N` runs N sequences (default 256).

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kennel::{
    Error, Fixed, Parallel, Pool, Priority, Reconfig, RejectReason, RunOptions, Tenant, TenantShare,
};
use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;
use support::sequences::{
    Churn, all_end, cases, churn, close_empty, paused_runtime, set, set_churn, spawn_job,
};
use support::{Fake, Farm, fixed};

#[derive(Debug, Clone)]
enum Op {
    /// A job of tenant `t{n}` (or of none) at a priority (0 low, 1 normal,
    /// 2 high); it runs `run_ms`, and is dropped after `drop_ms` if set.
    Job {
        tenant: Option<u8>,
        priority: u8,
        run_ms: u16,
        drop_ms: Option<u16>,
    },
    /// The clock moves on.
    Step(u16),
    /// The tenants' table: `t{n}`'s weight, `max_queued`, `max_running`.
    Tenants(Vec<(u8, u32, Option<usize>, Option<usize>)>),
    Size(usize),
    MaxWaiting(usize),
    MaxQueueWait(Option<u16>),
    /// The `n`th worker made (modulo how many were) ends as if it crashed.
    Crash(usize),
    /// How the pool lets workers go.
    Churn(Churn),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (
            prop::option::weighted(0.8, 0u8..3),
            0u8..3,
            0u16..1500,
            prop::option::weighted(0.2, 0u16..3000),
        )
            .prop_map(|(tenant, priority, run_ms, drop_ms)| Op::Job {
                tenant,
                priority,
                run_ms,
                drop_ms
            }),
        4 => (0u16..2500).prop_map(Op::Step),
        2 => prop::collection::vec(
            (
                0u8..3,
                1u32..4,
                prop::option::of(1usize..4),
                prop::option::of(1usize..3)
            ),
            0..3
        )
        .prop_map(Op::Tenants),
        1 => (1usize..=4).prop_map(Op::Size),
        1 => (1usize..20).prop_map(Op::MaxWaiting),
        1 => prop::option::of(1u16..3000).prop_map(Op::MaxQueueWait),
        1 => (0usize..8).prop_map(Op::Crash),
        2 => churn(1).prop_map(Op::Churn),
    ]
}

fn tenant(n: u8) -> Tenant {
    Tenant::new(&format!("t{n}")).expect("a tenant name")
}

/// What the sequence so far allows a job to end with, besides its reply.
#[derive(Debug, Default)]
struct Allowed {
    /// A tenant's `max_queued` was set.
    tenant_limit: bool,
    /// `max_waiting` or `max_queue_wait` was set.
    rejected: bool,
    /// A worker crashed.
    crashed: bool,
}

/// Each tenant's running jobs now, and the most its tables so far let run
/// (`None` once one let it run without a bound).
#[derive(Debug, Default)]
struct Running {
    now: BTreeMap<u8, usize>,
    bound: BTreeMap<u8, Option<usize>>,
}

type Shared<T> = Arc<Mutex<T>>;

/// One running job of tenant `t{n}`, counted while it lives (a job dropped
/// midway too).
struct Counted(Shared<Running>, u8);

impl Counted {
    /// Counts a job that got its worker, and checks the tenant's bound.
    fn start(running: &Shared<Running>, n: u8) -> Self {
        let mut r = running.lock().unwrap();
        let now = r.now.entry(n).or_default();
        *now += 1;
        let (now, bound) = (*now, r.bound.get(&n).copied().flatten());
        assert!(
            bound.is_none_or(|b| now <= b),
            "t{n} runs {now} jobs, over its max_running of {bound:?}"
        );
        Self(running.clone(), n)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        *self.0.lock().unwrap().now.entry(self.1).or_default() -= 1;
    }
}

/// Runs one job as `Op::Job` says; what it must end with is checked here.
async fn one_job(
    pool: Pool<Fake>,
    who: Option<u8>,
    priority: Priority,
    run: Duration,
    running: Shared<Running>,
    allowed: Shared<Allowed>,
) -> Result<(), String> {
    let mut options = RunOptions::new().priority(priority);
    if let Some(n) = who {
        options = options.tenant(tenant(n));
    }
    let counted = running.clone();
    let got = pool
        .run_with(options, async move |w: &mut Fake| {
            let _running = who.map(|n| Counted::start(&counted, n));
            w.work(run).await;
        })
        .await;
    let allowed = allowed.lock().unwrap();
    match got {
        Ok(()) => Ok(()),
        Err(Error::TenantLimit { .. }) if allowed.tenant_limit => Ok(()),
        Err(Error::Rejected {
            reason: RejectReason::QueueFull | RejectReason::QueueWait,
        }) if allowed.rejected => Ok(()),
        Err(Error::Crashed { .. } | Error::WarmupFailed { .. }) if allowed.crashed => Ok(()),
        Err(e) => Err(format!("a job of {who:?} ended with {e:?} ({allowed:?})")),
    }
}

/// Plays `ops` on a pool of `workers`.
fn play(workers: usize, ops: &[Op]) -> Result<(), String> {
    let rt = paused_runtime();
    rt.block_on(async {
        let farm = Farm::new();
        let pool = fixed(&farm, Parallel, workers)
            .with_options(|o| {
                o.max_waiting = Some(64);
                o.break_after_failed_starts = None;
            })
            .build()
            .map_err(|e| e.to_string())?;
        let running: Shared<Running> = Arc::default();
        let allowed: Shared<Allowed> = Arc::default();
        let mut jobs = Vec::new();
        for op in ops {
            match op.clone() {
                Op::Job {
                    tenant: who,
                    priority,
                    run_ms,
                    drop_ms,
                } => {
                    let priority =
                        [Priority::Low, Priority::Normal, Priority::High][usize::from(priority)];
                    let job = one_job(
                        pool.clone(),
                        who,
                        priority,
                        Duration::from_millis(run_ms.into()),
                        running.clone(),
                        allowed.clone(),
                    );
                    jobs.push(spawn_job(job, drop_ms));
                }
                Op::Step(ms) => tokio::time::sleep(Duration::from_millis(ms.into())).await,
                Op::Tenants(table) => {
                    {
                        let mut r = running.lock().unwrap();
                        for n in 0..3u8 {
                            let limit = table
                                .iter()
                                .rev()
                                .find(|(t, ..)| *t == n)
                                .and_then(|(.., m)| *m);
                            let bound = r.bound.entry(n).or_insert(limit);
                            *bound = match (*bound, limit) {
                                (Some(a), Some(b)) => Some(a.max(b)),
                                _ => None,
                            };
                        }
                    }
                    if table.iter().any(|(_, _, q, _)| q.is_some()) {
                        allowed.lock().unwrap().tenant_limit = true;
                    }
                    let table: BTreeMap<Tenant, TenantShare> = table
                        .into_iter()
                        .map(|(n, weight, max_queued, max_running)| {
                            let mut share = TenantShare::weight(weight);
                            share.max_queued = max_queued;
                            share.max_running = max_running;
                            (tenant(n), share)
                        })
                        .collect();
                    set(&pool, move |o| o.tenants = table)?;
                }
                Op::Size(n) => {
                    pool.reconfigure(Reconfig::new().sizing(Fixed(n)))
                        .map_err(|e| e.to_string())?;
                }
                Op::MaxWaiting(n) => {
                    allowed.lock().unwrap().rejected = true;
                    set(&pool, move |o| o.max_waiting = Some(n))?;
                }
                Op::MaxQueueWait(ms) => {
                    allowed.lock().unwrap().rejected = true;
                    let wait = ms.map(|ms| Duration::from_millis(ms.into()));
                    set(&pool, move |o| o.max_queue_wait = wait)?;
                }
                Op::Churn(churn) => set_churn(&pool, &churn)?,
                Op::Crash(n) => {
                    let made = farm.made();
                    if made > 0 && !farm.has_exited(n % made) {
                        allowed.lock().unwrap().crashed = true;
                        farm.exit(n % made);
                    }
                }
            }
        }
        all_end(jobs).await?;
        close_empty(&pool, || farm.alive()).await?;
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(256), .. ProptestConfig::default() })]

    #[test]
    fn any_sequence_keeps_each_tenant_within_its_limits_and_ends_every_job(
        workers in 1usize..=4,
        ops in prop::collection::vec(op(), 1..120),
    ) {
        play(workers, &ops).map_err(TestCaseError::fail)?;
    }
}
