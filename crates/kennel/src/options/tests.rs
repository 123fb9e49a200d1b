//! The options' checks: each bad value names its option and range.

use super::*;

#[test]
fn each_out_of_range_value_names_its_option() {
    type Case = (&'static str, fn(&mut Options));
    let cases: [Case; 12] = [
        ("job_kill_after", |o| {
            o.job_kill_after = Some(Duration::ZERO);
        }),
        ("job_kill_after", |o| {
            o.job_timeout = Some(Duration::from_secs(5));
            o.job_kill_after = Some(Duration::from_secs(5));
        }),
        ("cancel_grace", |o| o.cancel_grace = Duration::MAX),
        ("max_lifetime", |o| {
            o.max_lifetime = Some(Duration::from_millis(999));
        }),
        ("retry_on_crash", |o| o.retry_on_crash = MAX_RETRIES + 1),
        ("break_after_failed_starts", |o| {
            o.break_after_failed_starts = Some(0);
        }),
        ("job_timeout", |o| o.job_timeout = Some(Duration::ZERO)),
        ("warmup_timeout", |o| {
            o.warmup_timeout = Some(MAX_DURATION + Duration::from_millis(1));
        }),
        ("max_queue_wait", |o| {
            o.max_queue_wait = Some(Duration::ZERO);
        }),
        ("job_grace", |o| o.job_grace = Duration::MAX),
        ("max_waiting", |o| o.max_waiting = Some(MAX_WAITING + 1)),
        ("max_lifetime_jitter", |o| {
            o.max_lifetime = Some(Duration::from_secs(1));
            o.max_lifetime_jitter = Duration::from_secs(1);
        }),
    ];
    for (name, set) in cases {
        let mut o = Options::default();
        set(&mut o);
        assert_eq!(o.validate().unwrap_err().option, name);
    }
    assert!(Options::default().validate().is_ok());
}

#[test]
fn changed_lists_what_differs() {
    let a = Options::default();
    let mut b = a.clone();
    b.max_waiting = Some(3);
    b.dispatch = Dispatch::RoundRobin;
    assert_eq!(a.changed(&b), ["max_waiting", "dispatch"]);
    assert!(a.changed(&a).is_empty());
}

#[test]
fn memory_check_every_below_100_ms_is_refused_with_its_floor_named() {
    let mut o = Options {
        memory_check_every: Duration::from_nanos(1),
        ..Options::default()
    };
    let err = o.validate().unwrap_err();
    assert_eq!(err.option, "memory_check_every");
    assert!(err.to_string().contains("at least 100ms"), "{err}");
    o.memory_check_every = MIN_MEMORY_CHECK_EVERY;
    assert!(o.validate().is_ok(), "the floor itself is allowed");
}

/// The rules between options, added to the row of the first one.
const ALSO: &[(&str, &str)] = &[
    ("job_kill_after", "above `job_timeout` when both are set"),
    (
        "max_lifetime",
        "`max_lifetime_jitter` below it (0 when it is not set)",
    ),
    (
        "max_jobs",
        "`max_jobs_jitter` below it (0 when it is not set)",
    ),
    ("max_gpu_memory", "only with `gpus_per_worker`"),
];

/// The docs' table of option ranges is written from the declarations:
/// `KENNEL_WRITE_DOCS=1 cargo test -p kennel option_ranges` rewrites it.
#[test]
fn the_docs_table_of_option_ranges_is_the_one_the_declarations_make() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/concepts/abort-and-limits.md"
    );
    let (begin, end) = (
        "<!-- option ranges: written by a test -->\n",
        "<!-- /option ranges -->",
    );
    let doc = std::fs::read_to_string(path).expect("the docs page");
    let start = doc.find(begin).expect("the begin marker") + begin.len();
    let stop = doc.find(end).expect("the end marker");
    let table = Range::table(&Options::ranges(), ALSO);
    if std::env::var_os("KENNEL_WRITE_DOCS").is_some() {
        std::fs::write(path, format!("{}{table}{}", &doc[..start], &doc[stop..])).unwrap();
        return;
    }
    assert_eq!(
        doc[start..stop],
        table,
        "docs/concepts/abort-and-limits.md: rerun with KENNEL_WRITE_DOCS=1"
    );
}

#[test]
fn every_duration_option_has_a_floor_of_at_least_a_millisecond() {
    let timed = [
        "job_timeout",
        "job_kill_after",
        "cancel_grace",
        "warmup_timeout",
        "max_queue_wait",
        "job_grace",
        "max_lifetime",
        "slow_job",
        "memory_check_every",
        "probe_every",
        "probe_timeout",
    ];
    let ranges = Options::ranges();
    for name in timed {
        let (_, range) = ranges.iter().find(|(n, _)| *n == name).expect(name);
        let Range::Time { floor, .. } = range else {
            panic!("{name} has no time range")
        };
        assert!(*floor >= MIN_TIMER, "{name}");
        let mut o = Options::default();
        let below = *floor - Duration::from_nanos(1);
        match name {
            "cancel_grace" => o.cancel_grace = below,
            "job_grace" => o.job_grace = below,
            "memory_check_every" => o.memory_check_every = below,
            "probe_timeout" => o.probe_timeout = below,
            "job_timeout" => o.job_timeout = Some(below),
            "job_kill_after" => o.job_kill_after = Some(below),
            "warmup_timeout" => o.warmup_timeout = Some(below),
            "max_queue_wait" => o.max_queue_wait = Some(below),
            "max_lifetime" => o.max_lifetime = Some(below),
            "slow_job" => o.slow_job = Some(below),
            "probe_every" => o.probe_every = Some(below),
            _ => unreachable!(),
        }
        let err = o.validate().unwrap_err();
        assert_eq!(err.option, name);
        assert!(
            err.to_string().contains(&format!("at least {floor:?}")),
            "{err}"
        );
    }
}
