//! Health probes: an idle worker is probed with `Worker::check` every
//! `probe_every`; one that fails, or does not answer within
//! `probe_timeout`, is retired and replaced; a probe keeps the worker's
//! idle time and never delays a job beyond its timeout; `probe_on_lend`
//! probes each worker before a job gets it.
mod support;

use std::time::Duration;

use kennel::{Event, IdleTimeout, Options, Parallel, RetireReason, WorkerState};
use support::{Fake, Farm, Health, advance, drain, fixed, retired, secs, settle};
use tokio::time::Instant;

fn probe_failures(events: &[Event]) -> Vec<(usize, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ProbeFailed { slot, message } => Some((*slot, message.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn an_idle_worker_is_probed_every_probe_every_and_stays_while_it_passes() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| o.probe_every = Some(secs(30)))
        .build()
        .unwrap();
    settle().await;
    advance(secs(29)).await;
    assert_eq!(farm.probes(0), 0, "not idle long enough yet");
    advance(secs(1)).await;
    assert_eq!(farm.probes(0), 1);
    advance(secs(30)).await;
    advance(secs(30)).await;
    assert_eq!(farm.probes(0), 3);
    assert!(!farm.has_exited(0));
    assert_eq!(pool.stats().idle, 1);
}

#[tokio::test(start_paused = true)]
async fn the_first_probe_comes_probe_every_after_the_worker_turned_idle() {
    // Ready at 5 s, with probes every 2 s: first probed at 7 s, then 9 s.
    let farm = Farm::with_warmup(secs(5));
    let _pool = fixed(&farm, Parallel, 1)
        .with_options(|o| o.probe_every = Some(secs(2)))
        .build()
        .unwrap();
    settle().await;
    advance(secs(5)).await;
    assert_eq!(farm.probes(0), 0, "just ready");
    advance(Duration::from_millis(1999)).await;
    assert_eq!(farm.probes(0), 0, "idle for less than probe_every");
    advance(Duration::from_millis(1)).await;
    assert_eq!(farm.probes(0), 1, "at 7 s");
    advance(secs(2)).await;
    assert_eq!(
        farm.probes(0),
        2,
        "at 9 s: probe_every after the last probe"
    );
}

#[tokio::test(start_paused = true)]
async fn a_worker_back_from_a_job_is_probed_probe_every_after_it_turned_idle() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| o.probe_every = Some(secs(2)))
        .build()
        .unwrap();
    settle().await;
    advance(Duration::from_millis(1500)).await;
    pool.run(async |_w: &mut Fake| ()).await.unwrap();
    // Idle again at 1.5 s: not probed at 2 s, probed at 3.5 s.
    advance(Duration::from_millis(1900)).await;
    assert_eq!(farm.probes(0), 0);
    advance(Duration::from_millis(100)).await;
    assert_eq!(farm.probes(0), 1);
}

#[tokio::test(start_paused = true)]
async fn an_idle_worker_that_fails_its_probe_is_retired_and_replaced() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| o.probe_every = Some(secs(30)))
        .build()
        .unwrap();
    let mut events = pool.events();
    settle().await;
    farm.set_health(0, Health::Bad);
    advance(secs(30)).await;
    settle().await;
    assert!(farm.has_exited(0));
    let seen = drain(&mut events);
    assert_eq!(retired(&seen), [(0, RetireReason::ProbeFailed)]);
    assert_eq!(
        probe_failures(&seen),
        [(0, "the probe failed: the model answers garbage".to_owned())]
    );
    // Its replacement serves.
    assert_eq!(pool.run(async |w: &mut Fake| w.id).await.unwrap(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_probe_with_no_answer_within_probe_timeout_fails_the_worker() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| {
            o.probe_every = Some(secs(30));
            o.probe_timeout = secs(5);
        })
        .build()
        .unwrap();
    let mut events = pool.events();
    settle().await;
    farm.set_health(0, Health::Hangs);
    advance(secs(30)).await;
    assert_eq!(pool.workers()[0].state, WorkerState::Probing);
    advance(secs(4)).await;
    assert!(!farm.has_exited(0), "still within its timeout");
    advance(secs(1)).await;
    settle().await;
    assert!(farm.has_exited(0));
    assert_eq!(
        probe_failures(&drain(&mut events)),
        [(0, "no answer to the probe within 5s".to_owned())]
    );
}

