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

/// Rewrites the server's config in place as an editor without atomic
/// rename does: truncated, then written a byte at a time. Between bytes the
/// writer waits for one round trip to the server (an editor's pace, with
/// the server answering meanwhile), and every eighth byte it sends SIGHUP,
/// so that reloads land on every kind of half-written file.
fn rewrite_in_place(server: &Server, text: &str) {
    use std::io::Write;
    let mut file = std::fs::File::create(&server.config).unwrap();
    for (i, byte) in text.bytes().enumerate() {
        file.write_all(&[byte]).unwrap();
        if i % 8 == 0 {
            server.signal(Signal::SIGHUP);
        }
        assert_eq!(server.http("GET", "/livez", &[], "").status, 200);
    }
}

#[test]
fn a_file_rewritten_in_place_under_sighups_fails_no_job_of_a_pool_in_every_version() {
    // `steady` comes first with only the keys it needs, the same in every
    // version; `other` changes, goes and comes back.
    let steady = "[[pool]]\nname = \"steady\"\nargv = [\"@kennel\", \"worker\", \"demo\", \"--warmup\", \"0s\"]\n";
    let versions = [
        format!("{SERVER}{steady}{}", demo_pool("other", 1)),
        format!("{SERVER}{steady}{}", demo_pool("other", 2)),
        format!("{SERVER}{steady}"),
        format!(
            "{SERVER}{steady}{}{}",
            demo_pool("other", 1),
            demo_pool("third", 1)
        ),
    ];
    let server = Server::start("reload-in-place", &versions[0], &[], &[], Stderr::Collected);
    let done = std::sync::atomic::AtomicBool::new(false);
    let (ok, failed) = std::thread::scope(|s| {
        let jobs = s.spawn(|| {
            let (mut ok, mut failed) = (0, Vec::new());
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                let a = server.http("POST", "/pools/steady/jobs", &[], r#"{"iterations": 1000}"#);
                if a.status == 200 {
                    ok += 1;
                } else {
                    failed.push(format!("{} {}", a.status, a.body));
                }
            }
            (ok, failed)
        });
        for round in 0..2 {
            for text in versions.iter().skip(usize::from(round == 0)) {
                rewrite_in_place(&server, text);
            }
        }
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        jobs.join().unwrap()
    });
    assert!(
        failed.is_empty(),
        "{} of {} failed: {failed:?}",
        failed.len(),
        ok + failed.len()
    );
    assert!(ok > 0);
    // The last version is applied once the SIGHUPs have been answered.
    server.signal(Signal::SIGHUP);
    server.eventually("the last version is applied", || {
        pools(&server)
            == [
                ("other".into(), 1),
                ("steady".into(), 2),
                ("third".into(), 1),
            ]
    });
}

#[test]
fn an_empty_file_is_refused_and_no_pool_at_all_is_not_ready() {
    let first = format!("{SERVER}{}", demo_pool("demo", 1));
    let server = Server::start("reload-empty", &first, &[], &[], Stderr::Collected);
    std::fs::write(&server.config, "").unwrap();
    server.signal(Signal::SIGHUP);
    server.eventually("the refusal is logged", || {
        server.log().contains("the file has no [[pool]]")
    });
    let a = server.http("POST", "/pools/demo/jobs", &[], "{}");
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(server.http("GET", "/readyz", &[], "").status, 200);

    // Said explicitly: every pool goes, and the service is not ready.
    std::fs::write(&server.config, format!("{SERVER}allow_no_pools = true\n")).unwrap();
    let a = server.http("POST", "/reload", &[], "");
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(
        a.json()["pools"],
        serde_json::json!({"demo": {"done": "removed"}})
    );
    let ready = server.http("GET", "/readyz", &[], "");
    assert_eq!(ready.status, 503, "{}", ready.body);
    assert_eq!(
        ready.json(),
        serde_json::json!({"status": "unavailable", "pools": {}})
    );
}
