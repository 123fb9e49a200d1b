//! The chaos soak: thousands of jobs through pools of real worker processes
//! that misbehave at random, under each startup, with an idle-timeout eviction
//! and, in half the scenarios, the learning sizing `HillClimbing`.
//!
//! Faults, drawn from seeded generators:
//!
//! - by the worker (its own seed, in its argv): exit during the warm-up, an
//!   error line instead of the ready line, a warm-up that hangs past the
//!   pool's `warmup_timeout`, noise before the ready line, exit while idle;
//! - by the job (the test's seed): a crash mid-job, a line that is not JSON,
//!   invalid UTF-8, a partial line then exit, a reply over the size limit,
//!   an error reply, a job that overruns the `job_timeout` or hangs, a job
//!   the client abandons half-way (the future is dropped), a grandchild
//!   process left in the worker's group.
//!
//! What must hold:
//!
//! 1. Every job resolves, within a bound, with its result or a typed error
//!    that fits the fault it was given (or a collateral one: the worker
//!    started for it failed its warm-up, the queue was full, or the worker
//!    it got had just exited while idle).
//! 2. At every sampled moment the stats add up (each slot is counted once,
//!    so `starting + idle + lent + kept ≤ capacity`, …), and no more worker
//!    processes are alive than the capacity (checked by pid and start time
//!    in `/proc`).
//! 3. Back-off: per slot, the `worker:backoff` events count early exits one
//!    by one with delays 1, 2, 4 … 60 s; and in a crash loop with no jobs,
//!    each start of a slot comes at least that long after the one before.
//! 4. After `close()` every stat is zero and no process is left: no worker
//!    (by pid), no member of its process group, no grandchild, no
//!    descendant of the test process.
//! 5. No panic anywhere (a panic hook counts them, also in spawned tasks).
//!
//! The CI mode runs a few thousand jobs in about a minute. `KENNEL_SOAK=long`
//! runs twenty times as many; `KENNEL_SOAK_SEED=N` picks another seed (the
//! seed in use is printed). Real processes need real time: every wait here is
//! bounded.

#![cfg(target_os = "linux")]

mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{FIXTURE, eventually, is_running_since, live_descendants, live_processes, start_time};
use kennel::{
    Error, Event, ExitStatus, Fixed, HillClimbing, IdleTimeout, LeaderFirst, OnDemand,
    OrderedReady, Parallel, Pool, PoolBuilder, RejectReason, SlotInfo, TestComputer,
};
use kennel_process::{Coprocess, CoprocessSpec, ProcessError};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

/// Counts every panic of the test process, also in tasks the runtime
/// catches.
static PANICS: AtomicUsize = AtomicUsize::new(0);

fn count_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        default(info);
    }));
}

const JOB_TIMEOUT: Duration = Duration::from_millis(1000);
const WARMUP_TIMEOUT: Duration = Duration::from_millis(500);
const MAX_LINE: usize = 4096;
/// A job that has not resolved after this long is lost.
const JOB_DEADLINE: Duration = Duration::from_secs(30);
/// `close()` must be done within this.
const CLOSE_DEADLINE: Duration = Duration::from_secs(30);

