//! Config tests: every key is read, every bad value is refused with the file
//! and the key named.

use std::path::PathBuf;
use std::time::Duration;

use kennel::{Dispatch, Options};
use kennel_server::config::{
    Config, ConfigError, EvictionConfig, HumanDuration, HumanSize, LearningConfig, ReadyKind,
    ReconfigBody, SizingConfig, Source, StartupKind,
};

fn source() -> Source {
    Source {
        name: "test.toml".into(),
        dir: PathBuf::from(env!("CARGO_MANIFEST_DIR")),
    }
}

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, &source())
}

fn refused(text: &str) -> ConfigError {
    match parse(text) {
        Ok(c) => panic!("accepted: {c:?}"),
        Err(e) => {
            assert_eq!(e.file, "test.toml");
            e
        }
    }
}

/// A minimal pool, to which a test adds one line.
fn pool_with(line: &str) -> String {
    format!("[[pool]]\nname = \"p\"\nargv = [\"python3\", \"w.py\"]\n{line}\n")
}

fn secs(n: u64) -> HumanDuration {
    HumanDuration(Duration::from_secs(n))
}

#[test]
fn every_key_is_read() {
    let text = r#"
[server]
listen = "127.0.0.1:9000"
body_limit = "2MiB"
token_env = "MY_TOKEN"
shutdown_grace = "3s"

[[pool]]
name = "echo"
argv = ["python3", "examples/workers/echo.py"]
env = { PYTHONUNBUFFERED = "1", MODE = "fast" }
cwd = "src"
group = "echoes"
startup = "leader-first"
sizing = { kind = "fixed", workers = 3 }
eviction = { kind = "idle-timeout", after = "5m", keep = 1 }
dispatch = "round-robin"
ready = "immediate"
job_timeout = "30s"
warmup_timeout = "1m"
max_waiting = 16
max_queue_wait = "2s"
max_lifetime = "1h"
max_lifetime_jitter = "5m"
auto_grow_threshold = 1
job_grace = "10s"
max_surge = 1
max_reply = "4MiB"

[[pool]]
name = "big"
argv = ["./model"]
startup = "ordered-ready"
sizing = { kind = "resources", memory_per_worker = "2GiB" }

[[pool]]
name = "climb"
argv = ["./model"]
sizing = { kind = "hill-climbing", memory_per_worker = "512MiB" }

[[pool]]
name = "grad"
argv = ["./model"]
sizing = { kind = "gradient", memory_per_worker = 1048576 }
"#;
    let c = parse(text).unwrap();
    assert_eq!(c.server.listen, "127.0.0.1:9000");
    assert_eq!(c.listen(), "127.0.0.1:9000".parse().unwrap());
    assert_eq!(c.server.body_limit, HumanSize(2 * 1024 * 1024));
    assert_eq!(c.server.token_env.as_deref(), Some("MY_TOKEN"));
    assert_eq!(c.server.shutdown_grace, secs(3));
    assert_eq!(c.pools.len(), 4);
    let p = &c.pools[0];
    assert_eq!(p.name, "echo");
    assert_eq!(p.argv, ["python3", "examples/workers/echo.py"]);
    assert_eq!(p.env.get("PYTHONUNBUFFERED").map(String::as_str), Some("1"));
    assert_eq!(p.env.get("MODE").map(String::as_str), Some("fast"));
    // A relative cwd is resolved from the config file's directory.
    assert_eq!(
        p.cwd.as_deref(),
        Some(
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("src")
                .as_path()
        )
    );
    assert_eq!(p.group.as_deref(), Some("echoes"));
    assert_eq!(p.startup, StartupKind::LeaderFirst);
    assert_eq!(p.sizing, Some(SizingConfig::Fixed { workers: 3 }));
    assert_eq!(
        p.eviction,
        EvictionConfig::IdleTimeout {
            after: secs(300),
            keep: 1
        }
    );
    assert_eq!(p.ready, ReadyKind::Immediate);
    let o = &p.options;
    assert_eq!(o.dispatch, Dispatch::RoundRobin);
    assert_eq!(o.job_timeout, Some(secs(30).0));
    assert_eq!(o.warmup_timeout, Some(secs(60).0));
    assert_eq!(o.max_waiting, Some(16));
    assert_eq!(o.max_queue_wait, Some(secs(2).0));
    assert_eq!(o.max_lifetime, Some(secs(3600).0));
    assert_eq!(o.max_lifetime_jitter, secs(300).0);
    assert_eq!(o.auto_grow_threshold, Some(1));
    assert_eq!(o.job_grace, secs(10).0);
    assert_eq!(o.max_surge, 1);
    assert_eq!(p.max_reply, Some(HumanSize(4 * 1024 * 1024)));
    let q = &c.pools[1];
    assert_eq!(q.startup, StartupKind::OrderedReady);
    assert_eq!(
        q.sizing,
        Some(SizingConfig::Resources {
            memory_per_worker: HumanSize(2 * 1024 * 1024 * 1024)
        })
    );
    assert_eq!(
        c.pools[2].sizing,
        Some(SizingConfig::HillClimbing {
            memory_per_worker: HumanSize(512 * 1024 * 1024),
            learning: LearningConfig::default(),
        })
    );
    assert_eq!(
        c.pools[3].sizing,
        Some(SizingConfig::Gradient {
            memory_per_worker: HumanSize(1024 * 1024),
            learning: LearningConfig::default(),
        })
    );
}

