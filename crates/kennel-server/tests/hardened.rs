//! The hardened HTTP layer, against the real `kennel serve` over real
//! sockets: metric labels from closed sets, the Host and Origin guard, the
//! token kept from workers, slow clients dropped by their timeouts.

#![cfg(target_os = "linux")]

mod served;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use served::{Server, Stderr, demo_pool, environ, sample};

const SERVER: &str = "[server]\nlisten = \"127.0.0.1:0\"\n";

/// Sends `count` requests with made-up methods on one kept-alive
/// connection, reading each answer.
fn made_up_methods(addr: std::net::SocketAddr, from: usize, count: usize) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(served::LIMIT)).unwrap();
    s.set_nodelay(true).unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    for i in from..from + count {
        let path = if i % 2 == 0 {
            "/pools".to_owned()
        } else {
            format!("/made/up/{i}")
        };
        let request =
            format!("M{i}X {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n");
        s.write_all(request.as_bytes()).unwrap();
        // One answer: read its head, then the body its length says.
        let mut got = Vec::new();
        let (head_end, length) = loop {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "the server closed the connection");
            got.extend_from_slice(&buf[..n]);
            if let Some(at) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&got[..at]).to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse().unwrap());
                break (at + 4, length);
            }
        };
        while got.len() < head_end + length {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0);
            got.extend_from_slice(&buf[..n]);
        }
        assert!(
            got.starts_with(b"HTTP/1.1 40"),
            "{}",
            String::from_utf8_lossy(&got)
        );
    }
}

#[test]
fn ten_thousand_made_up_methods_leave_the_metrics_the_same_size() {
    let server = Server::start(
        "labels",
        &format!("{SERVER}{}", demo_pool("demo", 1)),
        &[],
        &[],
        Stderr::Collected,
    );
    // Every series the test will touch exists once first, the warm-up's too.
    server.eventually("the worker is warm", || {
        server.get_json("/pools/demo/stats")["idle"] == 1
    });
    made_up_methods(server.addr, 0, 2);
    let _ = server.http("GET", "/metrics", &[], "");
    let before = server.http("GET", "/metrics", &[], "").body;
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let addr = server.addr;
            std::thread::spawn(move || made_up_methods(addr, 10 + t * 2500, 2500))
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let after = server.http("GET", "/metrics", &[], "").body;
    let series = |m: &str| m.lines().filter(|l| !l.starts_with('#')).count();
    assert_eq!(series(&before), series(&after), "new series:\n{after}");
    // Only counts grew: a few more digits, never a series per request.
    let grown = after.len().abs_diff(before.len());
    assert!(grown < 512, "{} -> {} bytes", before.len(), after.len());
    assert_eq!(
        sample(
            &after,
            "kennel_http_requests_total{method=\"other\",route=\"unmatched\",status=\"404\"}"
        ),
        5001.0
    );
    eprintln!(
        "/metrics: {} bytes before, {} after 10,000 made-up methods",
        before.len(),
        after.len()
    );
}

