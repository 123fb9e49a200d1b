//! What a good config reads as: every key, the defaults, the humane forms
//! of addresses, sizes and durations, a file loaded (its cwd resolved from
//! it), the built-in demo config, the token read from the variable named.

use std::path::PathBuf;
use std::time::Duration;

use crate::config::human::HumanSize;
use crate::config::learning::LearningConfig;
use crate::config::{Config, EvictionConfig, ReadyKind, SizingConfig, StartupKind};
use kennel::{Dispatch, Options};

use super::{parse, pool_with, secs};

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
fn the_token_is_read_from_the_variable_named() {
    let c = parse("[server]\ntoken_env = \"PATH\"\n").unwrap();
    assert_eq!(c.server.token().unwrap(), std::env::var("PATH").ok());
    let c = parse("[server]\ntoken_env = \"KENNEL_TEST_NO_SUCH_VARIABLE\"\n").unwrap();
    let e = c.server.token().unwrap_err();
    assert!(e.contains("server.token_env"), "{e}");
    assert!(e.contains("KENNEL_TEST_NO_SUCH_VARIABLE is not set"), "{e}");
    assert_eq!(parse("").unwrap().server.token().unwrap(), None);
}
