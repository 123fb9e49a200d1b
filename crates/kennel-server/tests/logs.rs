//! Logging never blocks the server, against the real `kennel serve`: with
//! its stderr on a pipe nobody reads, it keeps answering and stops on
//! SIGTERM; JSON log lines carry the events' fields.

#![cfg(target_os = "linux")]

mod served;

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use served::{Server, Stderr, demo_pool, sample};

const SERVER: &str = "[server]\nlisten = \"127.0.0.1:0\"\n";

#[test]
fn with_stderr_on_a_pipe_never_read_the_server_keeps_answering_and_stops_on_sigterm() {
    // Every request logged, and a worker that floods its own stderr: far
    // more than a pipe holds (64 KiB).
    let toml = format!(
        "{SERVER}access_log = true\n{}[[pool]]\nname = \"loud\"\nargv = [\"sh\", \"-c\", \"echo '{{\\\"ready\\\":true}}'; while read -r l; do seq 1 2000 >&2; echo \\\"$l\\\"; done\"]\nsizing = {{ kind = \"fixed\", workers = 1 }}\n",
        demo_pool("demo", 1)
    );
    let mut server = Server::start(
        "stalled-log",
        &toml,
        &[],
        &[("RUST_LOG", "trace")],
        Stderr::NeverRead,
    );
    let started = Instant::now();
    let mut slowest = Duration::ZERO;
    // One access line a job: more than the log buffer and the pipe hold.
    for i in 0..10_000 {
        let t = Instant::now();
        let pool = if i % 10 == 0 { "loud" } else { "demo" };
        let a = server.http(
            "POST",
            &format!("/pools/{pool}/jobs"),
            &[],
            r#"{"iterations": 10}"#,
        );
        assert_eq!(a.status, 200, "{}", a.body);
        slowest = slowest.max(t.elapsed());
    }
    let t = Instant::now();
    let live = server.http("GET", "/livez", &[], "");
    assert_eq!(live.status, 200);
    slowest = slowest.max(t.elapsed());
    let metrics = server.http("GET", "/metrics", &[], "").body;
    let dropped = sample(&metrics, "kennel_log_dropped_lines_total");
    assert!(
        dropped > 0.0,
        "no log line was dropped: the pipe never filled?\n{metrics}"
    );
    eprintln!(
        "10,000 jobs in {:?} with stderr never read, the slowest answer {slowest:?}; {dropped} log lines dropped, {} stderr lines of the loud worker dropped",
        started.elapsed(),
        sample(
            &metrics,
            "kennel_worker_stderr_dropped_lines_total{pool=\"loud\"}"
        )
    );
    assert!(slowest < Duration::from_secs(2), "{slowest:?}");
    let asked = Instant::now();
    server.signal(Signal::SIGTERM);
    let status = server
        .exit_within(Duration::from_secs(10))
        .expect("SIGTERM did not stop the server");
    assert!(status.success(), "{status:?}");
    eprintln!("stopped {:?} after SIGTERM", asked.elapsed());
}

#[test]
fn json_logs_carry_the_events_fields() {
    let toml = format!("{SERVER}log_format = \"json\"\n{}", demo_pool("demo", 1));
    let mut server = Server::start("json-log", &toml, &[], &[], Stderr::Collected);
    let a = server.http("POST", "/pools/demo/jobs", &[], "{}");
    let pid = a.json()["pid"].as_u64().unwrap();
    // A job past its timeout: an INFO event about a worker.
    let put = server.http(
        "PUT",
        "/pools/demo/config",
        &[],
        r#"{"job_timeout": "50ms"}"#,
    );
    assert_eq!(put.status, 200, "{}", put.body);
    let a = server.http(
        "POST",
        "/pools/demo/jobs",
        &[],
        r#"{"iterations": 9000000000}"#,
    );
    assert_eq!(a.status, 504, "{}", a.body);
    server.eventually("the time-out is logged", || {
        server.log().contains("worker:timeout")
    });
    server.signal(Signal::SIGTERM);
    server
        .exit_within(Duration::from_secs(10))
        .expect("stopped");
    let log = server.log();
    for line in log.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(v["level"].is_string() && v["target"].is_string(), "{line}");
    }
    let timeout: serde_json::Value = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["event"] == "worker:timeout")
        .unwrap();
    assert_eq!(timeout["pool"], "demo");
    assert_eq!(timeout["slot"], 0);
    assert_eq!(timeout["pid"].as_u64(), Some(pid));
    assert_eq!(timeout["message"], "job timed out; its worker is killed");
    assert!(!log.contains("self"), "an event logged as Debug: {log}");
}