/// The back-off after `n` early exits in a row: 1, 2, 4 … 60 s.
fn backoff(n: u32) -> Duration {
    Duration::from_secs(1u64 << (n.clamp(1, 7) - 1)).min(Duration::from_secs(60))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Startup {
    OnDemand,
    Parallel,
    OrderedReady,
    LeaderFirst,
}

impl Startup {
    const ALL: [Self; 4] = [
        Self::OnDemand,
        Self::Parallel,
        Self::OrderedReady,
        Self::LeaderFirst,
    ];

    fn apply(self, b: PoolBuilder<Coprocess>) -> PoolBuilder<Coprocess> {
        match self {
            Self::OnDemand => b.startup(OnDemand),
            Self::Parallel => b.startup(Parallel),
            Self::OrderedReady => b.startup(OrderedReady),
            Self::LeaderFirst => b.startup(LeaderFirst),
        }
    }

    fn is_eager(self) -> bool {
        self != Self::OnDemand
    }
}

/// One process the factory started.
#[derive(Debug, Clone, Copy)]
struct Proc {
    pid: u32,
    started: u64,
    slot: usize,
    at: Instant,
}

/// Every worker process a pool's factory started.
#[derive(Debug, Clone, Default)]
struct Spawned(Arc<Mutex<Vec<Proc>>>);

impl Spawned {
    fn all(&self) -> Vec<Proc> {
        self.0.lock().unwrap().clone()
    }
}

/// A pool of fixture workers started with `flags`, each with a seed of its
/// own drawn from `seed`.
fn pool_of(name: &str, flags: &[String], seed: u64, spawned: &Spawned) -> PoolBuilder<Coprocess> {
    let flags: Vec<String> = flags.to_vec();
    let spawned = spawned.clone();
    let made = Arc::new(AtomicU64::new(0));
    Pool::builder(move |info: SlotInfo| {
        let n = made.fetch_add(1, Ordering::Relaxed);
        let worker_seed = seed.wrapping_mul(1_000_003).wrapping_add(n).to_string();
        let argv = std::iter::once(FIXTURE.to_owned())
            .chain(flags.iter().cloned())
            .chain(["--seed".to_owned(), worker_seed]);
        let spec = CoprocessSpec::new(argv)
            .max_line_bytes(MAX_LINE)
            .close_grace(Duration::from_millis(300))
            .label(&*info.pool, info.slot);
        let spawned = spawned.clone();
        async move {
            let worker = spec.spawn()?;
            let pid = worker.pid();
            // The child is ours and not reaped yet, so its /proc entry is there.
            let started = start_time(pid).unwrap_or(0);
            spawned.0.lock().unwrap().push(Proc {
                pid,
                started,
                slot: info.slot,
                at: Instant::now(),
            });
            Ok::<_, ProcessError>(worker)
        }
    })
    .name(name)
}

/// What a job is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    None,
    Slow,
    Error,
    Crash,
    Garbage,
    Binary,
    Partial,
    Oversized,
    Overrun,
    Hang,
    Abandon,
    Grandchild,
}

impl Fault {
    /// Weights in thousandths.
    const MIX: [(Self, u32); 12] = [
        (Self::None, 690),
        (Self::Slow, 40),
        (Self::Error, 60),
        (Self::Crash, 50),
        (Self::Garbage, 30),
        (Self::Binary, 20),
        (Self::Partial, 20),
        (Self::Oversized, 20),
        (Self::Overrun, 15),
        (Self::Hang, 5),
        (Self::Abandon, 30),
        (Self::Grandchild, 20),
    ];

    fn draw(rng: &mut StdRng) -> Self {
        let mut roll = rng.random_range(0..1000);
        for (fault, weight) in Self::MIX {
            if roll < weight {
                return fault;
            }
            roll -= weight;
        }
        Self::None
    }

    /// The request that provokes it; `n` makes each job's reply its own.
    fn request(self, n: u64, rng: &mut StdRng) -> Value {
        match self {
            Self::None | Self::Abandon => json!({"job": n}),
            Self::Slow => json!({"op": "sleep", "ms": rng.random_range(5..40)}),
            Self::Error => json!({"op": "error", "message": format!("chaos error {n}")}),
            Self::Crash => json!({"op": "crash", "code": 11}),
            Self::Garbage => json!({"op": "garbage"}),
            Self::Binary => {
                json!({"op": "raw", "bytes": [0xff, 0xfe, 0, b'x', b'\n'], "then": "serve"})
            }
            Self::Partial => {
                json!({"op": "raw", "bytes": b"{\"partial\":".to_vec(), "then": "exit", "code": 12})
            }
            Self::Oversized => json!({"op": "oversized", "bytes": MAX_LINE + 100}),
            Self::Overrun => json!({"op": "sleep", "ms": JOB_TIMEOUT.as_millis() as u64 + 400}),
            Self::Hang => json!({"op": "hang"}),
            Self::Grandchild => json!({"op": "grandchild"}),
        }
    }
}

type JobResult = Result<Result<Value, ProcessError>, Error>;