#[test]
fn defaults_are_safe() {
    let c = parse(&pool_with("")).unwrap();
    assert_eq!(c.listen(), "127.0.0.1:7878".parse().unwrap());
    assert_eq!(c.server.body_limit, HumanSize(1024 * 1024));
    assert_eq!(c.server.token_env, None);
    assert_eq!(c.server.shutdown_grace, secs(10));
    let p = &c.pools[0];
    assert_eq!(p.startup, StartupKind::OnDemand);
    assert_eq!(p.sizing, None);
    assert_eq!(p.eviction, EvictionConfig::None);
    assert_eq!(p.options, Options::default());
    assert_eq!(p.group, None);
    // An empty file is a config with no pool (the service answers 501).
    assert!(parse("").unwrap().pools.is_empty());
}

#[test]
fn listen_takes_humane_forms() {
    for (given, want) in [
        ("127.0.0.1", "127.0.0.1:7878"),
        ("localhost", "127.0.0.1:7878"),
        ("localhost:9001", "127.0.0.1:9001"),
        ("[::1]:80", "[::1]:80"),
        ("0.0.0.0:0", "0.0.0.0:0"),
    ] {
        let c = parse(&format!("[server]\nlisten = \"{given}\"\n")).unwrap();
        assert_eq!(c.listen(), want.parse().unwrap(), "{given}");
    }
}

#[test]
fn sizes_and_durations_read_humane_units() {
    for (given, want) in [
        ("\"512KiB\"", 512 * 1024),
        ("\"1 MB\"", 1_000_000),
        ("4096", 4096),
    ] {
        let c = parse(&format!("[server]\nbody_limit = {given}\n")).unwrap();
        assert_eq!(c.server.body_limit, HumanSize(want), "{given}");
    }
    for (given, want) in [
        ("500ms", Duration::from_millis(500)),
        ("1h 30m", Duration::from_secs(5400)),
        ("2days", Duration::from_secs(2 * 86400)),
    ] {
        let c = parse(&pool_with(&format!("job_timeout = \"{given}\""))).unwrap();
        assert_eq!(c.pools[0].options.job_timeout, Some(want), "{given}");
    }
}

