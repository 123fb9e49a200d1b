//! Wait for a worker while workers are recycled (`bench/recycle.sh`): a
//! pool of 4 real `Coprocess` workers (Python, 2 s to warm up) under a
//! steady open-loop load at about 75% of its capacity (jobs of 20–50 ms),
//! run three ways in one process, one after the other, with the same
//! arrivals and job times:
//!
//! - no recycling,
//! - `max_jobs` with `max_surge = 0`: retire, then start (what gunicorn's
//!   `max_requests` and php-fpm's `pm.max_requests` do),
//! - `max_jobs` with `max_surge = 1`: the replacement warms first.
//!
//! For each: p50, p99 and the longest wait for a worker (from the lend to
//! the grant), and the retirements and surges seen.
//!
//! ```text
//! cargo run --release -p kennel-bench --example recycle [SECONDS]
//! ```
//!
//! With `RECYCLE_LOG=1` set, each run also prints to stderr its timeline:
//! the pool's events and every wait over 60 ms, by the second of the run,
//! which shows for each recycle whether the replacement was ready before
//! the old worker left.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kennel::{Event, Fixed, Parallel, Pool};
use kennel_process::{Coprocess, CoprocessSpec};
use serde_json::json;
use tokio::sync::Mutex;

/// The worker: 2 s of warm-up, then each job sleeps the milliseconds it
/// is asked.
const WORKER: &str = r#"
import json, sys, time
time.sleep(2.0)
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    req = json.loads(line)
    time.sleep(req.get("ms", 0) / 1000.0)
    print(json.dumps({"ok": True}), flush=True)
"#;

const WORKERS: usize = 4;
/// Jobs per second: 75% of 4 workers at a mean job of 35 ms (+ ~1 ms of
/// round trip).
const RATE: f64 = 0.75 * WORKERS as f64 / 0.036;
const MAX_JOBS: u64 = 400;
const MAX_JOBS_JITTER: u64 = 100;

/// A small deterministic generator, so that every run gets the same
/// arrivals and job times.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[derive(Debug, Clone, Copy)]
enum Mode {
    NoRecycling,
    Surge(usize),
}

impl Mode {
    fn label(self) -> String {
        match self {
            Self::NoRecycling => "no recycling".to_owned(),
            Self::Surge(0) => format!("max_jobs ≈ {MAX_JOBS}, max_surge = 0 (retire, then start)"),
            Self::Surge(n) => format!("max_jobs ≈ {MAX_JOBS}, max_surge = {n}"),
        }
    }
}

struct Outcome {
    jobs: usize,
    p50: Duration,
    p99: Duration,
    max: Duration,
    recycles: usize,
    surges: usize,
    skipped: usize,
}

fn pool(mode: Mode) -> Pool<Coprocess> {
    let spec = CoprocessSpec::new(["python3", "-c", WORKER]).close_grace(Duration::from_secs(2));
    // A queue long enough that no job is turned away: every wait counts.
    let b = spec
        .pool()
        .startup(Parallel)
        .sizing(Fixed(WORKERS))
        .with_options(|o| o.max_waiting = Some(100_000));
    let b = match mode {
        Mode::NoRecycling => b,
        Mode::Surge(n) => b
            .with_options(|o| {
                o.max_jobs = Some(MAX_JOBS);
                o.max_jobs_jitter = MAX_JOBS_JITTER;
            })
            .seed(7)
            .with_options(|o| o.max_surge = n),
    };
    b.build().expect("a valid pool")
}