/// How a job ended, as the soak counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ending {
    /// The reply or the error its fault asks for.
    AsAsked,
    /// The worker started for it failed its warm-up.
    WarmupFailed,
    /// Turned away: the queue was full.
    Rejected,
    /// The worker it got had just exited while idle (code 9).
    IdleExit,
    /// The client gave up on it on purpose.
    Abandoned,
}

fn crash_status(r: &JobResult) -> Option<Option<ExitStatus>> {
    match r {
        Ok(Err(ProcessError::Crashed { status, .. })) => Some(status.clone()),
        Err(Error::Crashed { exit, .. }) => Some(exit.as_ref().map(|e| e.status.clone())),
        _ => None,
    }
}

/// Checks a job's result against its fault; `Err` says what is wrong.
fn judge(fault: Fault, request: &Value, r: &JobResult) -> Result<Ending, String> {
    // Collateral endings, possible whatever the fault.
    match r {
        Err(Error::WarmupFailed { .. }) => return Ok(Ending::WarmupFailed),
        Err(Error::Rejected {
            reason: RejectReason::QueueFull,
        }) => return Ok(Ending::Rejected),
        _ => {}
    }
    if crash_status(r) == Some(Some(ExitStatus::Code(9))) {
        return Ok(Ending::IdleExit);
    }
    let fits = match fault {
        Fault::None | Fault::Abandon => matches!(r, Ok(Ok(v)) if v == request),
        Fault::Slow => matches!(r, Ok(Ok(v)) if v["slept"] == request["ms"]),
        Fault::Grandchild => matches!(r, Ok(Ok(v)) if v["pid"].is_u64()),
        Fault::Error => {
            matches!(r, Ok(Err(ProcessError::Worker { message, .. })) if *message == request["message"])
        }
        Fault::Crash => matches!(crash_status(r), Some(None | Some(ExitStatus::Code(11)))),
        Fault::Partial => matches!(crash_status(r), Some(None | Some(ExitStatus::Code(12)))),
        Fault::Garbage | Fault::Binary | Fault::Oversized => {
            matches!(r, Ok(Err(ProcessError::Protocol { .. })))
                || matches!(crash_status(r), Some(None | Some(ExitStatus::Signal(9))))
        }
        Fault::Overrun | Fault::Hang => {
            matches!(r, Err(Error::Timeout { after }) if *after == JOB_TIMEOUT)
        }
    };
    if fits {
        Ok(Ending::AsAsked)
    } else {
        Err(format!("{fault:?} job {request} ended {r:?}"))
    }
}

#[derive(Debug, Clone)]
struct Scenario {
    name: String,
    startup: Startup,
    learning: bool,
    /// `IdleTimeout` after this many ms, keeping this many.
    eviction: (u64, usize),
    max_waiting: Option<usize>,
    clients: usize,
    jobs: usize,
    seed: u64,
}

/// What one scenario saw.
#[derive(Debug, Default)]
struct Report {
    jobs: usize,
    endings: BTreeMap<Ending, usize>,
    faults: BTreeMap<Fault, usize>,
    lost: usize,
    wrong: Vec<String>,
    workers: usize,
    max_alive: usize,
    stats_samples: usize,
    stats_violations: Vec<String>,
    events: BTreeMap<&'static str, usize>,
    backoff_violations: Vec<String>,
    lagged: bool,
    leaked: Vec<String>,
    took: Duration,
}

/// Checks one stats snapshot; `Err` says which rule it breaks.
fn check_stats(s: &kennel::Stats, max_waiting: usize) -> Result<(), String> {
    let ok = s.size >= 1
        && s.size <= s.capacity
        && s.starting + s.idle + s.lent + s.kept <= s.capacity
        && s.idle <= s.size
        && s.kept <= s.capacity - s.size
        && s.waiting <= max_waiting + s.capacity;
    if ok { Ok(()) } else { Err(format!("{s:?}")) }
}

/// The pool's worker processes that may still run, in the order they were
/// started; those seen ended are dropped (an ended process stays ended).
#[derive(Debug, Default)]
struct Alive {
    seen: usize,
    maybe: Vec<Proc>,
}

