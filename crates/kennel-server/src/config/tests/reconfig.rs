//! Bodies of `PUT /pools/{name}/config`: every key read, a merge patch of
//! the live options, each bad body refused naming its key.

use crate::config::{EvictionConfig, ReconfigBody, SizingConfig};
use kennel::{Dispatch, Options};

use super::secs;

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
            "unknown field `name`, expected one of `sizing`, `eviction`, `group`, `job_timeout`, `job_kill_after`, `cancel_grace`, `progress_extends_timeout`, `warmup_timeout`, `max_waiting`, `max_queue_wait`, `job_grace`, `dispatch`, `max_lifetime`, `max_lifetime_jitter`, `auto_grow_threshold`, `break_after_failed_starts`, `retry_on_crash`, `max_jobs`, `max_jobs_jitter`, `min_idle`, `slow_job`, `max_memory`, `memory_check_every`, `gpus_per_worker`, `gpus`, `max_gpu_memory`, `probe_every`, `probe_timeout`, `probe_on_lend`, `max_surge`, `replace_on_resize`, `key_binding`, `keys_per_worker`, `max_key_wait`, `max_workers_per_key`, `min_workers_per_key`, `key_memory_budget`",
        ),
        (
            br#"{"sizing":{"kind":"fixed","workers":0}}"#,
            "sizing.workers",
            "0 is out of range (allowed: 1 to 1024)",
        ),
        (
            br#"{"job_timeout":"0s"}"#,
            "job_timeout",
            "0ns is out of range (allowed: at least 1ms and at most 2147483647 ms; the timers run in whole milliseconds: a shorter limit fires at the same tick)",
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
