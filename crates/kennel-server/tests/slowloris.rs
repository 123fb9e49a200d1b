//! 2,000 slowloris connections against the real `kennel serve`: each is
//! dropped once its header timeout is over, and `/readyz` answers within
//! 100 ms all along. A test binary of its own, so that no other test of
//! this crate shares the two cores while it measures.

#![cfg(target_os = "linux")]

mod served;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use served::{Server, Stderr, demo_pool, sample};

const SERVER: &str = "[server]\nlisten = \"127.0.0.1:0\"\n";

/// How often the probe asks `/readyz`, as a load balancer would.
const PROBE_EVERY: Duration = Duration::from_millis(20);

#[test]
fn two_thousand_slowloris_connections_are_dropped_after_the_header_timeout_while_readyz_answers() {
    const WANTED: usize = 2_000;
    // Each connection is two descriptors here (this process and the
    // server's end is the server's own): make room.
    // This process holds one descriptor per connection (the server its
    // own, under its own raised limit): make room, or scale down and say so.
    let limit = rlimit::increase_nofile_limit(u64::MAX).unwrap_or(1024);
    let room = usize::try_from(limit.saturating_sub(200)).unwrap_or(WANTED);
    let connections = WANTED.min(room);
    if connections < WANTED {
        eprintln!("the descriptor limit is {limit}: {connections} connections instead of {WANTED}");
    }
    let toml = format!("{SERVER}header_timeout = \"3s\"\n{}", demo_pool("demo", 1));
    let server = Server::start("slowloris", &toml, &[], &[], Stderr::Collected);
    let addr = server.addr;
    // Ready once the pool's first worker is.
    server.wait_count("demo", "idle", 1, &[]);
    // The probe runs every PROBE_EVERY until it is told to stop.
    let (stop_probing, stop) = std::sync::mpsc::channel::<()>();
    let probe = {
        std::thread::spawn(move || {
            // A probe as a load balancer's: one kept-alive connection.
            let mut conn = TcpStream::connect(addr).unwrap();
            conn.set_nodelay(true).unwrap();
            conn.set_read_timeout(Some(served::LIMIT)).unwrap();
            let mut worst = Duration::ZERO;
            let mut probes = 0;
            loop {
                let started = Instant::now();
                let answer = probe_readyz(&mut conn);
                assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
                worst = worst.max(started.elapsed());
                probes += 1;
                if stop.recv_timeout(PROBE_EVERY) != Err(RecvTimeoutError::Timeout) {
                    break;
                }
            }
            (probes, worst)
        })
    };
    let opened = Instant::now();
    let mut slow = Vec::with_capacity(connections);
    for _ in 0..connections {
        let mut s = TcpStream::connect(addr).unwrap();
        // A head that never ends.
        s.write_all(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            .unwrap();
        slow.push(s);
    }
    let all_open = opened.elapsed();
    eprintln!("{connections} connections opened in {all_open:?}");
    server.eventually("every connection is open at the server", || {
        let metrics = server.http("GET", "/metrics", &[], "").body;
        sample(&metrics, "kennel_http_connections") >= connections as f64
    });
    // Each is closed by the server once its header timeout is over.
    for s in &mut slow {
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        let mut buf = [0u8; 512];
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    }
    let all_closed = opened.elapsed();
    drop(stop_probing);
    let (probes, worst) = probe.join().unwrap();
    eprintln!(
        "{connections} slowloris connections: open in {all_open:?}, all closed {all_closed:?} after the first; {probes} /readyz probes, the slowest {worst:?}"
    );
    assert!(
        all_closed >= Duration::from_secs(3),
        "closed before the header timeout: {all_closed:?}"
    );
    assert!(
        all_closed < all_open + Duration::from_secs(3 + 5),
        "{all_closed:?}"
    );
    assert!(probes >= 20, "{probes}");
    assert!(
        worst < Duration::from_millis(100),
        "a /readyz took {worst:?}"
    );
    let metrics = server.http("GET", "/metrics", &[], "").body;
    assert!(
        sample(&metrics, "kennel_http_connections") <= 2.0,
        "{metrics}"
    );
}

/// One `GET /readyz` on a kept-alive connection: the answer's head and body.
fn probe_readyz(conn: &mut TcpStream) -> String {
    conn.write_all(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = conn.read(&mut buf).unwrap();
        assert!(n > 0, "the probe's connection closed");
        got.extend_from_slice(&buf[..n]);
        if let Some(at) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..at]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if got.len() >= at + 4 + length {
                return String::from_utf8_lossy(&got).into_owned();
            }
        }
    }
}
