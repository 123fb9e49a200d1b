//! The config parser, given arbitrary input: any text, and any few edits of
//! a full config, parse (the pools then build) or are refused with an error
//! naming the file; any reconfiguration body is read or refused naming its
//! key. (A unit test: it builds pools and reads reconfiguration bodies
//! with the crate's own functions.)

use std::path::PathBuf;

use crate::config::{Config, ReconfigBody, Source, StartupKind};
use crate::pools::build_pool;
use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;

// Shared with the service's hostile-input tests.
#[path = "../../../tests/hostile/arbitrary.rs"]
mod arbitrary;
use arbitrary::{cases, reconfig_json, runtime};

/// What `@kennel` stands for: no worker starts here.
fn kennel_bin() -> &'static std::path::Path {
    std::path::Path::new("kennel")
}

fn source() -> Source {
    Source {
        name: "hostile.toml".into(),
        dir: PathBuf::from(env!("CARGO_MANIFEST_DIR")),
    }
}

const FULL: &str = r#"[server]
listen = "127.0.0.1:9000"
body_limit = "2MiB"
token_env = "KENNEL_TOKEN"
shutdown_grace = "3s"

[[pool]]
name = "echo"
argv = ["cat"]
env = { A = "1", B = "two" }
cwd = "."
group = "g"
startup = "parallel"
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
max_reply = "4MiB"

[[pool]]
name = "big"
argv = ["./model", "--size", "small"]
startup = "leader-first"
sizing = { kind = "resources", memory_per_worker = "2GiB" }

[[pool]]
name = "climb"
argv = ["./model"]
sizing = { kind = "hill-climbing", memory_per_worker = 1048576 }
"#;

/// Values a key might be given: right, wrong, extreme.
fn value_token() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("\"0s\"".to_owned()),
        Just("\"1ns\"".to_owned()),
        Just("\"-1s\"".to_owned()),
        Just("\"999999999999 days\"".to_owned()),
        Just("\"24.8 days\"".to_owned()),
        Just("\"2147483647ms\"".to_owned()),
        Just("\"2147483648ms\"".to_owned()),
        Just("\"0B\"".to_owned()),
        Just("\"16 EiB\"".to_owned()),
        Just("\"1.5 GB\"".to_owned()),
        Just("0".to_owned()),
        Just("-1".to_owned()),
        Just("18446744073709551615".to_owned()),
        Just("9223372036854775807".to_owned()),
        Just("1e309".to_owned()),
        Just("nan".to_owned()),
        Just("inf".to_owned()),
        Just("true".to_owned()),
        Just("[]".to_owned()),
        Just("[\"\"]".to_owned()),
        Just("{}".to_owned()),
        Just("{ kind = \"fixed\", workers = 0 }".to_owned()),
        Just("{ kind = \"fixed\", workers = 100000 }".to_owned()),
        Just("{ kind = \"resources\", memory_per_worker = 1 }".to_owned()),
        Just("{ kind = \"gradient\", memory_per_worker = \"0B\" }".to_owned()),
        Just("{ kind = \"idle-timeout\", after = \"0s\" }".to_owned()),
        Just("{ kind = \"idle-timeout\", after = \"1s\", keep = 99999 }".to_owned()),
        Just("{ kind = \"what\" }".to_owned()),
        Just("\"localhost:0\"".to_owned()),
        Just("\"[::1]:65536\"".to_owned()),
        Just("\"256.0.0.1\"".to_owned()),
        Just("\"\u{0}\"".to_owned()),
        Just("\"é\u{202e}名前\"".to_owned()),
        "\"[ -~]{0,30}\"".boxed(),
        any::<i64>().prop_map(|n| n.to_string()),
    ]
}

fn key_token() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("listen"),
        Just("body_limit"),
        Just("token_env"),
        Just("shutdown_grace"),
        Just("name"),
        Just("argv"),
        Just("env"),
        Just("cwd"),
        Just("group"),
        Just("startup"),
        Just("sizing"),
        Just("eviction"),
        Just("dispatch"),
        Just("ready"),
        Just("job_timeout"),
        Just("warmup_timeout"),
        Just("max_waiting"),
        Just("max_queue_wait"),
        Just("max_lifetime"),
        Just("max_lifetime_jitter"),
        Just("auto_grow_threshold"),
        Just("job_grace"),
        Just("max_reply"),
        Just("port"),
        Just("\"quoted key\""),
    ]
    .prop_map(str::to_owned)
}

