//! Bad configs refused with the file, the key and the line named: each bad
//! value and a word of what is allowed, syntax and type errors, mangled
//! configs (never a panic), a pool option's whole message.

use super::{parse, pool_with, refused};

/// Each bad value, the key the error must name, and a word of what is
/// allowed.
#[test]
fn each_bad_value_is_refused_with_its_key() {
    let cases: &[(&str, &str, &str)] = &[
        // Unknown keys, anywhere.
        ("[server]\nport = 1\n", "server.port", "expected one of"),
        (
            "colour = 1\n",
            "colour",
            "expected one of `server`, `pool`, `tenant`",
        ),
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
        // The MCP endpoint's table.
        (&pool_with("mcp = {}"), "pool[0].mcp", "json-rpc"),
        (
            &pool_with("protocol = \"json-rpc\"\nmcp = { session_idle = \"10ms\" }"),
            "pool[0].mcp.session_idle",
            "1s to 24h",
        ),
        (
            &pool_with("protocol = \"json-rpc\"\nmcp = { sessions = \"pooled\" }"),
            "pool[0].mcp.sessions",
            "exclusive",
        ),
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
            "at least 1ms",
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
            "at least 1ms",
        ),
        (
            &pool_with("max_lifetime = \"0s\""),
            "pool[0].max_lifetime",
            "at least 1s",
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
            "(allowed: 0 (kills at once), or at least 1ms and at most 2147483647 ms;",
        ),
        (&pool_with("max_reply = 0"), "pool[0].max_reply", "1 byte"),
        // Tenants.
        (
            "[[tenant]]\nname = \"a\"\ntoken_env = \"T_A\"\nweight = 0\n",
            "tenant[0].weight",
            "allowed: 1 to 1000",
        ),
        (
            "[[tenant]]\nname = \"a\"\n",
            "tenant[0].token_env",
            "exactly one",
        ),
        (
            "[[tenant]]\nname = \"a b\"\ntoken_env = \"T_A\"\n",
            "tenant[0].name",
            "ASCII letters, digits",
        ),
        (
            "[[tenant]]\nname = \"a\"\ntoken_env = \"T_A\"\n[[tenant]]\nname = \"a\"\ntoken_env = \"T_B\"\n",
            "tenant[1].name",
            "already the name of another tenant",
        ),
        (
            "[[tenant]]\nname = \"a\"\ntoken_env = \"T_A\"\nmax_running = 0\n",
            "tenant[0].max_running",
            "1 or more",
        ),
        (
            "[[tenant]]\nname = \"a\"\ntoken_env = \"T_A\"\nmax_in_flight = 0\n",
            "tenant[0].max_in_flight",
            "1 or more",
        ),
        (
            &pool_with("memory_check_every = \"1ns\""),
            "pool[0].memory_check_every",
            "(allowed: at least 100ms and at most 2147483647 ms;",
        ),
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
            "test.toml:4:1: `pool[0].job_timeut`: unknown field `job_timeut`, did you mean `job_timeout`? (expected one of `name`, `argv`, `env`, `env_clear`, `env_keep`, `worker_close_grace`, `cwd`, `group`, `startup`, `sizing`, `eviction`, `ready`, `max_reply`, `protocol`, `cancel_lines`, `job_ids`, `method`, `initialize`, `settings`, `answers`, `load_method`, `unload_method`, `upload_limit`, `probe_request`, `threads`, `pin`, `key`, `key_pattern`, `mcp`, `cancel_on_disconnect`, `queue`, `job_timeout`, `job_kill_after`, `cancel_grace`, `progress_extends_timeout`, `warmup_timeout`, `max_waiting`, `max_queue_wait`, `job_grace`, `dispatch`, `max_lifetime`, `max_lifetime_jitter`, `auto_grow_threshold`, `break_after_failed_starts`, `retry_on_crash`, `max_jobs`, `max_jobs_jitter`, `min_idle`, `slow_job`, `max_memory`, `memory_check_every`, `gpus_per_worker`, `gpus`, `max_gpu_memory`, `probe_every`, `probe_timeout`, `probe_on_lend`, `max_surge`, `replace_on_resize`, `key_binding`, `keys_per_worker`, `max_key_wait`, `max_workers_per_key`, `min_workers_per_key`, `key_memory_budget`)".to_owned(),
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
