//! `/events` over a real socket: late subscribers replay, pids come with
//! the workers' events, rejections come as counts. (A subscriber that
//! stops reading: `src/events/lag_tests.rs`.)

#![cfg(target_os = "linux")]

mod served;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use served::{Server, Stderr, demo_pool};

const SERVER: &str = "[server]\nlisten = \"127.0.0.1:0\"\n";

/// Reads SSE frames from `stream` until `until` holds for one (or the
/// stream ends); returns (name, data) of each.
fn frames(stream: TcpStream, mut until: impl FnMut(&str, &Value) -> bool) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut name = String::new();
    for line in BufReader::new(stream).lines().map_while(Result::ok) {
        if let Some(n) = line.strip_prefix("event: ") {
            name = n.to_owned();
        } else if let Some(d) = line.strip_prefix("data: ") {
            let v: Value = serde_json::from_str(d).unwrap();
            let done = until(&name, &v);
            out.push((name.clone(), v));
            if done {
                break;
            }
        }
    }
    out
}

fn subscribe(addr: std::net::SocketAddr, path: &str, headers: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(served::LIMIT)).unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}\r\n").as_bytes())
        .unwrap();
    s
}

/// An event's `time`: RFC 3339, UTC.
fn time_of(v: &Value) -> SystemTime {
    let text = v["time"]
        .as_str()
        .unwrap_or_else(|| panic!("no time in {v}"));
    assert!(text.ends_with('Z'), "{text}");
    humantime::parse_rfc3339(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

#[test]
fn a_late_subscriber_replays_the_warm_ups_with_their_pids() {
    let started = SystemTime::now();
    let server = Server::start(
        "replay",
        &format!("{SERVER}{}", demo_pool("demo", 2)),
        &[],
        &[],
        Stderr::Collected,
    );
    server.eventually("both warm", || {
        server.get_json("/pools/demo/stats")["idle"] == 2
    });
    let mut ready = 0;
    let got = frames(subscribe(server.addr, "/events?since=0", ""), |n, _| {
        ready += usize::from(n == "worker:ready");
        ready == 2
    });
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "worker:starting",
            "worker:starting",
            "worker:ready",
            "worker:ready"
        ]
    );
    for (_, v) in got.iter().filter(|(n, _)| n == "worker:ready") {
        let pid = v["pid"].as_u64().unwrap();
        assert!(served::alive(u32::try_from(pid).unwrap()), "{v}");
        assert_eq!(v["pool"], "demo");
    }
    // Each event carries when it happened, in order.
    let times: Vec<SystemTime> = got.iter().map(|(_, v)| time_of(v)).collect();
    assert!(times.is_sorted(), "{got:?}");
    assert!(times[0] >= started - Duration::from_millis(1), "{got:?}");
    // A replay later keeps the original times, not the replay's moment.
    let last = *times.last().unwrap() + Duration::from_millis(10);
    while SystemTime::now() < last {
        std::thread::yield_now();
    }
    let mut ready = 0;
    let again = frames(subscribe(server.addr, "/events?since=0", ""), |n, _| {
        ready += usize::from(n == "worker:ready");
        ready == 2
    });
    assert_eq!(again, got);
    // Last-Event-ID: only what came after.
    let got = frames(
        subscribe(server.addr, "/events", "Last-Event-ID: 3\r\n"),
        |_, _| true,
    );
    assert_eq!(got[0].0, "worker:ready");
}

#[test]
fn rejections_come_as_one_count_a_second() {
    let toml = format!("{SERVER}{}max_waiting = 0\n", demo_pool("demo", 1));
    let server = Arc::new(Server::start(
        "rejections",
        &toml,
        &[],
        &[],
        Stderr::Collected,
    ));
    server.eventually("warm", || server.get_json("/pools/demo/stats")["idle"] == 1);
    let events = subscribe(server.addr, "/events?pool=demo", "");
    // One job holds the only worker; the others are turned away at once.
    let busy = {
        let addr = server.addr;
        std::thread::spawn(move || {
            served::http(
                addr,
                "POST",
                "/pools/demo/jobs",
                &[],
                r#"{"iterations": 3000000000}"#,
            )
        })
    };
    server.eventually("the worker is lent", || {
        server.get_json("/pools/demo/stats")["lent"] == 1
    });
    for _ in 0..200 {
        let a = server.http("POST", "/pools/demo/jobs", &[], "{}");
        assert_eq!(a.status, 503, "{}", a.body);
    }
    let mut counted = 0;
    let got = frames(events, |n, v| {
        if n == "jobs:rejected" {
            counted += v["count"].as_u64().unwrap();
        }
        counted >= 200
    });
    let rejected: Vec<&Value> = got
        .iter()
        .filter(|(n, _)| n == "jobs:rejected")
        .map(|(_, v)| v)
        .collect();
    assert!(
        rejected.len() <= 5,
        "{} jobs:rejected events for 200 rejections",
        rejected.len()
    );
    assert_eq!(
        rejected[0]["reasons"],
        json!({"queue-depth": rejected[0]["count"]})
    );
    assert!(!got.iter().any(|(n, _)| n == "worker:rejected"));
    drop(busy);
    // The log has a summary, not a line per rejection.
    let log = server.log();
    assert!(!log.contains("job rejected"), "{log}");
}