/// One edit of a config text.
#[derive(Debug, Clone)]
enum Edit {
    Delete {
        at: usize,
        len: usize,
    },
    Insert {
        at: usize,
        text: String,
    },
    /// Sets line `line` to `key = value`.
    SetLine {
        line: usize,
        key: String,
        value: String,
    },
    DuplicateLine(usize),
    SwapLines(usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 1usize..12).prop_map(|(at, len)| Edit::Delete { at, len }),
        (
            any::<usize>(),
            prop_oneof![
                Just("[[pool]]\n".to_owned()),
                Just("[server]\n".to_owned()),
                Just("\n[[pool]]\nname = \"echo\"\nargv = [\"cat\"]\n".to_owned()),
                Just("\"".to_owned()),
                Just("=".to_owned()),
                Just("\u{0}".to_owned()),
                Just("\u{feff}".to_owned()),
                Just("#".to_owned()),
                Just("{".to_owned()),
                Just("]]".to_owned()),
                Just("\\u0000".to_owned()),
                ".{0,8}".boxed(),
            ]
        )
            .prop_map(|(at, text)| Edit::Insert { at, text }),
        (any::<usize>(), key_token(), value_token()).prop_map(|(line, key, value)| Edit::SetLine {
            line,
            key,
            value
        }),
        any::<usize>().prop_map(Edit::DuplicateLine),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::SwapLines(a, b)),
    ]
}

fn apply(text: &str, edit: &Edit) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let n = lines.len().max(1);
    match edit {
        Edit::Delete { at, len } => {
            let at = at % (chars.len() + 1);
            let end = (at + len).min(chars.len());
            chars[..at].iter().chain(&chars[end..]).collect()
        }
        Edit::Insert { at, text } => {
            let at = at % (chars.len() + 1);
            chars[..at]
                .iter()
                .copied()
                .chain(text.chars())
                .chain(chars[at..].iter().copied())
                .collect()
        }
        Edit::SetLine { line, key, value } => {
            if !lines.is_empty() {
                lines[line % n] = format!("{key} = {value}");
            }
            lines.join("\n")
        }
        Edit::DuplicateLine(line) => {
            if !lines.is_empty() {
                let l = lines[line % n].clone();
                lines.insert(line % n, l);
            }
            lines.join("\n")
        }
        Edit::SwapLines(a, b) => {
            if !lines.is_empty() {
                lines.swap(a % n, b % n);
            }
            lines.join("\n")
        }
    }
}

/// Parses `text`; a refusal names the file and says something; an accepted
/// config's pools build (on demand, so no worker starts) or are refused by
/// the core with a clear error.
fn parse_and_build(text: &str, rt: &tokio::runtime::Runtime) -> Result<usize, String> {
    match Config::parse(text, &source()) {
        Err(e) => {
            assert_eq!(e.file, "hostile.toml");
            assert!(!e.message.trim().is_empty(), "{e:?}");
            assert!(e.to_string().starts_with("hostile.toml"), "{e}");
            Err(e.to_string())
        }
        Ok(config) => {
            // What a listen address and token say, too.
            let _ = config.listen();
            let _ = config.server.token();
            rt.block_on(async {
                for pool in &config.pools {
                    let mut dry = pool.clone();
                    dry.startup = StartupKind::OnDemand;
                    match build_pool(&dry, kennel_bin(), &crate::watch::Watch::default()) {
                        Ok(p) => {
                            assert_eq!(p.stats().starting, 0);
                            p.close().await;
                        }
                        Err(e) => assert!(!e.to_string().is_empty()),
                    }
                }
            });
            Ok(config.pools.len())
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(256), .. ProptestConfig::default() })]

    #[test]
    fn any_text_is_a_config_or_an_error_naming_the_file(text in prop_oneof![
        ".{0,200}",
        prop::collection::vec(any::<u8>(), 0..300)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
    ]) {
        let rt = runtime();
        let _ = parse_and_build(&text, &rt);
    }

    #[test]
    fn any_edit_of_a_full_config_parses_or_is_refused_clearly(
        edits in prop::collection::vec(edit(), 1..6),
    ) {
        let rt = runtime();
        let mut text = FULL.to_owned();
        for e in &edits {
            text = apply(&text, e);
        }
        let _ = parse_and_build(&text, &rt);
    }

    #[test]
    fn any_reconfig_body_is_read_or_refused_naming_its_key(body in prop_oneof![
        prop::collection::vec(any::<u8>(), 0..200),
        reconfig_json().prop_map(|v| v.to_string().into_bytes()),
    ]) {
        match ReconfigBody::from_json(&body, &kennel::Options::default()) {
            Ok(r) => {
                let _ = r.reconfig();
            }
            Err(e) => assert!(!e.message.is_empty(), "{e:?}"),
        }
    }
}

#[test]
fn the_full_config_is_valid() {
    let rt = runtime();
    assert_eq!(parse_and_build(FULL, &rt), Ok(3));
}