/// Each bad value, the key the error must name, and a word of what is
/// allowed.
#[test]
fn each_bad_value_is_refused_with_its_key() {
    let cases: &[(&str, &str, &str)] = &[
        // Unknown keys, anywhere.
        ("[server]\nport = 1\n", "server.port", "expected one of"),
        ("colour = 1\n", "colour", "expected `server` or `pool`"),
        (
            &pool_with("job_timeut = \"1s\""),
            "pool[0].job_timeut",
            "job_timeout",
        ),
        (
            &pool_with("sizing = { kind = \"fixed\", workers = 2, extra = 1 }"),
            "pool[0].sizing.extra",
            "expected one of",
        ),
        (
            &pool_with("eviction = { kind = \"idle-timeout\", after = \"1m\", keeep = 1 }"),
            "pool[0].eviction.keeep",
            "expected one of",
        ),
        (&pool_with("max_surge = 65"), "pool[0].max_surge", "0 to 64"),
        // Server values.
        (
            "[server]\nlisten = \"nowhere\"\n",
            "server.listen",
            "IP:PORT",
        ),
        (
            "[server]\nbody_limit = \"2 parsecs\"\n",
            "server.body_limit",
            "2GiB",
        ),
        (
            "[server]\nbody_limit = 0\n",
            "server.body_limit",
            "1 byte to 1 GiB",
        ),
        (
            "[server]\nbody_limit = \"2GiB\"\n",
            "server.body_limit",
            "1 byte to 1 GiB",
        ),
        (
            "[server]\ntoken_env = \"\"\n",
            "server.token_env",
            "non-empty",
        ),
        (
            "[server]\nshutdown_grace = \"soon\"\n",
            "server.shutdown_grace",
            "30s",
        ),
        (
            "[server]\nshutdown_grace = 10\n",
            "server.shutdown_grace",
            "no unit",
        ),
        (
            "[server]\nshutdown_grace = \"30days\"\n",
            "server.shutdown_grace",
            "0 to",
        ),
        // Pool identity.
        ("[[pool]]\nargv = [\"x\"]\n", "pool[0]", "name"),
        ("[[pool]]\nname = \"p\"\n", "pool[0]", "argv"),
        (
            &pool_with("").replace("name = \"p\"", "name = \"a b\""),
            "pool[0].name",
            "letters",
        ),
        (
            &format!("{}{}", pool_with(""), pool_with("")),
            "pool[1].name",
            "no other pool",
        ),
        (
            "[[pool]]\nname = \"p\"\nargv = []\n",
            "pool[0].argv",
            "program",
        ),
        (
            &pool_with("cwd = \"no/such/dir\""),
            "pool[0].cwd",
            "existing directory",
        ),
        (&pool_with("group = \"\""), "pool[0].group", "letters"),
        (
            &pool_with("env = { \"A=B\" = \"1\" }"),
            "pool[0].env.A=B",
            "without '='",
        ),
        (&pool_with("env = { A = 1 }"), "pool[0].env.A", "string"),
        // Policies.
        (
            &pool_with("startup = \"eager\""),
            "pool[0].startup",
            "parallel",
        ),
        (
            &pool_with("sizing = { kind = \"fixd\", workers = 2 }"),
            "pool[0].sizing.kind",
            "fixed",
        ),
        (
            &pool_with("sizing = { kind = \"fixed\", workers = 0 }"),
            "pool[0].sizing.workers",
            "1 to 1024",
        ),
        (
            &pool_with("sizing = { kind = \"fixed\", workers = 5000 }"),
            "pool[0].sizing.workers",
            "1 to 1024",
        ),
        (
            &pool_with("sizing = { kind = \"fixed\" }"),
            "pool[0].sizing",
            "needs `workers`",
        ),
        (
            &pool_with("sizing = { kind = \"fixed\", workers = 1, memory_per_worker = 1 }"),
            "pool[0].sizing",
            "does not apply",
        ),
        (
            &pool_with("sizing = { kind = \"resources\" }"),
            "pool[0].sizing",
            "needs `memory_per_worker`",
        ),
        (
            &pool_with("sizing = { kind = \"gradient\" }"),
            "pool[0].sizing",
            "needs `memory_per_worker`",
        ),
        (
            &pool_with("sizing = { kind = \"hill-climbing\", workers = 2 }"),
            "pool[0].sizing",
            "does not apply",
        ),
        (
            &pool_with("sizing = { kind = \"fixed\", workers = \"two\" }"),
            "pool[0].sizing.workers",
            "expected usize",
        ),
        (
            &pool_with("eviction = { kind = \"idle-timeout\" }"),
            "pool[0].eviction",
            "needs `after`",
        ),
        (
            &pool_with("eviction = { kind = \"none\", after = \"1m\" }"),
            "pool[0].eviction",
            "do not apply",
        ),
        (
            &pool_with("eviction = { kind = \"idle-timeout\", after = \"soon\" }"),
            "pool[0].eviction.after",
            "5m",
        ),
        (
            &pool_with("sizing = { kind = \"resources\", memory_per_worker = \"lots\" }"),
            "pool[0].sizing.memory_per_worker",
            "2GiB",
        ),
        (
            &pool_with("sizing = { kind = \"resources\", memory_per_worker = 0 }"),
            "pool[0].sizing.memory_per_worker",
            "1 byte or more",
        ),
        (
            &pool_with("eviction = { kind = \"lru\" }"),
            "pool[0].eviction.kind",
            "idle-timeout",
        ),
        (
            &pool_with("eviction = { kind = \"idle-timeout\", after = \"0s\" }"),
            "pool[0].eviction.after",
            "above 0",
        ),
        (
            &pool_with("eviction = { kind = \"idle-timeout\", after = \"30days\" }"),
            "pool[0].eviction.after",
            "at most",
        ),
        (
            &pool_with("dispatch = \"random\""),
            "pool[0].dispatch",
            "round-robin",
        ),
        (
            &pool_with("ready = \"never\""),
            "pool[0].ready",
            "immediate",
        ),
        // Limits.
        (
            &pool_with("job_timeout = \"0s\""),
            "pool[0].job_timeout",
            "above 0",
        ),
        (
            &pool_with("job_timeout = \"5 fortnights\""),
            "pool[0].job_timeout",
            "30s",
        ),
        (
            &pool_with("warmup_timeout = \"30days\""),
            "pool[0].warmup_timeout",
            "at most",
        ),
        (
            &pool_with("max_waiting = -1"),
            "pool[0].max_waiting",
            "integer",
        ),
        (
            &pool_with("max_waiting = 2000000"),
            "pool[0].max_waiting",
            "0 to 1000000",
        ),
        (
            &pool_with("max_queue_wait = \"0ms\""),
            "pool[0].max_queue_wait",
            "above 0",
        ),
        (
            &pool_with("max_lifetime = \"0s\""),
            "pool[0].max_lifetime",
            "above 0",
        ),
        (
            &pool_with("max_lifetime_jitter = \"1m\""),
            "pool[0].max_lifetime_jitter",
            "(allowed: 0 when no max_lifetime is set)",
        ),
        (
            &pool_with("max_lifetime = \"1m\"\nmax_lifetime_jitter = \"1m\""),
            "pool[0].max_lifetime_jitter",
            "(allowed: 0 up to below max_lifetime)",
        ),
        (
            &pool_with("sizing = { kind = \"fixed\", workers = 2 }\nauto_grow_threshold = 2"),
            "pool[0].auto_grow_threshold",
            "0 to 1",
        ),
        (
            &pool_with("job_grace = \"30days\""),
            "pool[0].job_grace",
            "(allowed: at most 2147483647 ms)",
        ),
        (&pool_with("max_reply = 0"), "pool[0].max_reply", "1 byte"),
    ];
    for (text, key, allowed) in cases {
        let e = refused(text);
        assert_eq!(e.key, *key, "wrong key for:\n{text}\n{e}");
        assert!(
            e.message.contains(allowed),
            "message for {key} does not say {allowed:?}: {}",
            e.message
        );
        let shown = e.to_string();
        assert!(shown.starts_with("test.toml"), "{shown}");
        assert!(shown.contains(key), "{shown}");
    }
}