#[tokio::test(start_paused = true)]
async fn a_probe_never_delays_a_job_beyond_its_timeout() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| {
            o.probe_every = Some(secs(30));
            o.probe_timeout = secs(5);
        })
        .build()
        .unwrap();
    settle().await;
    farm.set_health(0, Health::Hangs);
    advance(secs(30)).await;
    // The only worker is under its probe: the job waits, at most until the
    // probe's timeout, then gets the replacement.
    let asked = Instant::now();
    let id = pool.run(async |w: &mut Fake| w.id).await.unwrap();
    assert_eq!(id, 1, "the probed worker failed; its replacement serves");
    assert!(asked.elapsed() <= secs(5), "{:?}", asked.elapsed());

    // A slow probe that passes: the job gets the same worker when it ends.
    farm.set_health(1, Health::Slow(secs(2)));
    advance(secs(30)).await;
    let asked = Instant::now();
    assert_eq!(pool.run(async |w: &mut Fake| w.id).await.unwrap(), 1);
    assert!(asked.elapsed() <= secs(2), "{:?}", asked.elapsed());
}

#[tokio::test(start_paused = true)]
async fn a_job_takes_an_idle_worker_that_is_not_being_probed() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 2)
        .with_options(|o| {
            o.probe_every = Some(secs(30));
            o.probe_timeout = secs(20);
        })
        .build()
        .unwrap();
    settle().await;
    farm.set_health(0, Health::Slow(secs(10)));
    farm.set_health(1, Health::Slow(secs(10)));
    advance(secs(20)).await;
    // Worker 0 serves a job: idle since 20 s, it is not due at 30 s.
    assert_eq!(pool.run(async |w: &mut Fake| w.id).await.unwrap(), 0);
    advance(secs(10)).await;
    assert_eq!(farm.probes(0), 0);
    assert_eq!(farm.probes(1), 1);
    let asked = Instant::now();
    assert_eq!(pool.run(async |w: &mut Fake| w.id).await.unwrap(), 0);
    assert_eq!(asked.elapsed(), Duration::ZERO, "no wait for the probe");
}

#[tokio::test(start_paused = true)]
async fn a_probe_keeps_the_idle_time_that_eviction_counts() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 1)
        .eviction(IdleTimeout::new(secs(100)).unwrap())
        .with_options(|o| o.probe_every = Some(secs(30)))
        .build()
        .unwrap();
    let mut events = pool.events();
    settle().await;
    for _ in 0..3 {
        advance(secs(30)).await;
    }
    advance(secs(9)).await;
    assert_eq!(farm.probes(0), 3);
    assert!(!farm.has_exited(0));
    advance(secs(1)).await;
    settle().await;
    assert!(farm.has_exited(0), "evicted 100 s after it turned idle");
    assert!(
        drain(&mut events)
            .iter()
            .any(|e| matches!(e, Event::Evicted { slot: 0, .. }))
    );
}

#[tokio::test(start_paused = true)]
async fn probe_on_lend_gives_the_job_another_worker_when_one_fails() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 2)
        .with_options(|o| o.probe_on_lend = true)
        .build()
        .unwrap();
    let mut events = pool.events();
    settle().await;
    farm.set_health(0, Health::Bad);
    assert_eq!(pool.run(async |w: &mut Fake| w.id).await.unwrap(), 1);
    settle().await;
    assert!(farm.has_exited(0));
    assert_eq!(
        retired(&drain(&mut events)),
        [(0, RetireReason::ProbeFailed)]
    );
    assert!(farm.probes(1) >= 1);
}

#[tokio::test(start_paused = true)]
async fn with_probe_on_lend_a_job_waits_for_the_probe_at_most_its_timeout() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| {
            o.probe_on_lend = true;
            o.probe_timeout = secs(5);
        })
        .build()
        .unwrap();
    let mut events = pool.events();
    settle().await;
    farm.set_health(0, Health::Hangs);
    // A job given up while its worker is probed leaves the queue; the
    // probe goes on, on the pool's own task, and fails at its timeout.
    let lend = tokio::time::timeout(secs(1), pool.lend()).await;
    assert!(lend.is_err(), "the probe hangs");
    assert_eq!(pool.stats().waiting, 0);
    let asked = Instant::now();
    let id = pool.run(async |w: &mut Fake| w.id).await.unwrap();
    assert_eq!(id, 1, "the probed worker failed; its replacement serves");
    assert!(asked.elapsed() <= secs(4), "{:?}", asked.elapsed());
    assert_eq!(
        retired(&drain(&mut events)),
        [(0, RetireReason::ProbeFailed)]
    );
}

#[test]
fn probe_every_is_at_least_a_second() {
    let mut o = Options::default();
    o.probe_every = Some(Duration::from_millis(999));
    let err = o.validate().unwrap_err();
    assert_eq!(err.option, "probe_every");
    assert!(err.to_string().contains("at least 1s"), "{err}");
    o.probe_every = Some(secs(1));
    o.probe_timeout = Duration::ZERO;
    assert_eq!(o.validate().unwrap_err().option, "probe_timeout");
}