#[test]
fn a_foreign_host_or_a_cross_site_origin_is_refused_and_runs_nothing() {
    let server = Server::start(
        "guard",
        &format!("{SERVER}{}", demo_pool("demo", 1)),
        &[],
        &[],
        Stderr::Collected,
    );
    let jobs = || {
        sample(
            &server.http("GET", "/metrics", &[], "").body,
            "kennel_jobs_total{pool=\"demo\"}",
        )
    };
    let job = r#"{"iterations": 10}"#;
    let refused = [
        // DNS rebinding: a foreign name that resolves to the service.
        vec![("Host", "rebind.evil.example:7878")],
        // A web page's "simple" POST: text/plain, a foreign Origin.
        vec![
            ("Content-Type", "text/plain"),
            ("Origin", "http://evil.example"),
        ],
        vec![("Origin", "null")],
        vec![("Sec-Fetch-Site", "cross-site")],
    ];
    for headers in &refused {
        let a = server.http("POST", "/pools/demo/jobs", headers, job);
        assert_eq!(a.status, 403, "{headers:?}: {}", a.body);
        assert_eq!(a.json()["error"], "forbidden");
        let put = server.http(
            "PUT",
            "/pools/demo/config",
            headers,
            r#"{"sizing":{"kind":"fixed","workers":64}}"#,
        );
        assert_eq!(put.status, 403, "{headers:?}: {}", put.body);
    }
    assert_eq!(jobs(), 0.0, "a refused request ran a job");
    assert_eq!(
        server.get_json("/pools/demo/stats")["capacity"],
        1,
        "a refused PUT changed the pool"
    );
    // curl and other clients that are not browsers work as before, and so
    // does the service's own origin.
    let a = server.http("POST", "/pools/demo/jobs", &[], job);
    assert_eq!(a.status, 200, "{}", a.body);
    let own = format!("http://{}", server.addr);
    let a = server.http(
        "POST",
        "/pools/demo/jobs",
        &[("Origin", &own), ("Sec-Fetch-Site", "same-origin")],
        job,
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(jobs(), 2.0);
}

#[test]
fn a_listed_host_is_let_in() {
    let toml = format!(
        "{SERVER}allowed_hosts = [\"kennel.internal\"]\n{}",
        demo_pool("demo", 1)
    );
    let server = Server::start("listed", &toml, &[], &[], Stderr::Collected);
    let a = server.http(
        "GET",
        "/pools/demo/stats",
        &[("Host", "kennel.internal:80")],
        "",
    );
    assert_eq!(a.status, 200, "{}", a.body);
    let a = server.http(
        "GET",
        "/pools/demo/stats",
        &[("Host", "other.internal")],
        "",
    );
    assert_eq!(a.status, 403, "{}", a.body);
}

#[test]
fn a_workers_environment_has_no_token() {
    let toml = format!(
        "{SERVER}token_env = \"KENNEL_TEST_TOKEN\"\n{}[[pool]]\nname = \"clear\"\nargv = [\"@kennel\", \"worker\", \"demo\", \"--warmup\", \"10ms\"]\nsizing = {{ kind = \"fixed\", workers = 1 }}\nenv_clear = true\nenv_keep = [\"PATH\"]\nenv = {{ MODEL = \"small\" }}\n",
        demo_pool("demo", 1)
    );
    let token = "s3cret-7f1e";
    let server = Server::start(
        "token",
        &toml,
        &[],
        &[("KENNEL_TEST_TOKEN", token), ("KENNEL_TEST_OTHER", "kept")],
        Stderr::Collected,
    );
    let auth = format!("bearer {token}");
    let pid_of = |pool: &str| {
        let a = server.http(
            "POST",
            &format!("/pools/{pool}/jobs"),
            &[("Authorization", &auth)],
            "{}",
        );
        assert_eq!(a.status, 200, "{}", a.body);
        u32::try_from(a.json()["pid"].as_u64().unwrap()).unwrap()
    };
    let env = environ(pid_of("demo"));
    assert!(env.iter().any(|v| v == "KENNEL_POOL=demo"), "{env:?}");
    assert!(env.iter().any(|v| v == "KENNEL_TEST_OTHER=kept"), "{env:?}");
    assert!(
        !env.iter()
            .any(|v| v.starts_with("KENNEL_TEST_TOKEN=") || v.contains(token)),
        "{env:?}"
    );
    // With env_clear, only env_keep, env and the pool's own variables.
    let mut env = environ(pid_of("clear"));
    env.sort();
    // (The thread budget's variables, KENNEL_THREADS, OMP_NUM_THREADS, …,
    // are the pool's own.)
    let names: Vec<&str> = env
        .iter()
        .map(|v| v.split('=').next().unwrap())
        .filter(|n| !n.ends_with("_THREADS"))
        .collect();
    assert_eq!(
        names,
        ["KENNEL_POOL", "KENNEL_SLOT", "MODEL", "PATH"],
        "{env:?}"
    );
}

#[test]
fn a_stalled_client_holds_the_stop_no_longer_than_its_header_timeout() {
    let toml = format!(
        "{SERVER}header_timeout = \"1s\"\nshutdown_grace = \"30s\"\n{}",
        demo_pool("demo", 1)
    );
    let mut server = Server::start("stalled", &toml, &[], &[], Stderr::Collected);
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.write_all(b"POST /pools/demo/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    // The stalled connection is open (the scrape's own is the other one).
    server.eventually("the stalled connection is counted", || {
        let metrics = server.http("GET", "/metrics", &[], "").body;
        sample(&metrics, "kennel_http_connections ") >= 2.0
    });
    let asked = Instant::now();
    server.signal(Signal::SIGTERM);
    let status = server
        .exit_within(Duration::from_secs(10))
        .expect("the server waited for the stalled client");
    assert!(status.success(), "{status:?}");
    eprintln!(
        "stopped in {:?} with a stalled client (header_timeout 1s, shutdown_grace 30s)",
        asked.elapsed()
    );
    drop(s);
}

#[test]
fn a_second_sigterm_kills_the_workers_at_once() {
    let toml = format!(
        "{SERVER}shutdown_grace = \"60s\"\n{}job_grace = \"60s\"\nworker_close_grace = \"60s\"\n",
        demo_pool("demo", 1)
    );
    let mut server = Server::start("twice", &toml, &[], &[], Stderr::Collected);
    let addr = server.addr;
    let worker = server.get_json("/pools/demo/stats");
    assert_eq!(worker["capacity"], 1);
    // A job that runs for minutes.
    let job = std::thread::spawn(move || {
        served::http(
            addr,
            "POST",
            "/pools/demo/jobs",
            &[],
            r#"{"iterations": 9000000000}"#,
        )
    });
    server.eventually("the job runs", || {
        server.get_json("/pools/demo/stats")["lent"] == 1
    });
    let pids: Vec<u32> = served::workers_of(server.child.id());
    assert!(!pids.is_empty());
    server.signal(Signal::SIGTERM);
    // The first signal is taken (and logged) and the server waits for the
    // job; the second is then told apart from it in the log below.
    server.eventually("the first SIGTERM is taken", || {
        server.log().contains("shutting down")
    });
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "the first SIGTERM waits for the job"
    );
    assert!(!job.is_finished(), "the first SIGTERM ended the job");
    let second = Instant::now();
    server.signal(Signal::SIGTERM);
    let status = server
        .exit_within(Duration::from_secs(10))
        .expect("the second SIGTERM did not stop it");
    assert!(status.success(), "{status:?}");
    assert!(
        pids.iter().all(|&p| !served::alive(p)),
        "a worker outlived the second SIGTERM"
    );
    eprintln!("second SIGTERM: stopped in {:?}", second.elapsed());
    assert!(
        server.log().contains("second signal: killing every worker"),
        "{}",
        server.log()
    );
    let _ = job.join();
}
