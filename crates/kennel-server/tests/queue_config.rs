//! `[pool.queue]` in the TOML file: its defaults, and refusals that name
//! the key and what is allowed; a server that cannot reach NATS refuses to
//! start and says which key.

mod support;

use std::process::Command;

use kennel_server::{Config, Source};

fn parse(queue: &str) -> Result<Config, String> {
    let text = format!("[[pool]]\nname = \"echo\"\nargv = [\"cat\"]\n\n[pool.queue]\n{queue}\n");
    Config::parse(&text, &Source::inline("test.toml")).map_err(|e| e.to_string())
}

const REQUIRED: &str =
    "nats = \"nats://127.0.0.1:4222\"\nstream = \"JOBS\"\nsubject = \"jobs.echo\"";

#[test]
fn a_bad_queue_key_is_refused_at_its_key_with_what_is_allowed() {
    let cases = [
        (
            format!("{REQUIRED}\nack_wait = \"5x\""),
            "`pool[0].queue.ack_wait`: invalid duration \"5x\"",
        ),
        (
            format!("{REQUIRED}\nackwait = \"5s\""),
            "`pool[0].queue.ackwait`: unknown field `ackwait`, did you mean `ack_wait`? (expected one of `nats`, `stream`, `subject`, `durable`, `ack_wait`",
        ),
        (
            format!("{REQUIRED}\nmax_deliver = 0"),
            "`pool[0].queue.max_deliver`: 0 is out of range (allowed: 1 to 100)",
        ),
        (
            format!("{REQUIRED}\nack_wait = \"100ms\""),
            "`pool[0].queue.ack_wait`: 100ms is out of range (allowed: 1s to 12h)",
        ),
        (
            "nats = \"nats://127.0.0.1:4222\"\nsubject = \"jobs.echo\"".to_owned(),
            "missing field `stream`",
        ),
        (
            "nats = \"nats://127.0.0.1:4222\"\nstream = \"JOBS\"\nsubject = \"jobs.*\"".to_owned(),
            "`pool[0].queue.subject`: \"jobs.*\" is not a subject to publish to",
        ),
        (
            format!("{REQUIRED}\ncreds_file = \"no-such.creds\""),
            "`pool[0].queue.creds_file`: ./no-such.creds is not a file",
        ),
    ];
    for (queue, expected) in cases {
        let err = parse(&queue).unwrap_err();
        assert!(
            err.contains(expected),
            "{queue:?}:\n  got {err}\n  expected {expected}"
        );
    }
}

#[test]
fn a_server_that_cannot_reach_nats_refuses_to_start_naming_the_key() {
    let dir = support::TempDir::new("nonats");
    let port = support::free_port();
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nrun_dir = {:?}\n\n{}",
        dir.0.join("run"),
        support::queued_pool(&format!("nats://127.0.0.1:{port}"), 1, "")
    );
    let path = dir.0.join("k.toml");
    std::fs::write(&path, config).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kennel"))
        .args(["serve", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot start a queue: `pool[0].queue.nats` (\"q\"): cannot connect to nats://127.0.0.1:"),
        "{stderr}"
    );
}
