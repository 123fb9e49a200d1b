//! SIGHUP and `POST /reload` against the real `kennel serve`: an edited
//! file is applied live (a pool added, one resized, one removed, one
//! replaced), a broken one is refused with the error a start gives, and
//! the running config stays.

#![cfg(target_os = "linux")]

mod served;

use std::process::Command;

use nix::sys::signal::Signal;
use serde_json::Value;
use served::{Server, Stderr, demo_pool, kennel_bin};

const SERVER: &str = "[server]\nlisten = \"127.0.0.1:0\"\n";

/// Each pool's name and capacity, sorted.
fn pools(server: &Server) -> Vec<(String, u64)> {
    let v = server.get_json("/pools");
    let mut out: Vec<(String, u64)> = v["pools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p: &Value| {
            (
                p["name"].as_str().unwrap().to_owned(),
                p["stats"]["capacity"].as_u64().unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn sighup_applies_an_edited_file_and_refuses_a_broken_one() {
    let first = format!(
        "{SERVER}{}{}{}",
        demo_pool("resized", 1),
        demo_pool("removed", 1),
        demo_pool("kept", 1)
    );
    let server = Server::start("reload", &first, &[], &[], Stderr::Collected);
    assert_eq!(
        pools(&server),
        [
            ("kept".into(), 1),
            ("removed".into(), 1),
            ("resized".into(), 1)
        ]
    );
    let kept_pid = server.http("POST", "/pools/kept/jobs", &[], "{}").json()["pid"].clone();

    // Edited: one resized, one removed, one added; `kept` untouched.
    let edited = format!(
        "{SERVER}{}{}{}",
        demo_pool("resized", 3),
        demo_pool("kept", 1),
        demo_pool("added", 2)
    );
    std::fs::write(&server.config, &edited).unwrap();
    server.signal(Signal::SIGHUP);
    server.eventually("the edit is applied", || {
        pools(&server)
            == [
                ("added".into(), 2),
                ("kept".into(), 1),
                ("resized".into(), 3),
            ]
    });
    let a = server.http("POST", "/pools/added/jobs", &[], "{}");
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(
        server.http("POST", "/pools/removed/jobs", &[], "{}").status,
        404
    );
    // The pool that did not change kept its worker.
    assert_eq!(
        server.http("POST", "/pools/kept/jobs", &[], "{}").json()["pid"],
        kept_pid
    );
    server.eventually("the reload is logged", || {
        server.log().contains("config reloaded")
    });

    // Broken: refused with the words a start prints; nothing changes.
    let broken = format!("{edited}[[pool]]\nname = \"bad\"\nargv = [\"x\"]\njob_timeut = \"1s\"\n");
    std::fs::write(&server.config, &broken).unwrap();
    let check = Command::new(kennel_bin())
        .args(["check", "--config"])
        .arg(&server.config)
        .output()
        .unwrap();
    let start_error = String::from_utf8_lossy(&check.stderr);
    let start_error = start_error
        .lines()
        .find_map(|l| l.strip_prefix("invalid: "))
        .unwrap()
        .to_owned();
    assert!(
        start_error.contains("`pool[3].job_timeut`: unknown field"),
        "{start_error}"
    );
    server.signal(Signal::SIGHUP);
    server.eventually("the refusal is logged", || {
        server.log().contains("reload refused")
    });
    let log = server.log();
    let refusal = log.lines().find(|l| l.contains("reload refused")).unwrap();
    assert!(
        refusal.contains(&start_error),
        "{refusal}\nvs {start_error}"
    );
    // The refusal is logged once the reload has ended: nothing changed.
    assert_eq!(
        pools(&server),
        [
            ("added".into(), 2),
            ("kept".into(), 1),
            ("resized".into(), 3)
        ]
    );

    // POST /reload: the same refusal, as a 400.
    let a = server.http("POST", "/reload", &[], "");
    assert_eq!(a.status, 400, "{}", a.body);
    assert_eq!(a.json()["error"], "bad-config");
    assert_eq!(a.json()["message"], start_error.as_str());

    // Fixed, with a changed argv: the pool is replaced by a new one.
    let replaced = edited.replace(
        "name = \"added\"\nargv = [\"@kennel\", \"worker\", \"demo\", \"--warmup\", \"10ms\"]",
        "name = \"added\"\nargv = [\"@kennel\", \"worker\", \"demo\", \"--warmup\", \"20ms\"]",
    );
    assert_ne!(replaced, edited);
    std::fs::write(&server.config, &replaced).unwrap();
    let a = server.http("POST", "/reload", &[], "");
    assert_eq!(a.status, 200, "{}", a.body);
    let done = a.json();
    assert_eq!(
        done["pools"],
        serde_json::json!({"added": {"done": "replaced", "keys": ["argv"]}}),
        "{done}"
    );
    eprintln!("POST /reload: {done}");
}
