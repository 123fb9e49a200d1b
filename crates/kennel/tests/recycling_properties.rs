//! Recycling under random sequences (proptest), on the paused clock: jobs
//! (some dropped midway), leases held, given back or failed, workers that
//! crash, grow in memory or answer their probes wrong or never, clock
//! steps, and `max_surge`, `max_lifetime`, `max_jobs`, `max_memory`, the
//! probes, `replace_on_resize`, `retry_on_crash`, `job_timeout`, the
//! dispatch, the eviction, `min_idle` and the size changed on the live
//! pool; workers warm up in 500 ms. Whatever the sequence, the live workers
//! never outnumber the largest capacity plus the largest `max_surge` set so
//! far; every job and lend not dropped ends, with its reply or an error the
//! sequence explains (none is left waiting for ever); and after close no
//! worker is alive.
//!
//! `PROPTEST_CASES=N` runs N sequences (default 256).

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kennel::{Dispatch, Error, Fixed, Parallel, Pool, Reconfig};
use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;
use support::sequences::{
    all_end, cases, close_empty, evict, eviction, paused_runtime, set, spawn_job,
};
use support::{Fake, Farm, Health, fixed, settle};

const MIB: u64 = 1 << 20;

#[derive(Debug, Clone)]
enum Op {
    /// A job of `run_ms`, dropped after `drop_ms` if set.
    Job {
        run_ms: u16,
        drop_ms: Option<u16>,
    },
    /// A lease (within `wait_ms` if set) held `hold_ms`, then given back or
    /// failed.
    Lease {
        wait_ms: Option<u16>,
        hold_ms: u16,
        fail: bool,
    },
    /// Idle workers are lent round-robin (else the lowest slot first).
    RoundRobin(bool),
    /// The clock moves on.
    Step(u16),
    /// The `n`th worker made (modulo how many were) ends as if it crashed.
    Crash(usize),
    /// The `n`th worker's meter reads so many MiB.
    Memory(usize, u64),
    /// The `n`th worker's probes: pass, fail, pass slowly, or hang.
    Health(usize, u8),
    Surge(usize),
    Lifetime(Option<u16>),
    MaxJobs(Option<u64>),
    MaxMemory(Option<u64>),
    /// `probe_every` in ms (or none), and `probe_on_lend`.
    Probes(Option<u16>, bool),
    ReplaceOnResize(bool),
    RetryOnCrash(u32),
    JobTimeout(Option<u16>),
    Size(usize),
    /// Idle workers evicted after so many ms (and `min_idle` kept), or
    /// never.
    Eviction(Option<(u16, Option<usize>)>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u16..1500, prop::option::weighted(0.2, 0u16..3000))
            .prop_map(|(run_ms, drop_ms)| Op::Job { run_ms, drop_ms }),
        3 => (prop::option::weighted(0.3, 0u16..2000), 0u16..1500, any::<bool>())
            .prop_map(|(wait_ms, hold_ms, fail)| Op::Lease { wait_ms, hold_ms, fail }),
        1 => any::<bool>().prop_map(Op::RoundRobin),
        5 => (0u16..3000).prop_map(Op::Step),
        1 => (0usize..12).prop_map(Op::Crash),
        1 => (0usize..12, 0u64..200).prop_map(|(n, m)| Op::Memory(n, m)),
        1 => (0usize..12, 0u8..4).prop_map(|(n, h)| Op::Health(n, h)),
        1 => (0usize..=2).prop_map(Op::Surge),
        1 => prop::option::of(1u16..30).prop_map(Op::Lifetime),
        1 => prop::option::of(1u64..20).prop_map(Op::MaxJobs),
        1 => prop::option::of(50u64..150).prop_map(Op::MaxMemory),
        1 => (prop::option::of(1000u16..5000), any::<bool>())
            .prop_map(|(every, on_lend)| Op::Probes(every, on_lend)),
        1 => any::<bool>().prop_map(Op::ReplaceOnResize),
        1 => (0u32..=2).prop_map(Op::RetryOnCrash),
        1 => prop::option::of(100u16..3000).prop_map(Op::JobTimeout),
        1 => (1usize..=4).prop_map(Op::Size),
        1 => eviction().prop_map(Op::Eviction),
    ]
}

/// What the sequence so far allows a job to end with, besides its reply.
#[derive(Debug, Default)]
struct Allowed {
    crashed: bool,
    timeout: bool,
}

/// Lends a worker (within `wait` if set), holds it `hold`, then gives it
/// back or fails it; what the lend must end with is checked here.
async fn one_lease(
    pool: Pool<Fake>,
    wait: Option<Duration>,
    hold: Duration,
    fail: bool,
    allowed: Arc<Mutex<Allowed>>,
) -> Result<(), String> {
    let got = match wait {
        Some(wait) => pool.lend_timeout(wait).await,
        None => pool.lend().await,
    };
    let lease = match got {
        Ok(lease) => lease,
        Err(Error::LendTimeout { .. }) if wait.is_some() => return Ok(()),
        Err(Error::WarmupFailed { .. }) if allowed.lock().unwrap().crashed => return Ok(()),
        Err(e) => return Err(format!("a lend ended with {e:?}")),
    };
    tokio::time::sleep(hold).await;
    if fail {
        lease.fail();
    }
    Ok(())
}

