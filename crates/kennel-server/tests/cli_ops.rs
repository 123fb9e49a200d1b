//! The operator commands of the `kennel` binary: `kennel status` against a
//! real `kennel serve` (with and without its token), `kennel completions`
//! and `kennel --version`.

mod served;

use std::process::{Command, Output, Stdio};

use served::{LISTEN, Server, Stderr, web_and_batch};

const BEARER: [(&str, &str); 1] = [("Authorization", "Bearer s3cret")];

fn kennel(args: &[&str], envs: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kennel"))
        .args(args)
        .envs(envs.iter().copied())
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

#[test]
fn status_prints_each_pools_counts_and_one_row_per_worker() {
    let server = Server::start(
        "status",
        &web_and_batch("100ms"),
        &LISTEN,
        &[],
        Stderr::Collected,
    );
    server.wait_count("demo", "idle", 2, &[]);
    server.wait_count("batch", "idle", 1, &[]);
    let code = server
        .http("POST", "/pools/demo/jobs", &[], r#"{"iterations": 10}"#)
        .status;
    assert_eq!(code, 200);
    let url = format!("http://{}", server.addr);
    let out = kennel(&["status", "--url", &url], &[]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[0],
        "pool batch: capacity 1, size 1 | starting 0, idle 1, lent 0, waiting 0, kept 0 | healthy"
    );
    let header: Vec<&str> = lines[1]
        .split("  ")
        .filter(|c| !c.trim().is_empty())
        .map(str::trim)
        .collect();
    assert_eq!(
        header,
        [
            "slot",
            "state",
            "pid",
            "gen",
            "jobs",
            "running",
            "warm-up",
            "last job",
            "memory",
            "threads",
            "retire due",
            "keys",
            "about"
        ]
    );
    let demo_at = lines
        .iter()
        .position(|l| l.starts_with("pool demo (group web): capacity 2, size 2 |"))
        .unwrap_or_else(|| panic!("{stdout}"));
    let workers = server.get_json("/pools/demo/workers");
    let rows = &lines[demo_at + 2..demo_at + 4];
    let mut jobs = 0;
    for (row, worker) in rows.iter().zip(workers["workers"].as_array().unwrap()) {
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[0], worker["slot"].to_string(), "{row}");
        assert_eq!(cells[1], "idle", "{row}");
        assert_eq!(cells[2], worker["pid"].to_string(), "{row}");
        jobs += cells[4].parse::<u64>().unwrap();
        // The demo worker's ready line says its pid beside `ready`.
        assert_eq!(
            cells[cells.len() - 1],
            format!("{{\"pid\":{}}}", worker["pid"]),
            "{row}"
        );
    }
    assert_eq!(jobs, 1, "{stdout}");
    assert_eq!(lines.len(), demo_at + 4, "{stdout}");

    // One pool, by name; an unknown one is an error naming the pools.
    let out = kennel(&["status", "--url", &url, "demo"], &[]);
    let stdout = text(&out.stdout);
    assert!(out.status.success());
    assert!(stdout.starts_with("pool demo (group web)"), "{stdout}");
    assert_eq!(stdout.lines().count(), 4, "{stdout}");
    let out = kennel(&["status", "--url", &url, "nope"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr).trim(),
        "kennel: no pool named `nope` (pools: batch, demo)"
    );
    assert!(server.stop());
}

#[test]
fn status_reads_the_address_and_token_from_the_config_and_says_when_it_is_refused() {
    let config = format!(
        "[server]\ntoken_env = \"KENNEL_STATUS_TOKEN\"\n{}",
        web_and_batch("100ms")
    );
    let server = Server::start(
        "status-token",
        &config,
        &LISTEN,
        &[("KENNEL_STATUS_TOKEN", "s3cret")],
        Stderr::Collected,
    );
    server.wait_count("batch", "idle", 1, &BEARER);
    let url = format!("http://{}", server.addr);
    let out = kennel(&["status", "--url", &url], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr).trim(),
        format!("kennel: {url}/pools: HTTP 401 Unauthorized: a valid bearer token is required")
    );
    // The config names the variable, the environment holds the token.
    let path = server.config.clone();
    let path = path.to_str().unwrap();
    let out = kennel(
        &["status", "--url", &url, "--config", path, "batch"],
        &[("KENNEL_STATUS_TOKEN", "s3cret")],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("pool batch: capacity 1"));
    let out = kennel(
        &[
            "status",
            "--url",
            &url,
            "--token-env",
            "OTHER_TOKEN",
            "batch",
        ],
        &[("OTHER_TOKEN", "s3cret")],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(server.stop());
}

#[test]
fn status_of_a_server_that_is_not_there_says_so() {
    // A port nothing listens on, outside the range from which the servers
    // of the other tests take theirs.
    let port = served::free_port();
    let out = kennel(&["status", "--url", &format!("127.0.0.1:{port}")], &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with(&format!("kennel: cannot reach http://127.0.0.1:{port}: "))
            && stderr.contains("(is `kennel serve` running there?)"),
        "{stderr}"
    );
    let out = kennel(&["status", "--url", "https://127.0.0.1:1"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("only http:// URLs"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn completions_are_printed_for_each_shell() {
    for (shell, mark) in [
        ("bash", "complete -F _kennel"),
        ("zsh", "#compdef kennel"),
        ("fish", "complete -c kennel"),
    ] {
        let out = kennel(&["completions", shell], &[]);
        assert!(out.status.success(), "{shell}");
        let script = text(&out.stdout);
        assert!(script.contains(mark), "{shell}: {script}");
        for sub in ["serve", "run", "check", "status", "completions"] {
            assert!(script.contains(sub), "{shell} completes no `{sub}`");
        }
    }
    let out = kennel(&["completions", "tcsh"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("possible values"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn version_names_the_git_revision_it_was_built_from() {
    let out = kennel(&["--version"], &[]);
    assert!(out.status.success());
    let line = text(&out.stdout);
    let version = env!("CARGO_PKG_VERSION");
    let head = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| text(&o.stdout).trim().to_owned());
    match (std::env::var("KENNEL_GIT_REV").ok(), head) {
        (Some(rev), _) => assert_eq!(line.trim(), format!("kennel {version} ({rev})")),
        (None, Some(rev)) => assert_eq!(line.trim(), format!("kennel {version} ({rev})")),
        (None, None) => assert_eq!(line.trim(), format!("kennel {version}")),
    }
}