async fn run(mode: Mode, seconds: u64) -> Outcome {
    let pool = pool(mode);
    let mut events = pool.events();
    // All warm before the clock starts.
    while pool.stats().idle < WORKERS {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let counted = Arc::new(Mutex::new((0usize, 0usize, 0usize)));
    let t0 = Instant::now();
    let timeline = Arc::new(Mutex::new(Vec::<(Duration, String)>::new()));
    let watcher = {
        let counted = counted.clone();
        let timeline = timeline.clone();
        tokio::spawn(async move {
            while let Ok(e) = events.recv().await {
                timeline.lock().await.push((t0.elapsed(), format!("{e:?}")));
                let mut c = counted.lock().await;
                match e {
                    Event::Retired { .. } => c.0 += 1,
                    Event::Surging { .. } => c.1 += 1,
                    Event::SurgeSkipped { .. } => c.2 += 1,
                    _ => {}
                }
            }
        })
    };
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let start = Instant::now();
    let end = start + Duration::from_secs(seconds);
    let mut at = start;
    let mut jobs = Vec::new();
    while at < end {
        // Poisson arrivals at RATE.
        let gap = -(1.0 - rng.next()).ln() / RATE;
        at += Duration::from_secs_f64(gap);
        let ms = 20 + (rng.next() * 30.0) as u64;
        tokio::time::sleep_until(at.into()).await;
        let pool = pool.clone();
        jobs.push(tokio::spawn(async move {
            let asked = Instant::now();
            let mut lease = pool.lend().await.expect("a worker");
            let waited = asked.elapsed();
            lease
                .request(&json!({ "ms": ms }))
                .await
                .expect("an answer");
            (asked.duration_since(t0), waited)
        }));
    }
    let mut waits = Vec::with_capacity(jobs.len());
    let mut asked = Vec::with_capacity(jobs.len());
    for j in jobs {
        let (at, waited) = j.await.expect("the job ran");
        asked.push((at, waited));
        waits.push(waited);
    }
    pool.close().await;
    watcher.abort();
    if std::env::var_os("RECYCLE_LOG").is_some() {
        let mut lines: Vec<(Duration, String)> = timeline.lock().await.clone();
        for (at, w) in &asked {
            if *w > Duration::from_millis(60) {
                lines.push((*at, format!("wait {} ms", ms(*w))));
            }
        }
        lines.sort_by_key(|l| l.0);
        for (at, l) in lines {
            eprintln!("{:>9.3} {l}", at.as_secs_f64());
        }
    }
    waits.sort_unstable();
    let q = |p: f64| waits[((waits.len() as f64 * p) as usize).min(waits.len() - 1)];
    let (recycles, surges, skipped) = *counted.lock().await;
    Outcome {
        jobs: waits.len(),
        p50: q(0.50),
        p99: q(0.99),
        max: *waits.last().unwrap_or(&Duration::ZERO),
        recycles,
        surges,
        skipped,
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let seconds = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    println!(
        "{WORKERS} Python workers (2 s warm-up), {RATE:.0} jobs/s (~75% of capacity), jobs of 20-50 ms, {seconds} s per run"
    );
    println!("load average before: {}", loadavg());
    let modes = [Mode::NoRecycling, Mode::Surge(0), Mode::Surge(1)];
    let mut rows = Vec::new();
    for mode in modes {
        let o = run(mode, seconds).await;
        println!(
            "{}: {} jobs, p50 {} ms, p99 {} ms, max {} ms, {} retired, {} surges, {} surges skipped",
            mode.label(),
            o.jobs,
            ms(o.p50),
            ms(o.p99),
            ms(o.max),
            o.recycles,
            o.surges,
            o.skipped
        );
        rows.push((mode, o));
    }
    println!("load average after: {}", loadavg());
    println!();
    println!("| run | jobs | wait p50 (ms) | wait p99 (ms) | wait max (ms) | retired | surges |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (mode, o) in &rows {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            mode.label(),
            o.jobs,
            ms(o.p50),
            ms(o.p99),
            ms(o.max),
            o.recycles,
            o.surges
        );
    }
    let base = rows[0].1.p99.as_secs_f64();
    let surge = rows[2].1.p99.as_secs_f64();
    let plain = rows[1].1.p99.as_secs_f64();
    println!();
    println!(
        "p99 with surge / p99 without recycling: {:.2} (target: at most 1.2); retire-then-start / without recycling: {:.2}",
        surge / base.max(1e-9),
        plain / base.max(1e-9)
    );
}
