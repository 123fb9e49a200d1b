//! Evictions let idle workers go.
mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kennel::{
    Event, EvictAfter, Eviction, IdleTimeout, IdleWorker, MAX_IDLE_TIMEOUT, NoEviction, OnDemand,
    Parallel, Pool,
};
use support::{Fake, Farm, Steer, advance, drain, fixed, ms, parallel, secs, settle};
use tokio::time::Instant;

fn idle_timeout(after: Duration) -> IdleTimeout {
    IdleTimeout::new(after).unwrap()
}

/// [`support::on_demand`] with `eviction`.
fn on_demand_evicting(farm: &Farm, n: usize, eviction: impl Eviction) -> Pool<Fake> {
    fixed(farm, OnDemand, n).eviction(eviction).build().unwrap()
}

/// [`support::parallel`] with `eviction`.
fn parallel_evicting(farm: &Farm, n: usize, eviction: impl Eviction) -> Pool<Fake> {
    fixed(farm, Parallel, n).eviction(eviction).build().unwrap()
}

#[tokio::test(start_paused = true)]
async fn idle_timeout_evicts_a_worker_idle_for_after_and_not_before() {
    let farm = Farm::new();
    let pool = on_demand_evicting(&farm, 1, idle_timeout(secs(30)));
    let lease = pool.lend().await.unwrap();
    let id = lease.id;
    drop(lease);
    settle().await;
    assert_eq!(pool.stats().idle, 1);

    advance(secs(30) - ms(1)).await;
    assert!(!farm.has_exited(id), "idle for after - 1 ms: still kept");
    assert_eq!(pool.stats().idle, 1);

    advance(ms(1)).await;
    assert!(farm.has_exited(id), "idle for after: evicted");
    assert_eq!(pool.stats().idle, 0);
    assert_eq!(farm.alive(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_job_that_takes_the_worker_first_keeps_it_and_a_new_after_starts_when_it_ends() {
    let farm = Farm::new();
    let pool = on_demand_evicting(&farm, 1, idle_timeout(secs(10)));
    drop(pool.lend().await.unwrap());
    settle().await;

    // Idle for 6 s, then a job takes it and holds it for 20 s.
    advance(secs(6)).await;
    let lease = pool.lend().await.unwrap();
    let id = lease.id;
    advance(secs(20)).await;
    assert!(!farm.has_exited(id), "a lent worker is never evicted");
    drop(lease);
    settle().await;

    // The first idle period does not count: a full `after` starts now.
    advance(secs(10) - ms(1)).await;
    assert!(
        !farm.has_exited(id),
        "the idle time restarted when the job ended"
    );
    advance(ms(1)).await;
    assert!(farm.has_exited(id));
    assert_eq!(farm.made(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_short_job_in_the_middle_of_an_idle_period_restarts_it() {
    let farm = Farm::new();
    let pool = on_demand_evicting(&farm, 1, idle_timeout(secs(10)));
    drop(pool.lend().await.unwrap());
    advance(secs(6)).await;
    let lease = pool.lend().await.unwrap();
    advance(secs(2)).await;
    drop(lease);
    settle().await;
    // Idle since 8 s: the first period's end (10 s) lets nothing go.
    advance(secs(10) - ms(1)).await;
    assert_eq!(farm.alive(), 1, "17.999 s: idle for 9.999 s only");
    advance(ms(1)).await;
    assert_eq!(farm.alive(), 0, "18 s: idle for 10 s");
}

#[tokio::test(start_paused = true)]
async fn keep_is_a_floor_the_eviction_never_goes_below() {
    let farm = Farm::new();
    let pool = parallel_evicting(&farm, 4, idle_timeout(secs(1)).keep(2));
    settle().await;
    assert_eq!(pool.stats().idle, 4);

    advance(secs(1)).await;
    assert_eq!(farm.alive(), 2, "evicted down to the floor");
    assert_eq!(pool.stats().idle, 2);

    // Hours later, with the timers firing again and again, still two.
    for _ in 0..120 {
        advance(secs(60)).await;
    }
    assert_eq!(farm.alive(), 2);
    assert_eq!(farm.made(), 4, "the kept ones are the same workers");
    assert_eq!(pool.stats().idle, 2);
}

#[tokio::test(start_paused = true)]
async fn keep_counts_lent_workers_toward_the_floor() {
    let farm = Farm::new();
    let pool = parallel_evicting(&farm, 3, idle_timeout(secs(1)).keep(2));
    settle().await;
    let lease = pool.lend().await.unwrap();
    assert_eq!(lease.slot(), 0);

    advance(secs(5)).await;
    // Slot 0 is lent; of the two idle ones, one goes and one stays.
    assert_eq!(farm.alive(), 2);
    let stats = pool.stats();
    assert_eq!((stats.lent, stats.idle), (1, 1));
    assert!(!farm.has_exited(lease.id));

    // Once it comes back, both running workers are at the floor: none goes.
    drop(lease);
    for _ in 0..10 {
        advance(secs(60)).await;
    }
    assert_eq!(farm.alive(), 2);
    assert_eq!(pool.stats().idle, 2);
}

#[tokio::test(start_paused = true)]
async fn the_next_job_that_needs_an_evicted_slot_starts_a_new_worker() {
    let farm = Farm::new();
    let pool = on_demand_evicting(&farm, 1, idle_timeout(secs(1)));
    let first = pool.run(async |w: &mut Fake| w.id).await.unwrap();
    advance(secs(1)).await;
    assert!(farm.has_exited(first));

    let second = pool.run(async |w: &mut Fake| w.id).await.unwrap();
    assert_ne!(second, first, "a new worker was made");
    assert_eq!(farm.made(), 2);
    assert_eq!(farm.started_slots(), [0, 0]);
}

#[tokio::test(start_paused = true)]
async fn an_eager_startup_does_not_refill_an_evicted_slot_by_itself() {
    let farm = Farm::new();
    let pool = parallel_evicting(&farm, 2, idle_timeout(secs(1)));
    settle().await;
    assert_eq!(farm.made(), 2);

    advance(secs(1)).await;
    assert_eq!(farm.alive(), 0, "both evicted");
    // Long past any back-off, nothing was started again.
    advance(secs(3600)).await;
    assert_eq!(farm.made(), 2);
    let stats = pool.stats();
    assert_eq!((stats.starting, stats.idle), (0, 0));

    // A job starts one worker; the startup does not refill the other slot.
    pool.run(async |w: &mut Fake| w.work(ms(5)).await)
        .await
        .unwrap();
    advance(secs(120)).await;
    assert_eq!(farm.made(), 3);
    assert_eq!(farm.started_slots(), [0, 1, 0]);
}

#[tokio::test(start_paused = true)]
async fn no_eviction_keeps_idle_workers_until_the_pool_closes() {
    let farm = Farm::new();
    let pool = parallel_evicting(&farm, 3, NoEviction);
    settle().await;
    for _ in 0..48 {
        advance(secs(3600)).await;
    }
    assert_eq!(farm.alive(), 3);
    assert_eq!(pool.stats().idle, 3);
    pool.close().await;
    assert_eq!(farm.alive(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_default_eviction_is_none() {
    let farm = Farm::new();
    let pool = parallel(&farm, 2);
    settle().await;
    advance(secs(30 * 24 * 3600)).await;
    assert_eq!(farm.alive(), 2);
    assert_eq!(pool.stats().idle, 2);
}

#[test]
fn idle_timeout_refuses_zero() {
    let err = IdleTimeout::new(Duration::ZERO).unwrap_err();
    assert_eq!(err.option, "eviction.after");
    assert!(err.message.contains("above 0"), "{}", err.message);
    assert!(err.message.contains("2147483647 ms"), "{}", err.message);
    assert!(err.to_string().contains("eviction.after"), "{err}");
}

#[test]
fn idle_timeout_refuses_more_than_2147483647_ms() {
    for after in [
        Duration::from_millis(2_147_483_648),
        MAX_IDLE_TIMEOUT + Duration::from_nanos(1),
        Duration::from_secs(u64::MAX),
    ] {
        let err = IdleTimeout::new(after).unwrap_err();
        assert_eq!(err.option, "eviction.after", "{after:?}");
        assert!(err.message.contains("2147483647 ms"), "{}", err.message);
    }
}

#[test]
fn idle_timeout_takes_exactly_2147483647_ms_and_the_smallest_value() {
    assert_eq!(MAX_IDLE_TIMEOUT, Duration::from_millis(2_147_483_647));
    let max = IdleTimeout::new(Duration::from_millis(2_147_483_647)).unwrap();
    assert_eq!(max.after(), MAX_IDLE_TIMEOUT);
    let min = IdleTimeout::new(Duration::from_nanos(1)).unwrap();
    assert_eq!(min.after(), Duration::from_nanos(1));
}

#[tokio::test(start_paused = true)]
async fn the_longest_idle_timeout_evicts_after_about_25_days() {
    let farm = Farm::new();
    let pool = on_demand_evicting(&farm, 1, IdleTimeout::new(MAX_IDLE_TIMEOUT).unwrap());
    drop(pool.lend().await.unwrap());
    advance(MAX_IDLE_TIMEOUT - ms(1)).await;
    assert_eq!(farm.alive(), 1);
    advance(ms(1)).await;
    assert_eq!(farm.alive(), 0);
}

/// Lets workers in slot 1 and above go after 1 s idle; never slot 0.
/// Records every call, to check what the pool tells it.
#[derive(Debug, Clone, Default)]
struct SpareTheFirst {
    calls: Arc<Mutex<Vec<(IdleWorker, Instant)>>>,
}

impl Eviction for SpareTheFirst {
    fn idle(&self, worker: IdleWorker) -> Option<EvictAfter> {
        self.calls.lock().unwrap().push((worker, Instant::now()));
        if worker.slot == 0 {
            return None;
        }
        Some(Box::pin(tokio::time::sleep(secs(1))))
    }
}

#[tokio::test(start_paused = true)]
async fn a_custom_eviction_decides_per_worker_on_the_pools_clock() {
    let farm = Farm::new();
    let eviction = SpareTheFirst::default();
    let pool = parallel_evicting(&farm, 3, eviction.clone());
    settle().await;
    assert_eq!(pool.stats().idle, 3);

    advance(secs(1) - ms(1)).await;
    assert_eq!(farm.alive(), 3, "it waits on the paused clock");
    advance(ms(1)).await;
    assert_eq!(farm.alive(), 1);
    assert_eq!(farm.in_slot(0), Some(0), "slot 0 is never evicted");

    for _ in 0..24 {
        advance(secs(3600)).await;
    }
    assert_eq!(farm.alive(), 1);
    assert_eq!(pool.stats().idle, 1);
}

#[tokio::test(start_paused = true)]
async fn a_custom_eviction_is_asked_each_time_a_worker_turns_idle() {
    let farm = Farm::new();
    let eviction = SpareTheFirst::default();
    let pool = on_demand_evicting(&farm, 2, eviction.clone());
    let t0 = Instant::now();
    let a = pool.lend().await.unwrap();
    let b = pool.lend().await.unwrap();
    assert!(eviction.calls.lock().unwrap().is_empty(), "lent: not idle");
    advance(ms(300)).await;
    drop(b);
    advance(ms(200)).await;
    drop(a);
    settle().await;

    let calls = eviction.calls.lock().unwrap().clone();
    let seen: Vec<(usize, Duration)> = calls
        .iter()
        .map(|(w, _)| (w.slot, w.idle_since - t0))
        .collect();
    assert_eq!(seen, [(1, ms(300)), (0, ms(500))]);
    for (worker, at) in &calls {
        assert_eq!(worker.idle_since, *at, "asked as it turns idle");
        assert_eq!(worker.started, t0);
        assert_eq!(worker.ran_for(*at), *at - t0);
    }
    // Slot 1 turned idle at 300 ms: a job that takes it at 1200 ms keeps it.
    advance(ms(700)).await;
    let c = pool.lend().await.unwrap();
    let d = pool.lend().await.unwrap();
    assert_eq!((c.slot(), d.slot()), (0, 1));
    advance(secs(5)).await;
    assert_eq!(farm.alive(), 2);
    assert_eq!(farm.made(), 2);
}

#[tokio::test(start_paused = true)]
async fn only_workers_in_running_slots_are_evicted() {
    let farm = Farm::new();
    let steer = Steer::new(3, 3);
    let pool = Pool::builder(farm.factory())
        .startup(Parallel)
        .sizing(steer.clone())
        .eviction(idle_timeout(secs(10)))
        .build()
        .unwrap();
    settle().await;
    // Slot 0 is lent for a long while, so the floor of 0 never holds back.
    let lease = pool.lend().await.unwrap();
    assert_eq!(lease.slot(), 0);

    // Slot 2 stops running: its worker is kept.
    steer.set_size(2);
    advance(Steer::TICK).await;
    let stats = pool.stats();
    assert_eq!(
        (stats.size, stats.lent, stats.idle, stats.kept),
        (2, 1, 1, 1)
    );

    advance(secs(10)).await;
    assert!(farm.has_exited(1), "slot 1 runs and was idle 10 s");
    assert!(!farm.has_exited(2), "slot 2 is kept, never evicted");
    for _ in 0..24 {
        advance(secs(3600)).await;
    }
    assert!(!farm.has_exited(2));
    let stats = pool.stats();
    assert_eq!((stats.lent, stats.idle, stats.kept), (1, 0, 1));

    // Slot 0 comes back and is evicted; the kept worker stays.
    drop(lease);
    advance(secs(10)).await;
    assert!(farm.has_exited(0));
    assert!(!farm.has_exited(2));

    // Running again, slot 2 is idle in a running slot, and evicted in turn.
    steer.set_size(3);
    advance(Steer::TICK).await;
    assert_eq!((pool.stats().idle, pool.stats().kept), (1, 0));
    advance(secs(10)).await;
    assert!(farm.has_exited(2));
    assert_eq!(farm.alive(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_eviction_emits_worker_evicted() {
    let farm = Farm::new();
    let pool = parallel_evicting(&farm, 2, idle_timeout(secs(7)));
    let mut events = pool.events();
    settle().await;
    let lease = pool.lend().await.unwrap();
    advance(secs(7)).await;
    let evicted: Vec<Event> = drain(&mut events)
        .into_iter()
        .filter(|e| e.name() == "worker:evicted")
        .collect();
    assert_eq!(
        evicted,
        [Event::Evicted {
            slot: 1,
            pid: None,
            idle_for: secs(7)
        }]
    );
    drop(lease);
    advance(secs(7)).await;
    let names: Vec<_> = drain(&mut events).iter().map(Event::name).collect();
    assert_eq!(names, ["worker:evicted"]);
}

#[tokio::test(start_paused = true)]
async fn a_worker_idle_before_eviction_was_turned_on_counts_from_the_change() {
    // Under `NoEviction` the pool does not read the clock when a worker
    // turns idle, so an eviction set later counts from the change.
    let farm = Farm::new();
    let pool = parallel_evicting(&farm, 1, NoEviction);
    settle().await;
    drop(pool.lend().await.unwrap()); // idle since t = 0
    let id = farm.in_slot(0).unwrap();
    advance(secs(20)).await;
    pool.reconfigure(kennel::Reconfig::new().eviction(idle_timeout(secs(30))))
        .unwrap();
    advance(ms(29_999)).await; // t = 49.999
    assert!(!farm.has_exited(id), "counted from the change at t = 20");
    advance(ms(1)).await;
    assert!(farm.has_exited(id), "evicted at 20 + 30 s");
}
