//! The soak test: the crash loops, then every scenario, and one verdict
//! on all they saw, with the panics counted and no process left.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::Startup;
use crate::common::live_descendants;
use crate::crash_loop::crash_loop;
use crate::scenario::{Scenario, run_scenario};

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
