//! End to end: the real `kennel` binary on a free loopback port, with a real
//! config and real worker processes (the built-in demo worker and the Python
//! echo worker), driven by a tiny HTTP/1.1 client; then SIGTERM, and no
//! worker process may remain.

mod served;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use nix::sys::signal::Signal;
use serde_json::{Value, json};
use served::{LIMIT, Server, Stderr, TempDir, alive, descendants, is_reaper};

/// One HTTP/1.1 exchange with `Connection: close` and a JSON body: status,
/// head and body.
fn http(addr: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> (u16, String, String) {
    let body = body.map(Value::to_string).unwrap_or_default();
    let a = served::http(
        addr,
        method,
        path,
        &[("Content-Type", "application/json")],
        &body,
    );
    (a.status, a.head, a.body)
}

fn json_of(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

#[test]
fn the_binary_serves_real_workers_and_leaves_none_after_sigterm() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let echo = repo.join("examples/workers/echo.py");
    let config = format!(
        r#"
[server]
listen = "127.0.0.1:0"
shutdown_grace = "10s"

[[pool]]
name = "demo"
argv = ["@kennel", "worker", "demo", "--warmup", "50ms"]
group = "cpu"
startup = "parallel"
sizing = {{ kind = "fixed", workers = 2 }}
job_timeout = "20s"

[[pool]]
name = "echo"
argv = ["python3", {echo:?}]
env = {{ PYTHONUNBUFFERED = "1" }}
startup = "parallel"
sizing = {{ kind = "fixed", workers = 1 }}
"#,
        echo = echo.display().to_string()
    );
    let mut server = Server::start(
        "e2e",
        &config,
        &[],
        &[("RUST_LOG", "warn")],
        Stderr::Inherited,
    );
    let addr = server.addr;
    let server_pid = server.child.id();

    // Ready once each pool's first worker is; the pools as configured.
    server.wait_count("demo", "idle", 2, &[]);
    server.wait_count("echo", "idle", 1, &[]);
    let (status, _, body) = http(addr, "GET", "/healthz", None);
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = http(addr, "GET", "/pools", None);
    assert_eq!(status, 200);
    let pools = json_of(&body);
    assert_eq!(pools["pools"][0]["name"], "demo");
    assert_eq!(pools["pools"][0]["group"], "cpu");
    assert_eq!(pools["pools"][1]["name"], "echo");

    // Jobs, several at once, on the demo pool; the echo pool echoes.
    let replies: Vec<Value> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..6)
            .map(|i| {
                s.spawn(move || {
                    let (status, _, body) = http(
                        addr,
                        "POST",
                        "/pools/demo/jobs",
                        Some(&json!({"iterations": 1000 * (i + 1)})),
                    );
                    assert_eq!(status, 200, "{body}");
                    json_of(&body)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut worker_pids = BTreeSet::new();
    for (i, r) in replies.iter().enumerate() {
        assert_eq!(r["done"], true);
        assert_eq!(r["iterations"], 1000 * (i + 1));
        worker_pids.insert(u32::try_from(r["pid"].as_u64().unwrap()).unwrap());
    }
    let (status, _, body) = http(
        addr,
        "POST",
        "/pools/echo/jobs",
        Some(&json!({"hello": [1, 2]})),
    );
    assert_eq!(status, 200);
    assert_eq!(json_of(&body), json!({"hello": [1, 2]}));
    let (status, _, body) = http(
        addr,
        "POST",
        "/groups/cpu/jobs",
        Some(&json!({"iterations": 10})),
    );
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = http(
        addr,
        "POST",
        "/pools/echo/jobs",
        Some(&json!({"op": "error", "message": "bad input"})),
    );
    assert_eq!(status, 500);
    assert_eq!(
        json_of(&body),
        json!({"error": "worker-error", "message": "bad input"})
    );

    // Metrics, from the pools and from the service.
    let (status, head, text) = http(addr, "GET", "/metrics", None);
    assert_eq!(status, 200);
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain"),
        "{head}"
    );
    assert!(text.contains("kennel_jobs_total{pool=\"demo\"}"), "{text}");
    assert!(text.contains("kennel_http_requests_total{"), "{text}");

    // Events: a crash shows on the stream, then a new worker gets ready.
    let mut events = TcpStream::connect(addr).unwrap();
    events.set_read_timeout(Some(LIMIT)).unwrap();
    write!(
        events,
        "GET /events?pool=demo HTTP/1.1\r\nHost: {addr}\r\n\r\n"
    )
    .unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    // The stream is open once its headers arrived.
    while !seen.contains("\r\n\r\n") {
        let n = events.read(&mut buf).unwrap();
        assert!(n > 0, "the event stream closed: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    assert!(seen.contains("text/event-stream"), "{seen}");
    let (status, _, body) = http(
        addr,
        "POST",
        "/pools/demo/jobs",
        Some(&json!({"crash": true})),
    );
    assert_eq!(status, 502, "{body}");
    assert_eq!(json_of(&body)["error"], "crashed");
    let start = Instant::now();
    loop {
        let ended = seen
            .find("event: worker:crashed")
            .or_else(|| seen.find("event: worker:exited"));
        if ended.is_some_and(|at| seen[at..].contains("event: worker:ready")) {
            break;
        }
        assert!(start.elapsed() < LIMIT, "events not seen: {seen}");
        let n = events.read(&mut buf).unwrap();
        assert!(n > 0, "the event stream closed: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(seen.contains("\"pool\":\"demo\""), "{seen}");

    // Every worker process is a descendant of the server. The pool sends
    // `worker:ready` in the same step that makes the new worker idle, so the
    // pool is idle again now.
    let (_, _, body) = http(addr, "GET", "/pools/demo/stats", None);
    assert_eq!(json_of(&body)["idle"], 2, "{body}");
    // The server's reaper is its child too, but no worker: it outlives the
    // server by the moment its reaping takes.
    let children: BTreeSet<u32> = descendants(server_pid)
        .into_iter()
        .filter(|&p| !is_reaper(p))
        .collect();
    for p in worker_pids.iter().filter(|&&p| alive(p)) {
        assert!(
            children.contains(p),
            "worker {p} is not the server's: {children:?}"
        );
    }
    assert!(children.len() >= 3, "demo ×2 and echo ×1: {children:?}");
    worker_pids.extend(children);

    // A job in flight when SIGTERM comes still gets its answer.
    let in_flight = std::thread::spawn(move || {
        http(
            addr,
            "POST",
            "/pools/demo/jobs",
            Some(&json!({"sleep_ms": 700})),
        )
    });
    server.wait_count("demo", "lent", 1, &[]);
    server.signal(Signal::SIGTERM);
    let (status, _, body) = in_flight.join().unwrap();
    assert_eq!(status, 200, "{body}");

    // The event stream ends, the server exits cleanly, and no worker remains.
    let mut rest = Vec::new();
    let _ = events.read_to_end(&mut rest);
    let exit = server
        .exit_within(LIMIT)
        .expect("the server did not exit after SIGTERM");
    assert!(exit.success(), "{exit:?}");
    // The server exits only once its pools closed, and a pool closes once
    // every worker has ended: none may be left now.
    let left: Vec<u32> = worker_pids.iter().copied().filter(|&p| alive(p)).collect();
    assert!(
        left.is_empty(),
        "workers left after the server exited: {left:?}"
    );
    assert!(
        TcpStream::connect(addr).is_err(),
        "still accepting after shutdown"
    );
}

#[test]
fn check_prints_what_serve_would_start_and_refuses_bad_configs() {
    let tmp = TempDir::new("check");
    let dir = &tmp.0;
    let good = dir.join("good.toml");
    std::fs::write(
        &good,
        "[[pool]]\nname = \"demo\"\nargv = [\"@kennel\", \"worker\", \"demo\"]\nstartup = \"parallel\"\nsizing = { kind = \"fixed\", workers = 3 }\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kennel"))
        .args(["check", "--config"])
        .arg(&good)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("pool demo"), "{stdout}");
    assert!(stdout.contains("capacity        3"), "{stdout}");
    assert!(stdout.contains("valid"), "{stdout}");

    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "[[pool]]\nname = \"demo\"\nargv = [\"x\"]\njob_timeout = \"0s\"\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kennel"))
        .args(["check", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("bad.toml"), "{stderr}");
    assert!(stderr.contains("pool[0].job_timeout"), "{stderr}");
    assert!(stderr.contains("at least 1ms"), "{stderr}");

    // serve refuses the same file at start.
    let out = Command::new(env!("CARGO_BIN_EXE_kennel"))
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pool[0].job_timeout"));
}

#[test]
fn run_streams_jobs_in_input_order() {
    let tmp = TempDir::new("run");
    let dir = &tmp.0;
    let config = dir.join("kennel.toml");
    std::fs::write(
        &config,
        "[[pool]]\nname = \"demo\"\nargv = [\"@kennel\", \"worker\", \"demo\", \"--warmup\", \"20ms\"]\nsizing = { kind = \"fixed\", workers = 2 }\n",
    )
    .unwrap();
    let jobs = dir.join("jobs.jsonl");
    let mut lines: Vec<String> = (0..20)
        .map(|i| json!({"iterations": i, "sleep_ms": (20 - i) * 3}).to_string())
        .collect();
    lines.insert(5, "not json".into());
    lines.insert(9, String::new());
    lines.push(json!({"fail": "no"}).to_string());
    std::fs::write(&jobs, lines.join("\n") + "\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kennel"))
        .args(["run", "--pool", "demo", "--quiet", "--config"])
        .arg(&config)
        .arg(&jobs)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Two jobs failed: exit code 1, and a summary.
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("22 jobs: 20 ok, 2 failed"), "{stderr}");
    let results: Vec<Value> = stdout.lines().map(json_of).collect();
    assert_eq!(results.len(), 22, "{stdout}");
    let mut want = 0;
    for r in &results {
        if r.get("error").is_some() {
            continue;
        }
        assert_eq!(r["iterations"], want, "out of order: {stdout}");
        want += 1;
    }
    assert_eq!(want, 20);
    assert_eq!(results[5]["error"], "bad-json");
    assert_eq!(results[5]["line"], 6);
    assert_eq!(
        results[21],
        json!({"error": "worker-error", "message": "no", "line": 23})
    );

    // An unknown pool is refused, naming the pools there are.
    let out = Command::new(env!("CARGO_BIN_EXE_kennel"))
        .args(["run", "--pool", "nope", "--config"])
        .arg(&config)
        .arg(&jobs)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("allowed: demo"));
}

#[test]
fn run_names_the_last_words_of_a_worker_that_cannot_start_in_its_results_and_summary() {
    let tmp = TempDir::new("run-words");
    let dir = &tmp.0;
    let config = dir.join("kennel.toml");
    std::fs::write(
        &config,
        "[[pool]]\nname = \"model\"\nargv = [\"sh\", \"-c\", \"echo 'model file not found: /models/x.bin' >&2; exit 1\"]\n",
    )
    .unwrap();
    let jobs = dir.join("jobs.jsonl");
    std::fs::write(&jobs, "{}\n{}\n{}\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kennel"))
        .args([
            "run",
            "--pool",
            "model",
            "--quiet",
            "--concurrency",
            "1",
            "--config",
        ])
        .arg(&config)
        .arg(&jobs)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for line in stdout.lines() {
        let r = json_of(line);
        assert_eq!(r["error"], "warmup-failed", "{stdout}");
        assert_eq!(r["stderr"], json!(["model file not found: /models/x.bin"]));
    }
    assert!(
        stderr.contains(
            "last words of the worker that failed line 3 (warmup-failed):\n  model file not found: /models/x.bin"
        ),
        "{stderr}"
    );
}
