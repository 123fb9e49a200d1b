//! `kennel run`'s edges: a line that is not UTF-8 fails alone, `--output`
//! may not be the jobs file, `--pool` may be left out with one pool, and
//! the summary gives the rate from the first ready worker on.

#![cfg(target_os = "linux")]

mod served;

use std::process::Command;

use serde_json::Value;
use served::{TempDir, kennel_bin};

const ONE_POOL: &str = "[[pool]]\nname = \"demo\"\nargv = [\"@kennel\", \"worker\", \"demo\", \"--warmup\", \"200ms\"]\nsizing = { kind = \"fixed\", workers = 2 }\n";

#[test]
fn a_line_that_is_not_utf8_fails_alone_and_pool_may_be_left_out_with_one_pool() {
    let dir = TempDir::new("run-utf8");
    let config = dir.0.join("kennel.toml");
    std::fs::write(&config, ONE_POOL).unwrap();
    let jobs = dir.0.join("jobs.jsonl");
    let mut bytes = b"{\"iterations\": 1}\n".to_vec();
    bytes.extend_from_slice(b"{\"text\": \"caf\xe9\"}\n");
    bytes.extend_from_slice(b"{\"iterations\": 3}\n");
    std::fs::write(&jobs, bytes).unwrap();
    let out = Command::new(kennel_bin())
        .args(["run", "--quiet", "--config"])
        .arg(&config)
        .arg(&jobs)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let rows: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 3, "{stdout}");
    assert_eq!(rows[0]["iterations"], 1);
    assert_eq!(rows[1]["error"], "bad-json");
    assert_eq!(rows[1]["line"], 2);
    assert!(
        rows[1]["message"].as_str().unwrap().contains("not UTF-8"),
        "{}",
        rows[1]
    );
    assert_eq!(rows[2]["iterations"], 3);
    // The rate is measured from the first ready worker on, one decimal.
    let summary = stderr.lines().last().unwrap();
    assert!(
        summary.starts_with("3 jobs: 2 ok, 1 failed in "),
        "{summary}"
    );
    assert!(summary.contains(" jobs/s after a 0."), "{summary}");
    assert!(summary.contains("s warm-up) [bad-json: 1]"), "{summary}");
    eprintln!("{summary}");
}

#[test]
fn an_output_that_is_the_jobs_file_is_refused_and_the_jobs_are_kept() {
    let dir = TempDir::new("run-output");
    let config = dir.0.join("kennel.toml");
    std::fs::write(&config, ONE_POOL).unwrap();
    let jobs = dir.0.join("jobs.jsonl");
    std::fs::write(&jobs, "{}\n{}\n").unwrap();
    // Named another way, it is the same file.
    let same = dir.0.join(".").join("jobs.jsonl");
    let out = Command::new(kennel_bin())
        .args(["run", "--quiet", "--config"])
        .arg(&config)
        .arg("--output")
        .arg(&same)
        .arg(&jobs)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is the jobs file"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&jobs).unwrap(), "{}\n{}\n");
}

#[test]
fn with_several_pools_the_pool_must_be_named() {
    let dir = TempDir::new("run-pools");
    let config = dir.0.join("kennel.toml");
    std::fs::write(
        &config,
        format!("{ONE_POOL}{}", ONE_POOL.replace("\"demo\"", "\"other\"")),
    )
    .unwrap();
    let jobs = dir.0.join("jobs.jsonl");
    std::fs::write(&jobs, "{}\n").unwrap();
    let out = Command::new(kennel_bin())
        .args(["run", "--config"])
        .arg(&config)
        .arg(&jobs)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the config has 2 pools: name one with --pool (allowed: demo, other)"),
        "{stderr}"
    );
}

/// Runs `jobs` lines through `kennel run` with `config` (in `dir`, extra
/// arguments `args`) and returns the result rows and stderr.
fn run_batch(dir: &TempDir, config: &str, jobs: usize, args: &[&str]) -> (Vec<Value>, String) {
    let config_path = dir.0.join("kennel.toml");
    std::fs::write(&config_path, config).unwrap();
    let jobs_path = dir.0.join("jobs.jsonl");
    let lines: String = (0..jobs).map(|i| format!("{{\"n\":{i}}}\n")).collect();
    std::fs::write(&jobs_path, lines).unwrap();
    let out = Command::new(kennel_bin())
        .args(["run", "--quiet", "--config"])
        .arg(&config_path)
        .args(args)
        .arg(&jobs_path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let rows = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (rows, stderr)
}

#[test]
fn a_batch_with_the_readmes_config_rejects_no_line() {
    // README's example config, as written, its worker path resolved from
    // the config's directory.
    let readme = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"),
    )
    .unwrap();
    let config = readme
        .split("```toml\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .find(|b| b.contains("[[pool]]") && b.contains("max_queue_wait"))
        .expect("README's example config");
    let dir = TempDir::new("run-readme");
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    std::os::unix::fs::symlink(examples, dir.0.join("examples")).unwrap();
    let (rows, stderr) = run_batch(&dir, config, 500, &[]);
    assert_eq!(rows.len(), 500, "{stderr}");
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row["n"], i, "{row}");
    }
    assert!(stderr.contains("500 jobs: 500 ok, 0 failed"), "{stderr}");
}

#[test]
fn a_batch_wider_than_the_pools_queue_rejects_no_line() {
    // 20 jobs at once on 2 workers with room for 1 waiting job: the batch
    // holds the lines back instead of having them rejected.
    let dir = TempDir::new("run-backpressure");
    let config = format!("{ONE_POOL}max_waiting = 1\nmax_queue_wait = \"1ms\"\n");
    let (rows, stderr) = run_batch(&dir, &config, 100, &["--concurrency", "20"]);
    assert_eq!(rows.len(), 100, "{stderr}");
    assert!(rows.iter().all(|r| r.get("error").is_none()), "{stderr}");
}

/// A worker that keeps 4 threads working on each job (its own pool of 3
/// and itself, 300 ms each), whatever budget it was told.
const GREEDY: &str = r#"
import json, queue, sys, threading, time
def spin(until):
    while time.monotonic() < until:
        pass
done = queue.Queue()
def work(q):
    while True:
        spin(q.get())
        done.put(1)
pool = [queue.Queue() for _ in range(3)]
for q in pool:
    threading.Thread(target=work, args=(q,), daemon=True).start()
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    until = time.monotonic() + 0.3
    for q in pool:
        q.put(until)
    spin(until)
    for q in pool:
        done.get()
    print(json.dumps({"ok": True}), flush=True)
"#;

#[test]
fn the_summary_names_a_worker_that_oversubscribes_its_threads_and_the_fix() {
    let dir = TempDir::new("run-greedy");
    let config = format!(
        "[[pool]]\nname = \"greedy\"\nargv = [\"python3\", \"-c\", {}]\nthreads = 1\nsizing = {{ kind = \"fixed\", workers = 1 }}\n",
        toml_string(GREEDY)
    );
    let (rows, stderr) = run_batch(&dir, &config, 6, &[]);
    assert_eq!(rows.len(), 6, "{stderr}");
    assert!(
        stderr.contains("worker 0 oversubscribed its threads: 4 of its"),
        "{stderr}"
    );
    assert!(stderr.contains("on a budget of 1"), "{stderr}");
    assert!(
        stderr.contains("make the worker's runtimes use KENNEL_THREADS"),
        "{stderr}"
    );
}

/// `text` as a TOML basic string.
fn toml_string(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}
