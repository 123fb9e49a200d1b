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
