//! The packaging files, read as their tools read them: the `Dockerfile`'s
//! stages (a build stage, a run stage that copies the binary from it and
//! runs it as a user that is not root), the `.dockerignore`, the systemd
//! unit's sandboxing, and the README's install line. (`.ci/run` also builds
//! the image when a container engine answers and runs `systemd-analyze
//! verify` on the unit when systemd is there.)

use std::collections::BTreeMap;
use std::path::PathBuf;

fn repo_file(path: &str) -> String {
    let full = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

/// A Dockerfile's instructions: `(KEYWORD, arguments)`, continuation lines
/// joined, comments and blank lines left out.
fn instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if current.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        if let Some(head) = trimmed.strip_suffix('\\') {
            current.push_str(head);
            current.push(' ');
            continue;
        }
        current.push_str(trimmed);
        let (keyword, args) = current
            .split_once(char::is_whitespace)
            .unwrap_or((&current, ""));
        out.push((keyword.to_ascii_uppercase(), args.trim().to_owned()));
        current.clear();
    }
    out
}

/// The stages: name and instructions, in order.
fn stages(text: &str) -> Vec<(String, Vec<(String, String)>)> {
    let mut out: Vec<(String, Vec<(String, String)>)> = Vec::new();
    for (keyword, args) in instructions(text) {
        if keyword == "FROM" {
            let words: Vec<&str> = args.split_whitespace().collect();
            let name = match words.as_slice() {
                [_, as_, name] if as_.eq_ignore_ascii_case("as") => (*name).to_owned(),
                _ => panic!("every stage is named (FROM image AS name): FROM {args}"),
            };
            out.push((name, Vec::new()));
        } else {
            let stage = out
                .last_mut()
                .expect("an instruction before the first FROM");
            stage.1.push((keyword, args));
        }
    }
    out
}

#[test]
fn the_dockerfile_builds_in_one_stage_and_runs_the_binary_alone_as_a_user_in_another() {
    let text = repo_file("Dockerfile");
    let stages = stages(&text);
    assert!(stages.len() >= 2, "a multi-stage build: {stages:?}");
    let (build_name, build) = &stages[0];
    assert!(
        build.iter().any(|(k, a)| k == "RUN"
            && a.contains("cargo build --release")
            && a.contains("--locked")),
        "the build stage builds the release binary from the lock file"
    );
    let (_, run) = stages.last().unwrap();
    let copies: Vec<&String> = run
        .iter()
        .filter(|(k, _)| k == "COPY")
        .map(|(_, a)| a)
        .collect();
    assert!(
        copies
            .iter()
            .any(|a| a.starts_with(&format!("--from={build_name} "))
                && a.ends_with("/usr/local/bin/kennel")),
        "the run stage copies the binary from the build stage: {copies:?}"
    );
    assert!(
        !copies.iter().any(|a| !a.starts_with("--from=")),
        "the run stage takes nothing from the source tree: {copies:?}"
    );
    // The last USER is not root, and it comes before the command.
    let users: Vec<(usize, &String)> = run
        .iter()
        .enumerate()
        .filter(|(_, (k, _))| k == "USER")
        .map(|(i, (_, a))| (i, a))
        .collect();
    let (at, user) = *users.last().expect("the run stage sets a USER");
    let name = user.split(':').next().unwrap();
    assert!(name != "root" && name != "0", "USER {user}");
    let entry = run
        .iter()
        .position(|(k, _)| k == "ENTRYPOINT")
        .expect("an ENTRYPOINT");
    assert!(at < entry, "USER before ENTRYPOINT");
    let entrypoint: Vec<String> =
        serde_json::from_str(&run[entry].1).expect("ENTRYPOINT in exec form");
    assert_eq!(entrypoint.last().unwrap(), "/usr/local/bin/kennel");
    let cmd = run.iter().find(|(k, _)| k == "CMD").expect("a CMD");
    let cmd: Vec<String> = serde_json::from_str(&cmd.1).expect("CMD in exec form");
    assert_eq!(cmd[0], "serve");
    assert!(run.iter().any(|(k, a)| k == "EXPOSE" && a == "7878"));

    let ignore = repo_file(".dockerignore");
    let ignored: Vec<&str> = ignore.lines().map(str::trim).collect();
    for path in ["target", ".git"] {
        assert!(ignored.contains(&path), ".dockerignore leaves out {path}");
    }
}

/// A unit file's keys by section (a key set twice keeps its last value).
fn unit(text: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut section = String::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_owned();
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("not a key: {line}"));
        out.entry(section.clone())
            .or_default()
            .insert(key.trim().to_owned(), value.trim().to_owned());
    }
    out
}

#[test]
fn the_systemd_unit_runs_kennel_serve_sandboxed_reloads_on_sighup_and_stops_it_gracefully() {
    let text = repo_file("deploy/kennel.service");
    let unit = unit(&text);
    let service = &unit["Service"];
    let exec = &service["ExecStart"];
    assert!(
        exec.starts_with("/usr/local/bin/kennel serve --config /etc/kennel/kennel.toml"),
        "{exec}"
    );
    // `systemctl reload` is SIGHUP, which applies the edited config.
    assert_eq!(service["ExecReload"], "/bin/kill -HUP $MAINPID");
    // SIGTERM to kennel alone, which closes the pools; then systemd kills
    // what is left.
    assert_eq!(service["KillMode"], "mixed");
    assert_eq!(service["KillSignal"], "SIGTERM");
    for (key, value) in [
        ("DynamicUser", "yes"),
        ("NoNewPrivileges", "yes"),
        ("CapabilityBoundingSet", ""),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("PrivateDevices", "yes"),
        ("ProtectKernelTunables", "yes"),
        ("ProtectKernelModules", "yes"),
        ("ProtectControlGroups", "yes"),
        ("RestrictNamespaces", "yes"),
        ("RestrictSUIDSGID", "yes"),
        ("LockPersonality", "yes"),
        ("SystemCallArchitectures", "native"),
    ] {
        assert_eq!(
            service.get(key).map(String::as_str),
            Some(value),
            "[Service] {key}"
        );
    }
    assert!(service.contains_key("SystemCallFilter"));
    assert!(service.contains_key("RestrictAddressFamilies"));
    // A worker may run a JIT (Node, PyPy): no MemoryDenyWriteExecute.
    assert!(!service.contains_key("MemoryDenyWriteExecute"));
    assert_eq!(unit["Install"]["WantedBy"], "multi-user.target");
}

#[test]
fn the_readme_says_how_to_install_the_binary() {
    let readme = repo_file("README.md");
    assert!(readme.contains("cargo install --path crates/kennel-server"));
    assert!(readme.contains("target/release/kennel"));
    let service = repo_file("docs/SERVICE.md");
    for needle in ["Dockerfile", "deploy/kennel.service", "kennel completions"] {
        assert!(
            service.contains(needle),
            "docs/SERVICE.md says nothing of {needle}"
        );
    }
}
