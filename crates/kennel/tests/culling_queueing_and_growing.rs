//! What a pool does on its own: letting idle workers go down to a floor,
//! queueing lends up to a bound, growing ahead of demand, `max_lifetime`
//! with its jitter, and a call on every idle worker.
mod support;

use std::time::Duration;

use kennel::{Error, IdleTimeout, OnDemand, Parallel, Pool, RejectReason, RetireReason};
use support::{
    Fake, Farm, Steer, advance, at_once, drain, fixed, hold, ms, retired, secs, settle,
    spawn_lend_id,
};

// ----- culling -----

#[tokio::test(start_paused = true)]
async fn culling_lets_idle_members_go_down_to_the_floor_and_never_an_in_use_one() {
    let farm = Farm::new();
    let pool = fixed(&farm, OnDemand, 4)
        .eviction(IdleTimeout::new(secs(30)).unwrap().keep(2))
        .build()
        .unwrap();
    // A burst takes four members.
    let mut leases = hold(&pool, 4).await;
    assert_eq!(farm.made(), 4);
    let busy = leases.pop().unwrap();
    drop(leases);
    advance(secs(29)).await;
    assert_eq!(pool.stats().idle, 3, "not before max_age");
    advance(secs(1)).await;
    let s = pool.stats();
    assert_eq!(
        (s.idle, s.lent),
        (1, 1),
        "culled down to init_count 2: {s:?}"
    );
    assert_eq!(farm.alive(), 2);
    // The member in use is never culled, however long it is held.
    advance(secs(600)).await;
    assert!(!farm.has_exited(busy.id));
    assert_eq!(pool.stats().lent, 1);
    drop(busy);
    advance(secs(600)).await;
    let s = pool.stats();
    assert_eq!((s.idle, s.lent), (2, 0), "the floor holds: {s:?}");
    assert_eq!(farm.made(), 4);
}

// ----- queueing -----

#[tokio::test(start_paused = true)]
async fn a_take_queues_up_to_max_waiting_and_gives_up_after_its_timeout() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| o.max_waiting = Some(2))
        .build()
        .unwrap();
    let held = pool.lend().await.unwrap();
    let patient = spawn_lend_id(&pool);
    settle().await;
    let p = pool.clone();
    let hasty = tokio::spawn(async move { p.lend_timeout(secs(5)).await.map(|l| l.id) });
    settle().await;
    assert_eq!(pool.stats().waiting, 2);
    let err = at_once(pool.lend()).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Rejected {
                reason: RejectReason::QueueFull
            }
        ),
        "{err:?}"
    );
    advance(ms(4999)).await;
    assert!(!hasty.is_finished());
    advance(ms(1)).await;
    let err = hasty.await.unwrap().unwrap_err();
    assert!(
        matches!(err, Error::LendTimeout { after } if after == secs(5)),
        "{err:?}"
    );
    assert_eq!(pool.stats().waiting, 1, "the timed-out take left the queue");
    let id = held.id;
    drop(held);
    assert_eq!(patient.await.unwrap().unwrap(), id);
    // The same bound for `run`.
    let held = pool.lend().await.unwrap();
    let err = pool
        .run_timeout(ms(10), async |w: &mut Fake| w.id)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::LendTimeout { after } if after == ms(10)),
        "{err:?}"
    );
    drop(held);
    assert_eq!(
        pool.run_timeout(ms(10), async |w: &mut Fake| w.id)
            .await
            .unwrap(),
        id
    );
}

// ----- auto-grow -----

/// An on-demand pool with two idle members out of four.
async fn two_idle_of_four(farm: &Farm, threshold: Option<usize>) -> Pool<Fake> {
    let mut builder = fixed(farm, OnDemand, 4);
    if let Some(n) = threshold {
        builder = builder.with_options(|o| o.auto_grow_threshold = Some(n));
    }
    let pool = builder.build().unwrap();
    let a = pool.lend().await.unwrap();
    let b = pool.lend().await.unwrap();
    drop((a, b));
    settle().await;
    assert_eq!(farm.made(), 2);
    assert_eq!(pool.stats().idle, 2);
    pool
}

#[tokio::test(start_paused = true)]
async fn auto_grow_starts_a_member_ahead_of_demand_when_idle_ones_drop_to_the_threshold() {
    let farm = Farm::with_warmup(secs(1));
    let pool = two_idle_of_four(&farm, Some(1)).await;
    let first = pool.lend().await.unwrap();
    settle().await;
    assert_eq!(
        farm.made(),
        3,
        "one idle left: a member starts ahead of demand"
    );
    assert_eq!(farm.started_slots(), [0, 1, 2]);
    let s = pool.stats();
    assert_eq!((s.idle, s.starting, s.lent), (1, 1, 1), "{s:?}");
    advance(secs(1)).await;
    assert_eq!(pool.stats().idle, 2);
    drop(first);
    assert_eq!(pool.stats().idle, 3);
}

#[tokio::test(start_paused = true)]
async fn without_auto_grow_taking_an_idle_member_starts_none() {
    let farm = Farm::with_warmup(secs(1));
    let pool = two_idle_of_four(&farm, None).await;
    let first = pool.lend().await.unwrap();
    let second = pool.lend().await.unwrap();
    advance(secs(5)).await;
    assert_eq!(farm.made(), 2);
    let s = pool.stats();
    assert_eq!((s.idle, s.starting, s.lent), (0, 0, 2), "{s:?}");
    drop((first, second));
}