/// Runs one job of `run`; what it must end with is checked here.
async fn one_job(
    pool: Pool<Fake>,
    run: Duration,
    allowed: Arc<Mutex<Allowed>>,
) -> Result<(), String> {
    let got = pool.run(async move |w: &mut Fake| w.work(run).await).await;
    let allowed = allowed.lock().unwrap();
    match got {
        Ok(_) => Ok(()),
        Err(Error::Crashed { .. } | Error::WarmupFailed { .. }) if allowed.crashed => Ok(()),
        Err(Error::Timeout { .. }) if allowed.timeout => Ok(()),
        Err(e) => Err(format!("a job ended with {e:?} ({allowed:?})")),
    }
}

/// Plays `ops` on a pool of `workers`.
fn play(workers: usize, ops: &[Op]) -> Result<(), String> {
    let rt = paused_runtime();
    rt.block_on(async {
        let farm = Farm::with_warmup(Duration::from_millis(500));
        let pool = fixed(&farm, Parallel, workers)
            .with_options(|o| {
                o.max_waiting = Some(64);
                o.break_after_failed_starts = None;
                o.memory_check_every = Duration::from_secs(1);
                o.probe_timeout = Duration::from_secs(1);
            })
            .build()
            .map_err(|e| e.to_string())?;
        let allowed: Arc<Mutex<Allowed>> = Arc::default();
        // The most workers the options so far let live at once.
        let (mut capacity, mut surge) = (workers, 0);
        let mut jobs = Vec::new();
        for op in ops {
            let made = farm.made();
            let nth = |n: usize| (made > 0).then(|| n % made);
            match op.clone() {
                Op::Job { run_ms, drop_ms } => {
                    let job = one_job(
                        pool.clone(),
                        Duration::from_millis(run_ms.into()),
                        allowed.clone(),
                    );
                    jobs.push(spawn_job(job, drop_ms));
                }
                Op::Lease {
                    wait_ms,
                    hold_ms,
                    fail,
                } => {
                    jobs.push(tokio::spawn(one_lease(
                        pool.clone(),
                        wait_ms.map(|ms| Duration::from_millis(ms.into())),
                        Duration::from_millis(hold_ms.into()),
                        fail,
                        allowed.clone(),
                    )));
                }
                Op::RoundRobin(on) => {
                    let dispatch = if on {
                        Dispatch::RoundRobin
                    } else {
                        Dispatch::LowestSlot
                    };
                    set(&pool, move |o| o.dispatch = dispatch)?;
                }
                Op::Step(ms) => tokio::time::sleep(Duration::from_millis(ms.into())).await,
                Op::Crash(n) => {
                    if let Some(id) = nth(n)
                        && !farm.has_exited(id)
                    {
                        allowed.lock().unwrap().crashed = true;
                        farm.exit(id);
                    }
                }
                Op::Memory(n, mib) => {
                    if let Some(id) = nth(n) {
                        farm.set_memory(id, mib * MIB);
                    }
                }
                Op::Health(n, h) => {
                    if let Some(id) = nth(n) {
                        let health = match h {
                            0 => Health::Good,
                            1 => Health::Bad,
                            2 => Health::Slow(Duration::from_millis(300)),
                            _ => Health::Hangs,
                        };
                        farm.set_health(id, health);
                    }
                }
                Op::Surge(n) => {
                    surge = surge.max(n);
                    set(&pool, move |o| o.max_surge = n)?;
                }
                Op::Lifetime(secs) => {
                    let life = secs.map(|s| Duration::from_secs(s.into()));
                    set(&pool, move |o| o.max_lifetime = life)?;
                }
                Op::MaxJobs(n) => set(&pool, move |o| o.max_jobs = n)?,
                Op::MaxMemory(mib) => {
                    let bytes = mib.map(|m| m * MIB);
                    set(&pool, move |o| o.max_memory = bytes)?;
                }
                Op::Probes(every, on_lend) => {
                    let every = every.map(|ms| Duration::from_millis(ms.into()));
                    set(&pool, move |o| {
                        o.probe_every = every;
                        o.probe_on_lend = on_lend;
                    })?;
                }
                Op::ReplaceOnResize(on) => set(&pool, move |o| o.replace_on_resize = on)?,
                Op::RetryOnCrash(n) => set(&pool, move |o| o.retry_on_crash = n)?,
                Op::JobTimeout(ms) => {
                    let timeout = ms.map(|ms| Duration::from_millis(ms.into()));
                    if timeout.is_some() {
                        allowed.lock().unwrap().timeout = true;
                    }
                    set(&pool, move |o| o.job_timeout = timeout)?;
                }
                Op::Eviction(idle) => evict(&pool, idle)?,
                Op::Size(n) => {
                    capacity = capacity.max(n);
                    pool.reconfigure(Reconfig::new().sizing(Fixed(n)))
                        .map_err(|e| e.to_string())?;
                }
            }
            settle().await;
            if farm.alive() > capacity + surge {
                return Err(format!(
                    "{} workers alive, over a capacity of {capacity} and a surge of {surge} ({:?})",
                    farm.alive(),
                    pool.stats()
                ));
            }
        }
        all_end(jobs).await?;
        // A probe holds its worker while it runs: none from now on.
        set(&pool, |o| o.probe_every = None)?;
        tokio::time::sleep(Duration::from_secs(10)).await;
        close_empty(&pool, || farm.alive()).await?;
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(256), .. ProptestConfig::default() })]

    #[test]
    fn any_sequence_keeps_the_workers_within_capacity_and_surge_and_ends_every_job(
        workers in 1usize..=4,
        ops in prop::collection::vec(op(), 1..120),
    ) {
        play(workers, &ops).map_err(TestCaseError::fail)?;
    }
}