impl Alive {
    /// Counts the live worker processes, newest first, so that every process
    /// counted alive was alive at the same moment (an older process seen
    /// alive later was alive earlier too).
    fn count(&mut self, spawned: &Spawned) -> usize {
        let all = spawned.all();
        self.maybe.extend_from_slice(&all[self.seen..]);
        self.seen = all.len();
        let mut alive = vec![false; self.maybe.len()];
        for (i, p) in self.maybe.iter().enumerate().rev() {
            alive[i] = is_running_since(p.pid, p.started);
        }
        let mut i = 0;
        self.maybe.retain(|_| {
            i += 1;
            alive[i - 1]
        });
        self.maybe.len()
    }
}

async fn run_scenario(sc: Scenario) -> Report {
    let began = Instant::now();
    let spawned = Spawned::default();
    let flags: Vec<String> = [
        "--warmup-max-ms",
        "15",
        "--p-warmup-exit",
        "0.05",
        "--p-warmup-error",
        "0.03",
        "--p-warmup-hang",
        "0.02",
        "--p-noise",
        "0.1",
        "--p-idle-exit",
        "0.01",
    ]
    .map(String::from)
    .to_vec();
    let mut builder = pool_of(&sc.name, &flags, sc.seed, &spawned)
        .job_timeout(JOB_TIMEOUT)
        .warmup_timeout(WARMUP_TIMEOUT)
        .job_grace(Duration::from_secs(2))
        .event_capacity(1 << 16)
        .eviction(
            IdleTimeout::new(Duration::from_millis(sc.eviction.0))
                .unwrap()
                .keep(sc.eviction.1),
        );
    builder = sc.startup.apply(builder);
    builder = if sc.learning {
        builder.sizing(
            HillClimbing::new(1 << 30, TestComputer::new(4, 4 << 30))
                .seed(sc.seed)
                .window(5, Duration::from_millis(150)),
        )
    } else {
        builder.sizing(Fixed(3))
    };
    if let Some(n) = sc.max_waiting {
        builder = builder.max_waiting(n);
    }
    let pool = builder.build().expect("pool");
    let capacity = pool.stats().capacity;
    let max_waiting = sc.max_waiting.unwrap_or(capacity * 8);

    // Events: counts, and each slot's back-off sequence.
    let mut events = pool.events();
    let event_task = tokio::spawn(async move {
        let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
        let mut backoffs: BTreeMap<usize, Vec<(u32, Duration)>> = BTreeMap::new();
        let mut lagged = false;
        loop {
            match events.recv().await {
                Ok(e) => {
                    *counts.entry(e.name()).or_default() += 1;
                    if let Event::Backoff {
                        slot,
                        delay,
                        early_exits,
                    } = e
                    {
                        backoffs.entry(slot).or_default().push((early_exits, delay));
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => lagged = true,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            }
        }
        (counts, backoffs, lagged)
    });

    // Samplers: stats every 2 ms, live processes every 20 ms.
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (pool, stop, spawned) = (pool.clone(), stop.clone(), spawned.clone());
        tokio::spawn(async move {
            let (mut samples, mut bad, mut max_alive) = (0usize, Vec::new(), 0usize);
            let mut procs = Alive::default();
            let mut tick = 0u64;
            while !stop.load(Ordering::Relaxed) {
                samples += 1;
                if let Err(e) = check_stats(&pool.stats(), max_waiting) {
                    bad.push(e);
                }
                if tick % 10 == 0 {
                    let alive = procs.count(&spawned);
                    max_alive = max_alive.max(alive);
                    if alive > capacity {
                        bad.push(format!(
                            "{alive} worker processes alive, capacity {capacity}"
                        ));
                    }
                }
                tick += 1;
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            (samples, bad, max_alive)
        })
    };

    // Clients: each runs jobs one after another until the total is reached.
    let next_job = Arc::new(AtomicUsize::new(0));
    // Every few hundred jobs all clients pause together, so that workers go
    // idle and the eviction lets some go.
    let lull_until = Arc::new(Mutex::new(Instant::now()));
    let grandchildren = Arc::new(Mutex::new(Vec::<(u32, u64)>::new()));
    let mut clients = Vec::new();
    for c in 0..sc.clients {
        let (pool, next_job, grandchildren, lull_until) = (
            pool.clone(),
            next_job.clone(),
            grandchildren.clone(),
            lull_until.clone(),
        );
        let (total, seed) = (sc.jobs, sc.seed ^ (0xC11E_0000 + c as u64));
        clients.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut seen = Vec::new();
            loop {
                let n = next_job.fetch_add(1, Ordering::Relaxed);
                if n >= total {
                    return seen;
                }
                if n % 250 == 249 {
                    *lull_until.lock().unwrap() = Instant::now() + Duration::from_millis(500);
                }
                let until = *lull_until.lock().unwrap();
                if until > Instant::now() {
                    tokio::time::sleep_until(until.into()).await;
                }
                let fault = Fault::draw(&mut rng);
                let request = fault.request(n as u64, &mut rng);
                let job = {
                    let request = request.clone();
                    pool.run(async move |w: &mut Coprocess| {
                        if fault == Fault::Abandon {
                            // Hold the worker while the client gives up.
                            let _ = w.request(&json!({"op": "sleep", "ms": 200})).await;
                        }
                        w.request(&request).await
                    })
                };
                let outcome = if fault == Fault::Abandon {
                    let after = Duration::from_millis(rng.random_range(1..60));
                    match tokio::time::timeout(after, job).await {
                        Err(_) => Some(Ok(Ending::Abandoned)),
                        Ok(r) => Some(judge(fault, &request, &r)),
                    }
                } else {
                    match tokio::time::timeout(JOB_DEADLINE, job).await {
                        Err(_) => None,
                        Ok(r) => {
                            if let (Fault::Grandchild, Ok(Ok(v))) = (fault, &r) {
                                if let Some(pid) = v["pid"].as_u64() {
                                    let pid = pid as u32;
                                    if let Some(started) = start_time(pid) {
                                        grandchildren.lock().unwrap().push((pid, started));
                                    }
                                }
                            }
                            Some(judge(fault, &request, &r))
                        }
                    }
                };
                if outcome == Some(Ok(Ending::Rejected)) {
                    // As a client that honours Retry-After, a little sooner.
                    tokio::time::sleep(Duration::from_millis(rng.random_range(5..30))).await;
                }
                seen.push((fault, outcome));
            }
        }));
    }

    let mut report = Report {
        jobs: sc.jobs,
        ..Report::default()
    };
    for client in clients {
        for (fault, outcome) in client.await.expect("a client task ended") {
            *report.faults.entry(fault).or_default() += 1;
            match outcome {
                None => report.lost += 1,
                Some(Ok(ending)) => *report.endings.entry(ending).or_default() += 1,
                Some(Err(wrong)) => report.wrong.push(wrong),
            }
        }
    }

    // Close, bounded; then every count is zero.
    tokio::time::timeout(CLOSE_DEADLINE, pool.close())
        .await
        .unwrap_or_else(|_| panic!("{}: close did not finish", sc.name));
    let after = pool.stats();
    if after.starting + after.idle + after.lent + after.waiting + after.kept != 0 {
        report
            .stats_violations
            .push(format!("after close: {after:?}"));
    }
    stop.store(true, Ordering::Relaxed);
    let (samples, bad, max_alive) = sampler.await.expect("sampler");
    report.stats_samples = samples;
    report.stats_violations.extend(bad);
    report.max_alive = max_alive;
    drop(pool);

    let (counts, backoffs, lagged) = event_task.await.expect("event task");
    report.events = counts;
    report.lagged = lagged;
    if !sc.startup.is_eager() && !backoffs.is_empty() {
        report
            .backoff_violations
            .push(format!("an on-demand pool backed off: {backoffs:?}"));
    }
    if !lagged {
        for (slot, seq) in &backoffs {
            for (i, &(n, delay)) in seq.iter().enumerate() {
                // Under ten minutes nothing resets the count: 1, 2, 3 …
                if n as usize != i + 1 || delay != backoff(n) {
                    report.backoff_violations.push(format!(
                        "slot {slot}: back-off #{} was {n} early exits, {delay:?}: {seq:?}",
                        i + 1
                    ));
                }
            }
        }
    }

    // No process is left: workers, their groups, grandchildren.
    let procs = spawned.all();
    report.workers = procs.len();
    let left = |procs: &[Proc], grandchildren: &[(u32, u64)]| {
        let mut left = leftovers(procs);
        for &(g, started) in grandchildren {
            if is_running_since(g, started) {
                left.push(format!("grandchild {g}"));
            }
        }
        left
    };
    let grandchildren = grandchildren.lock().unwrap().clone();
    // Processes end a moment after the pool saw them end; give them 10 s.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now_left = left(&procs, &grandchildren);
        if now_left.is_empty() || Instant::now() > deadline {
            report.leaked = now_left;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    report.took = began.elapsed();
    report
}