// ----- max_lifetime -----

#[tokio::test(start_paused = true)]
async fn members_past_their_jittered_lifetime_are_replaced_at_spread_instants() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 8)
        .with_options(|o| {
            o.max_lifetime = Some(secs(60));
            o.max_lifetime_jitter = secs(10);
        })
        .seed(7)
        .build()
        .unwrap();
    let mut events = pool.events();
    settle().await;
    assert_eq!(farm.made(), 8);
    let step = ms(100);
    let mut ended_at: Vec<Option<Duration>> = vec![None; 8];
    let mut now = Duration::ZERO;
    while now < secs(75) {
        advance(step).await;
        now += step;
        for (id, at) in ended_at.iter_mut().enumerate() {
            if at.is_none() && farm.has_exited(id) {
                *at = Some(now);
            }
        }
    }
    let ended: Vec<Duration> = ended_at
        .iter()
        .map(|at| at.expect("every first member was replaced"))
        .collect();
    for at in &ended {
        assert!(*at >= secs(50) && *at <= secs(70), "{ended:?}");
    }
    let mut distinct = ended.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert!(distinct.len() > 1, "not all at once: {ended:?}");
    assert_eq!(farm.made(), 16, "each replaced once");
    assert_eq!(pool.stats().idle, 8);
    let got = retired(&drain(&mut events));
    assert_eq!(got.len(), 8, "{got:?}");
    assert!(
        got.iter().all(|(_, r)| *r == RetireReason::Lifetime),
        "{got:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_lent_member_past_its_lifetime_finishes_its_job_and_is_replaced_when_returned() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| o.max_lifetime = Some(secs(60)))
        .build()
        .unwrap();
    let mut events = pool.events();
    let mut lease = pool.lend().await.unwrap();
    advance(secs(90)).await;
    assert!(!farm.has_exited(0), "never cut short");
    assert_eq!(lease.work(secs(1)).await, 0);
    assert_eq!(farm.made(), 1);
    drop(lease);
    settle().await;
    assert!(farm.has_exited(0), "closed when returned");
    assert_eq!(farm.made(), 2, "and replaced");
    assert_eq!(retired(&drain(&mut events)), [(0, RetireReason::Lifetime)]);
    // The same through `run`: a job longer than the lifetime runs to its end.
    let long = pool.run(async |w: &mut Fake| w.work(secs(120)).await).await;
    assert_eq!(long.unwrap(), 1);
    settle().await;
    assert_eq!(farm.made(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_lifetime_jitter_not_below_the_lifetime_or_without_one_is_refused() {
    let farm = Farm::new();
    for (life, jitter) in [
        (Some(secs(60)), secs(60)),
        (Some(secs(60)), secs(90)),
        (None, secs(10)),
    ] {
        let mut b = Pool::builder(farm.factory()).with_options(|o| o.max_lifetime_jitter = jitter);
        if let Some(life) = life {
            b = b.with_options(|o| o.max_lifetime = Some(life));
        }
        let err = b.build().unwrap_err();
        assert_eq!(
            err.option, "max_lifetime_jitter",
            "{life:?} {jitter:?}: {err}"
        );
        assert!(err.to_string().contains("max_lifetime_jitter"), "{err}");
    }
    let ok = Pool::builder(farm.factory())
        .with_options(|o| {
            o.max_lifetime = Some(secs(60));
            o.max_lifetime_jitter = ms(59_999);
        })
        .build();
    assert!(ok.is_ok());
    assert_eq!(farm.made(), 0);
}

// ----- call_free_members -----

#[tokio::test(start_paused = true)]
async fn for_each_idle_runs_on_every_idle_member_in_turn_and_skips_lent_ones() {
    let farm = Farm::new();
    let steer = Steer::new(4, 4);
    let pool = Pool::builder(farm.factory())
        .startup(Parallel)
        .sizing(steer.clone())
        .build()
        .unwrap();
    settle().await;
    steer.set_size(2);
    advance(Steer::TICK).await;
    let s = pool.stats();
    assert_eq!((s.size, s.idle, s.kept), (2, 2, 2), "{s:?}");
    let held = pool.lend().await.unwrap();
    assert_eq!(held.slot(), 0);
    let p = pool.clone();
    let results = pool
        .for_each_idle(async |w: &mut Fake| {
            // Exclusive: only this member and the held one are out.
            let s = p.stats();
            let before = w.jobs;
            w.work(ms(10)).await;
            (w.id, before, s.lent)
        })
        .await;
    let slots: Vec<usize> = results.iter().map(|(slot, _)| *slot).collect();
    assert_eq!(slots, [1, 2, 3], "the lent slot 0 is skipped");
    for (slot, (id, before, out)) in &results {
        assert_eq!(*id, farm.in_slot(*slot).unwrap());
        assert_eq!(*before, 0);
        assert_eq!(*out, 2, "slot {slot}: one at a time");
    }
    let s = pool.stats();
    assert_eq!(
        (s.idle, s.kept, s.lent),
        (1, 2, 1),
        "all back where they were: {s:?}"
    );
    drop(held);
    let ran: Vec<u64> = hold(&pool, 2).await.iter().map(|l| l.jobs).collect();
    assert_eq!(ran, [0, 1], "slot 0 ran nothing, slot 1 ran f once");
    assert_eq!(farm.made(), 4);
}
