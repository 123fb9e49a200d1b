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