/// What is left running of `procs`: a worker itself (same pid and start
/// time), or a member of its process group. Pids are reused (the kernel
/// hands out at most 32768 here), so a group whose leader is now another
/// process counts only members older than that leader.
fn leftovers(procs: &[Proc]) -> Vec<String> {
    let mut ours: std::collections::HashMap<u32, Vec<u64>> = std::collections::HashMap::new();
    for p in procs {
        ours.entry(p.pid).or_default().push(p.started);
    }
    let mut left = Vec::new();
    for (pid, pgrp) in live_processes() {
        let Some(starts) = ours.get(&pgrp) else {
            continue;
        };
        let Some(started) = start_time(pid) else {
            continue; // ended meanwhile
        };
        let leak = if pid == pgrp {
            starts.contains(&started)
        } else {
            match start_time(pgrp) {
                None => true,
                Some(leader) => starts.contains(&leader) || started < leader,
            }
        };
        if leak {
            left.push(format!("process {pid} of worker group {pgrp}"));
        }
    }
    left
}

/// A pool whose every worker fails (its warm-up, or right after it) with no
/// job to ask for one: each slot's starts must be spaced by the back-off.
async fn crash_loop(startup: Startup, flags: &[&str], run_for: Duration) -> (Vec<String>, usize) {
    let spawned = Spawned::default();
    let flags: Vec<String> = flags.iter().map(|s| (*s).to_owned()).collect();
    let pool = startup
        .apply(pool_of("crash-loop", &flags, 1, &spawned))
        .sizing(Fixed(2))
        .build()
        .expect("pool");
    tokio::time::sleep(run_for).await;
    tokio::time::timeout(CLOSE_DEADLINE, pool.close())
        .await
        .expect("close");
    let mut wrong = Vec::new();
    let procs = spawned.all();
    let mut by_slot: BTreeMap<usize, Vec<Instant>> = BTreeMap::new();
    for p in &procs {
        by_slot.entry(p.slot).or_default().push(p.at);
    }
    for (slot, starts) in &by_slot {
        for (k, pair) in starts.windows(2).enumerate() {
            let gap = pair[1] - pair[0];
            let rule = backoff(k as u32 + 1);
            if gap < rule {
                wrong.push(format!(
                    "{startup:?} {flags:?}: slot {slot} restarted after {gap:?}, under the {rule:?} back-off"
                ));
            }
        }
        // 1 + 2 + 4 s fit in 7.5 s, 8 more do not: at most four starts.
        if starts.len() > 4 {
            wrong.push(format!(
                "{startup:?}: slot {slot} started {} times",
                starts.len()
            ));
        }
    }
    if by_slot.get(&0).is_none_or(|s| s.len() < 3) {
        wrong.push(format!(
            "{startup:?} {flags:?}: slot 0 was not restarted: {by_slot:?}"
        ));
    }
    eventually("the crash-loop workers and their groups end", || {
        leftovers(&procs).is_empty()
    })
    .await;
    (wrong, procs.len())
}

