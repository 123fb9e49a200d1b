//! A refusal that helps: a misspelt key or name offers the allowed one
//! closest to it, a table written with the wrong brackets says which it
//! takes, and a value out of range names its line.

use super::{pool_with, refused};

#[test]
fn a_misspelt_key_or_name_offers_the_closest_allowed_one() {
    for (text, key, start) in [
        (
            pool_with("job_timout = \"5s\""),
            "pool[0].job_timout",
            "unknown field `job_timout`, did you mean `job_timeout`? (expected one of `name`, ",
        ),
        (
            "[server]\nlistne = \"127.0.0.1:1\"\n".to_owned(),
            "server.listne",
            "unknown field `listne`, did you mean `listen`? (expected one of `listen`, ",
        ),
        (
            pool_with("sizing = { kind = \"fixed\", wokers = 2 }"),
            "pool[0].sizing.wokers",
            "unknown field `wokers`, did you mean `workers`? (expected ",
        ),
        (
            pool_with("startup = \"paralel\""),
            "pool[0].startup",
            "unknown variant `paralel`, did you mean `parallel`? (expected ",
        ),
        (
            "[[pools]]\nname = \"p\"\n".to_owned(),
            "pools",
            "unknown field `pools`, did you mean `pool`? (expected one of `server`, `pool`, `tenant`)",
        ),
    ] {
        let e = refused(&text);
        assert_eq!(e.key, key, "{e}");
        assert!(e.message.starts_with(start), "{text}: {e}");
        assert!(e.line.is_some(), "{e}");
    }
    // The line of the key written.
    assert_eq!(
        refused(&pool_with("job_timout = \"5s\"")).line,
        Some((4, 1))
    );
}

#[test]
fn a_key_like_no_allowed_one_gets_no_guess() {
    for text in [
        "[server]\nport = 1\n".to_owned(),
        pool_with("workers = 2"),
        pool_with("dispatch = \"random\""),
    ] {
        let e = refused(&text);
        assert!(!e.message.contains("did you mean"), "{text}: {e}");
        assert!(e.message.contains("expected"), "{text}: {e}");
    }
}

#[test]
fn a_pool_written_with_one_bracket_is_told_to_use_two() {
    let e = refused("[pool]\nname = \"p\"\nargv = [\"python3\", \"w.py\"]\n");
    assert_eq!(e.key, "pool");
    assert!(
        e.message
            .contains("each pool is a `[[pool]]` table (two brackets), one per pool, not `[pool]`"),
        "{e}"
    );
}

#[test]
fn the_server_written_with_two_brackets_is_told_to_use_one() {
    let e = refused("[[server]]\nlisten = \"127.0.0.1:1\"\n");
    assert_eq!(e.key, "server");
    assert!(
        e.message
            .contains("the server's table is written `[server]` (one bracket), once"),
        "{e}"
    );
}

/// A value of the right type but out of range is refused by the last
/// check, after reading: it names its line all the same.
#[test]
fn a_value_out_of_range_names_its_line() {
    for (text, key, line) in [
        (
            "[server]\nlisten = \"127.0.0.1:1\"\n\nbody_limit = 0\n".to_owned(),
            "server.body_limit",
            4,
        ),
        (
            format!(
                "{}\n{}",
                pool_with(""),
                "[[pool]]\nname = \"q\"\nargv = [\"python3\", \"w.py\"]\nsizing = { kind = \"fixed\", workers = 0 }\n"
            ),
            "pool[1].sizing.workers",
            9,
        ),
        (pool_with("max_surge = 65"), "pool[0].max_surge", 4),
    ] {
        let e = refused(&text);
        assert_eq!(e.key, key, "{e}");
        assert_eq!(e.line.map(|l| l.0), Some(line), "{text}\n{e}");
        assert!(
            e.to_string().starts_with(&format!("test.toml:{line}:")),
            "{e}"
        );
    }
}
