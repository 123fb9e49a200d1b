//! The rules of particular keys: a learning sizing's ranges, tables never
//! filled by position from a list, names no path can reach, the retired
//! `close_grace`, the token's variable kept from the workers, the HTTP keys'
//! ranges.

use std::time::Duration;

use crate::config::learning::LearningConfig;
use crate::config::{HumanDuration, ReconfigBody, SizingConfig};

use super::{parse, pool_with, refused, secs};

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
        (
            "runtime_threads = 0",
            "server.runtime_threads",
            "0 is out of range (allowed: \"auto\" or a number of threads from 1 to 1024)",
        ),
        (
            "runtime_threads = \"many\"",
            "server.runtime_threads",
            "allowed: \"auto\" or a number of threads from 1 to 1024",
        ),
    ] {
        let e = refused(&format!("[server]\n{line}\n"));
        assert_eq!(e.key, key, "{e}");
        assert!(e.message.contains(words), "{e}");
    }
}
