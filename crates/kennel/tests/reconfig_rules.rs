//! Reconfiguration does what it says: a changed `max_lifetime` moves the
//! deadlines of live workers, and a lowered `max_waiting` turns away the
//! youngest queued jobs above it.
mod support;

use kennel::{Action, Error, Event, Parallel, Reconfig, RejectReason, RetireReason};
use support::{Farm, advance, drain, fixed, parallel, retired, secs, settle};

#[tokio::test(start_paused = true)]
async fn a_lifetime_added_by_reconfiguration_expires_live_workers_within_it_of_their_start() {
    let farm = Farm::new();
    let pool = parallel(&farm, 2);
    settle().await;
    advance(secs(30)).await;
    let actions = pool
        .reconfigure(Reconfig::new().with_options(move |o| o.max_lifetime = Some(secs(60))))
        .unwrap();
    assert!(
        actions.contains(&Action::LifetimesRescheduled { count: 2 }),
        "{actions:?}"
    );
    let mut events = pool.events();
    // 60 s after their start, not 60 s after the change.
    advance(secs(29)).await;
    assert!(!farm.has_exited(0) && !farm.has_exited(1));
    advance(secs(2)).await;
    settle().await;
    assert!(farm.has_exited(0) && farm.has_exited(1), "expired at 60 s");
    assert_eq!(farm.made(), 4, "and replaced");
    let got = retired(&drain(&mut events));
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got.iter().all(|(_, r)| *r == RetireReason::Lifetime));
}

#[tokio::test(start_paused = true)]
async fn a_lifetime_removed_by_reconfiguration_expires_no_live_worker() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 2)
        .with_options(|o| o.max_lifetime = Some(secs(60)))
        .build()
        .unwrap();
    settle().await;
    advance(secs(30)).await;
    pool.reconfigure(Reconfig::new().with_options(move |o| o.max_lifetime = None))
        .unwrap();
    advance(secs(600)).await;
    settle().await;
    assert_eq!(farm.made(), 2, "no worker expired");
    assert_eq!(pool.stats().idle, 2);
}

#[tokio::test(start_paused = true)]
async fn a_shortened_lifetime_replaces_expired_idle_workers_at_once_and_lent_ones_when_returned() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 2)
        .with_options(|o| o.max_lifetime = Some(secs(600)))
        .build()
        .unwrap();
    settle().await;
    let lease = pool.lend().await.unwrap();
    let lent = lease.slot();
    advance(secs(120)).await;
    let actions = pool
        .reconfigure(Reconfig::new().with_options(move |o| o.max_lifetime = Some(secs(60))))
        .unwrap();
    let idle = 1 - lent;
    assert!(
        actions.contains(&Action::Retired { slot: idle }),
        "the idle one goes at once: {actions:?}"
    );
    settle().await;
    assert!(farm.has_exited(idle), "expired idle worker closed");
    assert!(!farm.has_exited(lent), "a lent one is never cut short");
    assert_eq!(farm.made(), 3, "the idle one was replaced");
    drop(lease);
    settle().await;
    assert!(farm.has_exited(lent), "closed when returned");
    assert_eq!(farm.made(), 4, "and replaced");
    assert_eq!(pool.stats().idle, 2);
}

#[tokio::test(start_paused = true)]
async fn a_lowered_max_waiting_turns_the_youngest_queued_jobs_away() {
    let farm = Farm::new();
    let pool = parallel(&farm, 1);
    settle().await;
    let held = pool.lend().await.unwrap();
    let mut jobs = Vec::new();
    for _ in 0..4 {
        let pool = pool.clone();
        jobs.push(tokio::spawn(
            async move { pool.lend().await.map(|l| l.slot()) },
        ));
        settle().await;
    }
    assert_eq!(pool.stats().waiting, 4);
    let mut events = pool.events();
    let actions = pool
        .reconfigure(Reconfig::new().with_options(move |o| o.max_waiting = Some(1)))
        .unwrap();
    assert!(
        actions.contains(&Action::JobsRejected { count: 3 }),
        "{actions:?}"
    );
    assert_eq!(pool.stats().waiting, 1);
    let rejected = drain(&mut events)
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::Rejected {
                    reason: RejectReason::QueueFull
                }
            )
        })
        .count();
    assert_eq!(rejected, 3);
    drop(held);
    let mut results = Vec::new();
    for job in jobs {
        results.push(job.await.unwrap());
    }
    // The oldest keeps its place and gets the worker; the three younger
    // ones were turned away.
    assert!(matches!(results[0], Ok(0)), "{results:?}");
    for r in &results[1..] {
        assert!(
            matches!(
                r,
                Err(Error::Rejected {
                    reason: RejectReason::QueueFull
                })
            ),
            "{results:?}"
        );
    }
}