fn soak_mode() -> (usize, u64) {
    let long = std::env::var("KENNEL_SOAK").is_ok_and(|v| v == "long");
    let seed = std::env::var("KENNEL_SOAK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    (if long { 20_000 } else { 1000 }, seed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_soak_loses_no_job_and_leaves_no_process() {
    count_panics();
    let (jobs, seed) = soak_mode();
    eprintln!(
        "chaos soak: {jobs} jobs per scenario, seed {seed} (KENNEL_SOAK=long, KENNEL_SOAK_SEED=N)"
    );

    // Crash loops first, all at once: three eager startups, workers that
    // fail their warm-up or exit right after it.
    let loops: Vec<_> = Startup::ALL
        .into_iter()
        .filter(|s| s.is_eager())
        .flat_map(|s| {
            [
                (s, &["--p-warmup-exit", "1"][..]),
                (s, &["--exit-after-ms", "30"][..]),
            ]
        })
        .map(|(s, flags)| tokio::spawn(crash_loop(s, flags, Duration::from_millis(7500))))
        .collect();
    let (mut loop_wrong, mut loop_starts, n_loops) = (Vec::new(), 0, loops.len());
    for l in loops {
        let (wrong, starts) = l.await.expect("crash loop");
        loop_wrong.extend(wrong);
        loop_starts += starts;
    }
    eprintln!(
        "crash loops: {n_loops} pools, {loop_starts} worker starts, each slot's restarts checked against the back-off"
    );

    let mut scenarios = Vec::new();
    for (i, startup) in Startup::ALL.into_iter().enumerate() {
        for learning in [false, true] {
            let k = (i * 2 + usize::from(learning)) as u64;
            let overloaded = (i % 2 == 1) != learning;
            scenarios.push(Scenario {
                name: format!(
                    "{startup:?}-{}",
                    if learning { "hill-climbing" } else { "fixed" }
                )
                .to_lowercase(),
                startup,
                learning,
                eviction: (150 + 50 * (k % 3), i % 2),
                // Half the scenarios are overloaded past a short queue.
                max_waiting: overloaded.then_some(3),
                clients: if overloaded { 10 } else { 6 },
                jobs,
                seed: seed.wrapping_mul(31).wrapping_add(k),
            });
        }
    }

    let mut table = String::new();
    let mut failures = Vec::new();
    let mut total_jobs = 0;
    for sc in scenarios {
        let name = sc.name.clone();
        let r = run_scenario(sc).await;
        total_jobs += r.jobs;
        let ended: usize = r.endings.values().sum();
        let _ = writeln!(
            table,
            "{name:<26} {:>6} jobs in {:>5.1}s: {:?}; faults {:?}; workers {} (max {} alive); {} stats samples; events {:?}",
            r.jobs,
            r.took.as_secs_f64(),
            r.endings,
            r.faults,
            r.workers,
            r.max_alive,
            r.stats_samples,
            r.events
        );
        if r.lost > 0 {
            failures.push(format!("{name}: {} jobs lost", r.lost));
        }
        if ended + r.wrong.len() + r.lost != r.jobs {
            failures.push(format!("{name}: {ended} jobs ended of {}", r.jobs));
        }
        for w in r.wrong.iter().take(10) {
            failures.push(format!("{name}: {w}"));
        }
        for v in r.stats_violations.iter().take(10) {
            failures.push(format!("{name}: stats {v}"));
        }
        for v in &r.backoff_violations {
            failures.push(format!("{name}: {v}"));
        }
        if r.lagged {
            failures.push(format!("{name}: the event subscriber lagged"));
        }
        for l in &r.leaked {
            failures.push(format!("{name}: left running: {l}"));
        }
    }
    eprintln!("{table}");
    failures.extend(loop_wrong);

    // Nothing of ours is left at all.
    let me = std::process::id();
    let mut stragglers = live_descendants(me);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !stragglers.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        stragglers = live_descendants(me);
    }
    if !stragglers.is_empty() {
        failures.push(format!("descendants of the test left: {stragglers:?}"));
    }
    let panics = PANICS.load(Ordering::SeqCst);
    if panics > 0 {
        failures.push(format!("{panics} panics"));
    }
    eprintln!("chaos soak: {total_jobs} jobs, {} problems", failures.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