#[test]
fn a_syntax_error_names_the_line() {
    let e = refused("[server]\nlisten = \n");
    assert_eq!(e.line.map(|l| l.0), Some(2), "{e}");
    assert!(e.to_string().starts_with("test.toml:2:"), "{e}");
}

#[test]
fn a_type_error_names_the_line() {
    let e = refused("[server]\n\nbody_limit = true\n");
    assert_eq!(e.key, "server.body_limit");
    assert_eq!(e.line.map(|l| l.0), Some(3), "{e}");
}

#[test]
fn load_names_the_file_and_resolves_cwd_from_it() {
    let dir = std::env::temp_dir().join(format!("kennel-config-test-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("workers")).unwrap();
    let path = dir.join("kennel.toml");
    std::fs::write(&path, pool_with("cwd = \"workers\"")).unwrap();
    let c = Config::load(&path).unwrap();
    assert_eq!(
        c.pools[0].cwd.as_deref(),
        Some(dir.join("workers").as_path())
    );
    std::fs::write(&path, pool_with("startup = 3")).unwrap();
    let e = Config::load(&path).unwrap_err();
    assert_eq!(e.file, path.display().to_string());
    assert_eq!(e.key, "pool[0].startup");
    let e = Config::load(&dir.join("missing.toml")).unwrap_err();
    assert!(e.message.contains("cannot read"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_demo_config_is_valid() {
    let c = Config::demo();
    assert_eq!(c.pools.len(), 1);
    assert_eq!(c.pools[0].name, "demo");
    assert_eq!(c.pools[0].argv[0], "@kennel");
    // It round-trips through TOML and passes the same checks as a file.
    let text = toml::to_string(&c).unwrap();
    let again = parse(&text).unwrap();
    assert_eq!(again.pools[0].sizing, c.pools[0].sizing);
    assert_eq!(again.pools[0].eviction, c.pools[0].eviction);
}

#[test]
fn reconfig_bodies_name_their_keys() {
    let live = Options::default();
    let b = ReconfigBody::from_json(
        br#"{"sizing":{"kind":"fixed","workers":3},"job_timeout":null,"max_waiting":4,
            "eviction":{"kind":"idle-timeout","after":"1m"},"group":"g","max_lifetime":"1h",
            "max_lifetime_jitter":"1m","auto_grow_threshold":1,"warmup_timeout":"5s",
            "max_queue_wait":"1s","job_grace":"2s","dispatch":"round-robin"}"#,
        &live,
    )
    .unwrap();
    assert_eq!(b.sizing, Some(SizingConfig::Fixed { workers: 3 }));
    assert_eq!(
        b.eviction,
        Some(EvictionConfig::IdleTimeout {
            after: secs(60),
            keep: 0
        })
    );
    assert_eq!(b.group, Some(Some("g".into())));
    let o = &b.options;
    assert_eq!(o.job_timeout, None);
    assert_eq!(o.warmup_timeout, Some(secs(5).0));
    assert_eq!(o.max_waiting, Some(4));
    assert_eq!(o.max_queue_wait, Some(secs(1).0));
    assert_eq!(o.max_lifetime, Some(secs(3600).0));
    assert_eq!(o.max_lifetime_jitter, secs(60).0);
    assert_eq!(o.auto_grow_threshold, Some(1));
    assert_eq!(o.job_grace, secs(2).0);
    assert_eq!(o.dispatch, Dispatch::RoundRobin);

    // An empty body changes nothing.
    let none = ReconfigBody::from_json(b"{}", &live).unwrap();
    assert_eq!(
        (none.sizing, none.eviction, none.group, &none.options),
        (None, None, None, &live)
    );

    // A merge patch of the live options: a key left out keeps its live
    // value, `null` sets it back to its default.
    let mut live = Options::default();
    live.job_timeout = Some(secs(30).0);
    live.max_waiting = Some(7);
    live.job_grace = secs(1).0;
    let b = ReconfigBody::from_json(br#"{"max_waiting":null,"job_grace":null}"#, &live).unwrap();
    assert_eq!(b.options.job_timeout, Some(secs(30).0));
    assert_eq!(b.options.max_waiting, None);
    assert_eq!(b.options.job_grace, Options::default().job_grace);
    // A null group leaves the pool's group; a null sizing keeps the sizing.
    let b = ReconfigBody::from_json(br#"{"group":null,"sizing":null}"#, &live).unwrap();
    assert_eq!((b.group, b.sizing), (Some(None), None));
    // The jitter is checked against the live lifetime.
    live.max_lifetime = Some(secs(60).0);
    let e = ReconfigBody::from_json(br#"{"max_lifetime_jitter":"2m"}"#, &live).unwrap_err();
    assert_eq!(e.key, "max_lifetime_jitter");

    let live = Options::default();
    for (body, key, message) in [
        (
            &br#"{"name":"x"}"#[..],
            "name",
            "unknown field `name`, expected one of `sizing`, `eviction`, `group`, `job_timeout`, `job_kill_after`, `cancel_grace`, `progress_extends_timeout`, `warmup_timeout`, `max_waiting`, `max_queue_wait`, `job_grace`, `dispatch`, `max_lifetime`, `max_lifetime_jitter`, `auto_grow_threshold`, `break_after_failed_starts`, `retry_on_crash`, `max_jobs`, `max_jobs_jitter`, `min_idle`, `slow_job`, `max_memory`, `memory_check_every`, `probe_every`, `probe_timeout`, `probe_on_lend`, `max_surge`, `replace_on_resize`",
        ),
        (
            br#"{"sizing":{"kind":"fixed","workers":0}}"#,
            "sizing.workers",
            "0 is out of range (allowed: 1 to 1024)",
        ),
        (
            br#"{"job_timeout":"0s"}"#,
            "job_timeout",
            "0ns is out of range (allowed: above 0 and at most 2147483647 ms)",
        ),
        (
            br#"{"job_timeout":5}"#,
            "job_timeout",
            "a bare number (5) has no unit (allowed: a number with a unit, such as \"500ms\", \"30s\", \"5m\", \"1h 30m\")",
        ),
        (
            br#"{"eviction":{"kind":"idle-timeout","after":"x"}}"#,
            "eviction.after",
            "invalid duration \"x\": expected number at 0 (allowed: a number with a unit, such as \"500ms\", \"30s\", \"5m\", \"1h 30m\")",
        ),
        (
            br#"{"eviction":{"kind":"idle-timeout","after":"0s"}}"#,
            "eviction.after",
            "0ns is out of range (allowed: above 0 and at most 2147483647 ms)",
        ),
        (
            br#"{"max_lifetime":"1m","max_lifetime_jitter":"2m"}"#,
            "max_lifetime_jitter",
            "120s is not below max_lifetime 60s (allowed: 0 up to below max_lifetime)",
        ),
        (
            br#"{"group":"a b"}"#,
            "group",
            "\"a b\" is not a name (allowed: 1 to 64 ASCII letters, digits, '-', '_' or '.', other than \".\" and \"..\")",
        ),
        (
            br#"[{"job_timeout":"1s"}]"#,
            "",
            "the body is an array (allowed: a JSON object of the keys to change, such as {\"job_timeout\": \"10s\"})",
        ),
    ] {
        let e = ReconfigBody::from_json(body, &live).unwrap_err();
        assert_eq!((e.key.as_str(), e.message.as_str()), (key, message), "{e}");
        assert_eq!(e.file, "<request>");
    }
}

#[test]
fn the_token_is_read_from_the_variable_named() {
    let c = parse("[server]\ntoken_env = \"PATH\"\n").unwrap();
    assert_eq!(c.server.token().unwrap(), std::env::var("PATH").ok());
    let c = parse("[server]\ntoken_env = \"KENNEL_TEST_NO_SUCH_VARIABLE\"\n").unwrap();
    let e = c.server.token().unwrap_err();
    assert!(e.contains("server.token_env"), "{e}");
    assert!(e.contains("KENNEL_TEST_NO_SUCH_VARIABLE is not set"), "{e}");
    assert_eq!(parse("").unwrap().server.token().unwrap(), None);
}

/// Fuzz-style: every one-character deletion, and a few insertions, of a full
/// config parse or refuse, never panic, and a refusal always names the file.
#[test]
fn mangled_configs_never_panic() {
    let text = r#"[server]
listen = "127.0.0.1:9000"
body_limit = "2MiB"
shutdown_grace = "3s"
[[pool]]
name = "echo"
argv = ["python3", "w.py"]
env = { A = "1" }
group = "g"
startup = "parallel"
sizing = { kind = "fixed", workers = 3 }
eviction = { kind = "idle-timeout", after = "5m", keep = 1 }
job_timeout = "30s"
max_waiting = 16
max_lifetime = "1h"
max_lifetime_jitter = "5m"
"#;
    let chars: Vec<char> = text.chars().collect();
    let mut refused = 0;
    for i in 0..chars.len() {
        let mut variants = vec![chars[..i].iter().chain(&chars[i + 1..]).collect::<String>()];
        for junk in ['"', '[', '=', '0', '\n', 'é'] {
            let mut v = chars.clone();
            v.insert(i, junk);
            variants.push(v.into_iter().collect());
        }
        for v in variants {
            if let Err(e) = parse(&v) {
                refused += 1;
                assert_eq!(e.file, "test.toml");
                assert!(!e.message.is_empty());
            }
        }
    }
    assert!(refused > chars.len(), "most mangled configs are refused");
}

/// kennel's options sit beside the pool's own keys; a bad one, or an
/// unknown key, is named at its key and its line all the same.
#[test]
fn a_pool_option_is_refused_at_its_key_and_line() {
    let duration = r#"(allowed: a number with a unit, such as "500ms", "30s", "5m", "1h 30m")"#;
    for (line, shown) in [
        (
            r#"job_timeout = "5x""#,
            format!(
                r#"test.toml:4:15: `pool[0].job_timeout`: invalid duration "5x": unknown time unit "x", supported units: ns, us/µs, ms, sec, min, hours, days, weeks, months, years (and few variations) {duration}"#
            ),
        ),
        (
            r#"job_timeut = "1s""#,
            "test.toml:4:1: `pool[0].job_timeut`: unknown field `job_timeut`, expected one of `name`, `argv`, `env`, `env_clear`, `env_keep`, `worker_close_grace`, `cwd`, `group`, `startup`, `sizing`, `eviction`, `ready`, `max_reply`, `protocol`, `cancel_lines`, `method`, `initialize`, `upload_limit`, `probe_request`, `threads`, `pin`, `queue`, `job_timeout`, `job_kill_after`, `cancel_grace`, `progress_extends_timeout`, `warmup_timeout`, `max_waiting`, `max_queue_wait`, `job_grace`, `dispatch`, `max_lifetime`, `max_lifetime_jitter`, `auto_grow_threshold`, `break_after_failed_starts`, `retry_on_crash`, `max_jobs`, `max_jobs_jitter`, `min_idle`, `slow_job`, `max_memory`, `memory_check_every`, `probe_every`, `probe_timeout`, `probe_on_lend`, `max_surge`, `replace_on_resize`".to_owned(),
        ),
        (
            "max_waiting = -1",
            "test.toml:4:15: `pool[0].max_waiting`: invalid value: integer `-1`, expected usize"
                .to_owned(),
        ),
        (
            r#"dispatch = "random""#,
            "test.toml:4:12: `pool[0].dispatch`: unknown variant `random`, expected `lowest-slot` or `round-robin`".to_owned(),
        ),
        (
            "threads = 0",
            r#"test.toml:4:11: `pool[0].threads`: 0 is out of range (allowed: "auto", "off" or a number of threads from 1 to 1024)"#.to_owned(),
        ),
        (
            r#"threads = "all""#,
            r#"test.toml:4:11: `pool[0].threads`: invalid value "all" (allowed: "auto", "off" or a number of threads from 1 to 1024)"#.to_owned(),
        ),
        (
            "warmup_timeout = 10",
            format!(
                "test.toml:4:18: `pool[0].warmup_timeout`: a bare number (10) has no unit {duration}"
            ),
        ),
    ] {
        assert_eq!(refused(&pool_with(line)).to_string(), shown, "{line}");
    }
}

#[test]
fn a_learning_sizing_takes_its_window_pause_and_seed_each_range_named_at_its_key() {
    let hill = "sizing = { kind = \"hill-climbing\", memory_per_worker = \"1GiB\"";
    let config = parse(&pool_with(&format!(
        "{hill}, window_jobs = 5, window_time = \"500ms\", quick_windows = false, min_pause = 2, max_pause = 8, seed = 7 }}\npin = true"
    )))
    .expect("accepted");
    let pool = &config.pools[0];
    assert!(pool.pin);
    let Some(SizingConfig::HillClimbing { learning, .. }) = pool.sizing else {
        panic!("{:?}", pool.sizing);
    };
    assert_eq!(
        learning,
        LearningConfig {
            window_jobs: Some(5),
            window_time: Some(HumanDuration(Duration::from_millis(500))),
            quick_windows: Some(false),
            min_pause: Some(2),
            max_pause: Some(8),
            seed: Some(7),
        }
    );
    // Written back as read (GET config), and built.
    let json = serde_json::to_value(pool.sizing.unwrap()).unwrap();
    assert_eq!(json["window_time"], "500ms");
    assert_eq!(json["seed"], 7);
    assert!(!parse(&pool_with("pin = false")).unwrap().pools[0].pin);

    let gradient = "sizing = { kind = \"gradient\", memory_per_worker = \"1GiB\"";
    for (line, key, allowed) in [
        (
            format!("{hill}, window_jobs = 0 }}"),
            "pool[0].sizing.window_jobs",
            "(allowed: 1 to 10000 jobs)",
        ),
        (
            format!("{gradient}, window_jobs = 10001 }}"),
            "pool[0].sizing.window_jobs",
            "(allowed: 1 to 10000 jobs)",
        ),
        (
            format!("{hill}, window_time = \"1ms\" }}"),
            "pool[0].sizing.window_time",
            "(allowed: 10ms to 10m)",
        ),
        (
            format!("{hill}, window_time = \"1h\" }}"),
            "pool[0].sizing.window_time",
            "(allowed: 10ms to 10m)",
        ),
        (
            format!("{hill}, window_time = 2 }}"),
            "pool[0].sizing.window_time",
            "no unit",
        ),
        (
            format!("{hill}, min_pause = 0 }}"),
            "pool[0].sizing.min_pause",
            "(allowed: 1 to 1024 windows)",
        ),
        (
            format!("{gradient}, max_pause = 2000 }}"),
            "pool[0].sizing.max_pause",
            "(allowed: 1 to 1024 windows)",
        ),
        (
            format!("{hill}, min_pause = 32 }}"),
            "pool[0].sizing.min_pause",
            "longer than max_pause, 16 (the default) (allowed: at most max_pause)",
        ),
        (
            format!("{hill}, min_pause = 4, max_pause = 2 }}"),
            "pool[0].sizing.min_pause",
            "(allowed: at most max_pause)",
        ),
        (
            format!("{hill}, seed = -1 }}"),
            "pool[0].sizing.seed",
            "(allowed: 0 to 9223372036854775807)",
        ),
        (
            format!("{hill}, quick_windows = 1 }}"),
            "pool[0].sizing.quick_windows",
            "expected a boolean",
        ),
        (
            "sizing = { kind = \"fixed\", workers = 2, seed = 1 }".to_owned(),
            "pool[0].sizing",
            "`seed` does not apply to kind \"fixed\" (allowed: with kind \"hill-climbing\" or \"gradient\")",
        ),
        (
            "sizing = { kind = \"resources\", memory_per_worker = 1, window_jobs = 3 }".to_owned(),
            "pool[0].sizing",
            "`window_jobs` does not apply to kind \"resources\"",
        ),
        (
            "pin = \"yes\"".to_owned(),
            "pool[0].pin",
            "expected a boolean",
        ),
    ] {
        let e = refused(&pool_with(&line));
        assert_eq!(e.key, key, "wrong key for {line}: {e}");
        assert!(e.message.contains(allowed), "{line}: {}", e.message);
    }
}

#[test]
fn a_table_given_as_a_list_is_refused_never_filled_by_position() {
    for (text, key) in [
        (pool_with("sizing = [\"fixed\", 3]"), "pool[0].sizing"),
        (
            pool_with("eviction = [\"idle-timeout\", \"5m\", 1]"),
            "pool[0].eviction",
        ),
        ("server = [\"127.0.0.1:1\"]\n".to_owned(), "server"),
    ] {
        let e = refused(&text);
        assert_eq!(e.key, key, "{e}");
        assert!(e.message.contains("expected a table"), "{e}");
    }
    let live = kennel::Options::default();
    let e = ReconfigBody::from_json(br#"{"sizing": ["fixed", 3]}"#, &live).unwrap_err();
    assert_eq!(e.key, "sizing", "{e}");
    assert!(e.message.contains("expected a table"), "{e}");
}

#[test]
fn names_no_path_can_reach_are_refused() {
    for name in [".", ".."] {
        let e = refused(&format!("[[pool]]\nname = \"{name}\"\nargv = [\"cat\"]\n"));
        assert_eq!(e.key, "pool[0].name", "{e}");
        let e = refused(&pool_with(&format!("group = \"{name}\"")));
        assert_eq!(e.key, "pool[0].group", "{e}");
    }
    assert!(parse(&pool_with("group = \"a.b\"")).is_ok());
}

#[test]
fn close_grace_is_refused_naming_its_two_successors() {
    let e = refused(&pool_with("close_grace = \"5s\""));
    assert_eq!(e.key, "pool[0].close_grace");
    assert!(
        e.message.contains("`job_grace`") && e.message.contains("`worker_close_grace`"),
        "{e}"
    );
    let c = parse(&pool_with(
        "job_grace = \"7s\"\nworker_close_grace = \"2s\"",
    ))
    .unwrap();
    assert_eq!(c.pools[0].options.job_grace, secs(7).0);
    assert_eq!(c.pools[0].worker_close_grace, secs(2));
}

#[test]
fn the_token_variable_never_goes_to_a_worker() {
    let server = "[server]\ntoken_env = \"TOK\"\n";
    let c = parse(&format!("{server}{}", pool_with(""))).unwrap();
    assert_eq!(c.pools[0].env_remove, ["TOK"]);
    let e = refused(&format!("{server}{}", pool_with("env = { TOK = \"x\" }")));
    assert_eq!(e.key, "pool[0].env.TOK", "{e}");
    let e = refused(&format!(
        "{server}{}",
        pool_with("env_clear = true\nenv_keep = [\"PATH\", \"TOK\"]")
    ));
    assert_eq!(e.key, "pool[0].env_keep", "{e}");
    let e = refused(&pool_with("env_keep = [\"PATH\"]"));
    assert!(e.message.contains("env_clear = true"), "{e}");
}

#[test]
fn the_http_keys_are_checked_naming_their_range() {
    for (line, key, words) in [
        (
            "header_timeout = \"0s\"",
            "server.header_timeout",
            "allowed: 1ms to",
        ),
        (
            "max_connections = 0",
            "server.max_connections",
            "allowed: 1 to 1000000",
        ),
        (
            "max_bodies = 20000",
            "server.max_bodies",
            "allowed: 1 to 10000",
        ),
        (
            "allowed_hosts = [\"http://x\"]",
            "server.allowed_hosts[0]",
            "not a host",
        ),
        (
            "allowed_origins = [\"dash.example\"]",
            "server.allowed_origins[0]",
            "not an origin",
        ),
        (
            "histogram_buckets = [1, 0.5]",
            "server.histogram_buckets",
            "increasing order",
        ),
        (
            "histogram_buckets = []",
            "server.histogram_buckets",
            "0 bound(s)",
        ),
        (
            "log_format = \"xml\"",
            "server.log_format",
            "unknown variant",
        ),
    ] {
        let e = refused(&format!("[server]\n{line}\n"));
        assert_eq!(e.key, key, "{e}");
        assert!(e.message.contains(words), "{e}");
    }
}
