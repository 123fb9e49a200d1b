//! The counting worker of the queue tests (`tests/async_workers/count.py`):
//! a queued pool of it, and how many times its workers ran each job.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A queued pool `count` of `workers` counting workers (each job's `n`
/// appended to `dir/count` before it runs), `ack_wait = "2s"` unless
/// `queue_extra` names one.
pub fn counted_pool(nats: &str, dir: &Path, workers: usize, queue_extra: &str) -> String {
    let ack_wait = if queue_extra.contains("ack_wait") {
        ""
    } else {
        "ack_wait = \"2s\""
    };
    let worker = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/async_workers/count.py");
    format!(
        r#"[[pool]]
name = "count"
argv = ["python3", "{}"]
env = {{ COUNT_FILE = "{}" }}
startup = "parallel"
sizing = {{ kind = "fixed", workers = {workers} }}
job_timeout = "5m"

[pool.queue]
nats = "{nats}"
stream = "COUNT"
subject = "jobs.count"
{ack_wait}
{queue_extra}
"#,
        worker.display(),
        dir.join("count").display()
    )
}

/// How many times the workers ran each `n`.
pub fn runs(dir: &Path) -> BTreeMap<u64, usize> {
    let text = std::fs::read_to_string(dir.join("count")).unwrap_or_default();
    let mut runs = BTreeMap::new();
    for n in text.lines().filter_map(|l| l.trim().parse().ok()) {
        *runs.entry(n).or_default() += 1;
    }
    runs
}
