//! One soak scenario: a pool under one startup and sizing, clients that
//! run faulty jobs through it, samplers of its stats and live processes,
//! its close, and the report of what it saw.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kennel::{Event, Fixed, HillClimbing, IdleTimeout, TestComputer};
use kennel_process::Coprocess;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::common::{is_running_since, start_time};
use crate::faults::{Ending, Fault, judge};
use crate::processes::{Alive, Proc, Spawned, leftovers, pool_of};
use crate::{CLOSE_DEADLINE, JOB_DEADLINE, JOB_TIMEOUT, Startup, WARMUP_TIMEOUT, backoff};

#[derive(Debug, Clone)]
pub(crate) struct Scenario {
    pub(crate) name: String,
    pub(crate) startup: Startup,
    pub(crate) learning: bool,
    /// `IdleTimeout` after this many ms, keeping this many.
    pub(crate) eviction: (u64, usize),
    pub(crate) max_waiting: Option<usize>,
    pub(crate) clients: usize,
    pub(crate) jobs: usize,
    pub(crate) seed: u64,
}

/// What one scenario saw.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub(crate) jobs: usize,
    pub(crate) endings: BTreeMap<Ending, usize>,
    pub(crate) faults: BTreeMap<Fault, usize>,
    pub(crate) lost: usize,
    pub(crate) wrong: Vec<String>,
    pub(crate) workers: usize,
    pub(crate) max_alive: usize,
    pub(crate) stats_samples: usize,
    pub(crate) stats_violations: Vec<String>,
    pub(crate) events: BTreeMap<&'static str, usize>,
    pub(crate) backoff_violations: Vec<String>,
    pub(crate) lagged: bool,
    pub(crate) leaked: Vec<String>,
    pub(crate) took: Duration,
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

pub(crate) async fn run_scenario(sc: Scenario) -> Report {
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
        .with_options(|o| {
            o.job_timeout = Some(JOB_TIMEOUT);
            o.warmup_timeout = Some(WARMUP_TIMEOUT);
            o.job_grace = Duration::from_secs(2);
        })
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
        builder = builder.with_options(|o| o.max_waiting = Some(n));
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
