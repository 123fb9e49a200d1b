//! The built-in demo worker: `kennel worker demo`, the workers of the
//! `demo` pool `kennel serve` runs with no config. It speaks the JSON-lines
//! protocol of `docs/PROTOCOL.md`: it warms up (sleeps), writes
//! `{"ready":true}`, then answers `iterations`, `sleep_ms`, `fail` and
//! `crash` as docs/CONFIG.md, "The built-in demo config", says, replying
//! `{"done":true,"value":…,"iterations":…,"pid":…,"slot":…,"job":…,"millis":…}`.
//! It exits when its stdin ends (the pool closes it, or the server dies).

use std::io::{self, BufRead, Write};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::config::{
    EvictionConfig, HumanDuration, PoolConfig, SELF_EXE, SizingConfig, StartupKind,
};

/// The demo pool's name.
pub(crate) const DEMO_POOL: &str = "demo";

/// The demo pool's group.
pub(crate) const DEMO_GROUP: &str = "demo";

/// Iterations when a request gives none.
pub(crate) const DEFAULT_ITERATIONS: u64 = 50_000;

/// The most iterations a request may ask for.
pub(crate) const MAX_ITERATIONS: u64 = 10_000_000_000;

/// The demo pool: two workers started together, a 5-minute idle timeout
/// that keeps one, 30 s job and warm-up timeouts.
pub(crate) fn pool_config() -> PoolConfig {
    let mut pool = PoolConfig::new(DEMO_POOL, [SELF_EXE, "worker", "demo"]);
    pool.group = Some(DEMO_GROUP.into());
    pool.startup = StartupKind::Parallel;
    pool.sizing = Some(SizingConfig::Fixed { workers: 2 });
    pool.eviction = EvictionConfig::IdleTimeout {
        after: HumanDuration(Duration::from_secs(300)),
        keep: 1,
    };
    pool.options.job_timeout = Some(Duration::from_secs(30));
    pool.options.warmup_timeout = Some(Duration::from_secs(30));
    pool.options.job_grace = Duration::from_secs(5);
    pool
}

/// Runs the demo worker on stdin/stdout until stdin ends.
///
/// # Errors
///
/// An I/O error on stdin or stdout (the pool has gone).
pub(crate) fn run_worker(warmup: Duration) -> io::Result<()> {
    let pid = std::process::id();
    let slot: Option<u64> = std::env::var("KENNEL_SLOT")
        .ok()
        .and_then(|s| s.parse().ok());
    eprintln!(
        "demo worker {pid}: warming up for {}",
        humantime::format_duration(warmup)
    );
    std::thread::sleep(warmup);
    let stdout = io::stdout();
    let mut out = stdout.lock();
    writeln!(out, "{}", json!({"ready": true, "pid": pid}))?;
    out.flush()?;
    let mut served: u64 = 0;
    for line in io::stdin().lock().lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let reply = match serde_json::from_str::<Value>(&line) {
            Ok(request) => {
                served += 1;
                answer(&request, pid, slot, served)
            }
            Err(e) => error_reply(&format!("bad request: {e}")),
        };
        writeln!(out, "{reply}")?;
        out.flush()?;
    }
    Ok(())
}

/// One request's reply.
fn answer(request: &Value, pid: u32, slot: Option<u64>, served: u64) -> Value {
    let Some(obj) = request.as_object() else {
        return error_reply("expected an object such as {\"iterations\": 50000}");
    };
    let started = Instant::now();
    if let Some(ms) = obj.get("sleep_ms") {
        match ms.as_u64() {
            Some(ms) => std::thread::sleep(Duration::from_millis(ms.min(3_600_000))),
            None => return error_reply("sleep_ms must be a whole number of milliseconds"),
        }
    }
    if obj.get("crash").and_then(Value::as_bool) == Some(true) {
        eprintln!("demo worker {pid}: crashing as asked");
        std::process::exit(3);
    }
    if let Some(message) = obj.get("fail") {
        let message = message
            .as_str()
            .map_or_else(|| message.to_string(), str::to_owned);
        return error_reply(&message);
    }
    let asked = obj
        .get("iterations")
        .map_or(Some(DEFAULT_ITERATIONS), Value::as_u64);
    let Some(iterations) = asked.filter(|n| *n <= MAX_ITERATIONS) else {
        return error_reply(&format!(
            "iterations must be a whole number from 0 to {MAX_ITERATIONS}"
        ));
    };
    let value = sum_of_roots(iterations);
    json!({
        "done": true,
        "value": value,
        "iterations": iterations,
        "pid": pid,
        "slot": slot,
        "job": served,
        "millis": started.elapsed().as_secs_f64() * 1000.0,
    })
}

/// The sum of `sqrt(i)` for `i < n`.
pub(crate) fn sum_of_roots(n: u64) -> f64 {
    let mut value = 0.0;
    for i in 0..n {
        #[allow(clippy::cast_precision_loss)]
        let x = i as f64;
        value += x.sqrt();
    }
    value
}

fn error_reply(message: &str) -> Value {
    json!({"error": true, "message": message})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_square_roots() {
        assert_eq!(sum_of_roots(0), 0.0);
        assert!((sum_of_roots(5) - (1.0 + 2f64.sqrt() + 3f64.sqrt() + 2.0)).abs() < 1e-12);
    }

    #[test]
    fn answers_errors_and_work() {
        let r = answer(&json!({"iterations": 4}), 7, Some(1), 1);
        assert_eq!(r["done"], true);
        assert_eq!(r["pid"], 7);
        assert_eq!(r["slot"], 1);
        let r = answer(&json!({"fail": "no"}), 7, None, 2);
        assert_eq!(r, json!({"error": true, "message": "no"}));
        let r = answer(&json!([1]), 7, None, 3);
        assert_eq!(r["error"], true);
        let r = answer(&json!({"iterations": -1}), 7, None, 4);
        assert_eq!(r["error"], true);
    }
}
