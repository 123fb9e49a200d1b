//! Lending, the dispatch order, leases.
mod support;

use kennel::{Dispatch, Event, Fixed, Parallel, Pool};
use support::{
    Fake, Farm, advance, drain, fixed, hold, ms, on_demand, parallel, secs, settle,
    spawn_lend_slot, spawn_run_id,
};

#[tokio::test(start_paused = true)]
async fn run_lends_a_worker_and_returns_the_jobs_result() {
    let farm = Farm::new();
    let pool = parallel(&farm, 2);
    let got = pool
        .run(async |w: &mut Fake| w.work(ms(10)).await)
        .await
        .unwrap();
    assert_eq!(got, 0);
    pool.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_job_takes_the_lowest_idle_slot() {
    let farm = Farm::new();
    let pool = parallel(&farm, 3);
    settle().await;
    assert_eq!(pool.stats().idle, 3);
    let a = pool.lend().await.unwrap();
    let b = pool.lend().await.unwrap();
    assert_eq!((a.slot(), b.slot()), (0, 1));
    drop(a);
    let c = pool.lend().await.unwrap();
    assert_eq!(c.slot(), 0, "slot 0 is idle again and lowest");
}

#[tokio::test(start_paused = true)]
async fn jobs_run_one_at_a_time_reuse_one_worker() {
    let farm = Farm::new();
    let pool = parallel(&farm, 4);
    for _ in 0..10 {
        let id = pool
            .run(async |w: &mut Fake| w.work(ms(5)).await)
            .await
            .unwrap();
        assert_eq!(id, farm.in_slot(0).unwrap());
    }
    let used: Vec<u64> = hold(&pool, 4).await.iter().map(|l| l.jobs).collect();
    assert_eq!(used, [10, 0, 0, 0]);
}

#[tokio::test(start_paused = true)]
async fn a_job_takes_a_starting_worker_not_awaited_before_starting_a_new_one() {
    let farm = Farm::with_warmup(secs(5));
    let pool = parallel(&farm, 3);
    settle().await;
    assert_eq!(farm.made(), 3, "parallel starts all three");
    // Three jobs take the three starting workers; none starts a new worker.
    let jobs: Vec<_> = (0..3)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move { pool.lend().await.map(|l| l.slot()) })
        })
        .collect();
    settle().await;
    assert_eq!(pool.stats().waiting, 3);
    assert_eq!(farm.made(), 3);
    advance(secs(5)).await;
    let mut slots = Vec::new();
    for j in jobs {
        slots.push(j.await.unwrap().unwrap());
    }
    slots.sort_unstable();
    assert_eq!(slots, [0, 1, 2]);
}

#[tokio::test(start_paused = true)]
async fn a_job_starts_a_new_worker_in_the_lowest_empty_running_slot() {
    let farm = Farm::with_warmup(secs(1));
    let pool = on_demand(&farm, 3);
    settle().await;
    assert_eq!(farm.made(), 0, "on demand starts nothing");
    let first = spawn_lend_slot(&pool);
    settle().await;
    assert_eq!(farm.started_slots(), [0]);
    let second = spawn_lend_slot(&pool);
    settle().await;
    assert_eq!(
        farm.started_slots(),
        [0, 1],
        "slot 0 is awaited, so a new worker starts"
    );
    advance(secs(1)).await;
    assert_eq!(first.await.unwrap().unwrap(), 0);
    assert_eq!(second.await.unwrap().unwrap(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_job_waits_in_a_fifo_queue_when_every_worker_is_busy() {
    let farm = Farm::new();
    let pool = parallel(&farm, 1);
    let held = pool.lend().await.unwrap();
    let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut jobs = Vec::new();
    for n in 0..3 {
        let pool = pool.clone();
        let order = order.clone();
        jobs.push(tokio::spawn(async move {
            pool.run(async |w: &mut Fake| {
                order.lock().unwrap().push(n);
                w.work(ms(10)).await
            })
            .await
        }));
        settle().await;
    }
    assert_eq!(pool.stats().waiting, 3);
    drop(held);
    for j in jobs {
        j.await.unwrap().unwrap();
    }
    assert_eq!(*order.lock().unwrap(), [0, 1, 2]);
}

#[tokio::test(start_paused = true)]
async fn a_worker_that_becomes_idle_goes_to_the_oldest_waiting_job() {
    let farm = Farm::with_warmup(secs(10));
    let pool = on_demand(&farm, 2);
    let held = pool.lend().await.unwrap();
    assert_eq!(held.slot(), 0);
    // Slot 1 warms up for the first job; a second job queues behind it.
    let p = pool.clone();
    let first = tokio::spawn(async move { p.lend().await });
    settle().await;
    let p = pool.clone();
    let second = tokio::spawn(async move { p.lend().await });
    settle().await;
    assert_eq!(pool.stats().waiting, 2);
    // Slot 0 comes back before slot 1 is warm: it goes to the oldest job.
    drop(held);
    settle().await;
    let first = first.await.unwrap().unwrap();
    assert_eq!(first.slot(), 0);
    assert_eq!(pool.stats().waiting, 1);
    advance(secs(10)).await;
    let second = second.await.unwrap().unwrap();
    assert_eq!(second.slot(), 1, "the warm-up went on for the next job");
}

#[tokio::test(start_paused = true)]
async fn round_robin_takes_the_next_idle_slot_after_the_last_one_lent() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 3)
        .with_options(|o| o.dispatch = Dispatch::RoundRobin)
        .build()
        .unwrap();
    settle().await;
    let mut slots = Vec::new();
    for _ in 0..5 {
        let lease = pool.lend().await.unwrap();
        slots.push(lease.slot());
    }
    assert_eq!(slots, [0, 1, 2, 0, 1]);
}

#[tokio::test(start_paused = true)]
async fn dropping_a_lease_returns_its_worker() {
    let farm = Farm::new();
    let pool = parallel(&farm, 1);
    let lease = pool.lend().await.unwrap();
    let id = lease.id;
    assert_eq!(pool.stats().lent, 1);
    drop(lease);
    assert_eq!(pool.stats().idle, 1);
    assert!(!farm.has_exited(id));
    assert_eq!(pool.lend().await.unwrap().id, id);
}

#[tokio::test(start_paused = true)]
async fn a_failed_lease_retires_its_worker_and_it_is_replaced() {
    let farm = Farm::new();
    let pool = parallel(&farm, 1);
    let mut events = pool.events();
    let lease = pool.lend().await.unwrap();
    let id = lease.id;
    lease.fail();
    settle().await;
    assert!(farm.has_exited(id));
    assert_eq!(farm.made(), 2, "replaced at once, no back-off");
    let names = support::names(&mut events);
    assert!(names.contains(&"worker:retired"), "{names:?}");
    assert!(names.contains(&"worker:respawned"), "{names:?}");
    assert_ne!(pool.lend().await.unwrap().id, id);
}

#[tokio::test(start_paused = true)]
async fn a_lease_dropped_while_its_thread_panics_retires_the_worker() {
    let farm = Farm::new();
    let pool = parallel(&farm, 1);
    let p = pool.clone();
    let job = tokio::spawn(async move {
        let _lease = p.lend().await.unwrap();
        panic!("the consumer crashed");
    });
    assert!(job.await.unwrap_err().is_panic());
    settle().await;
    assert!(farm.has_exited(0));
    assert_eq!(farm.made(), 2);
    assert_eq!(pool.lend().await.unwrap().id, 1);
}

#[tokio::test(start_paused = true)]
async fn a_job_that_panics_inside_run_retires_its_worker() {
    let farm = Farm::new();
    let pool = parallel(&farm, 1);
    let p = pool.clone();
    let job = tokio::spawn(async move {
        p.run(async |_w: &mut Fake| -> () { panic!("job bug") })
            .await
    });
    assert!(job.await.unwrap_err().is_panic());
    settle().await;
    assert!(farm.has_exited(0));
    assert_eq!(pool.run(async |w: &mut Fake| w.id).await.unwrap(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_worker_that_exits_mid_job_fails_the_job_as_crashed() {
    let farm = Farm::new();
    let pool = parallel(&farm, 1);
    let f = farm.clone();
    let err = pool
        .run(async |w: &mut Fake| {
            f.exit(w.id);
            w.work(secs(3600)).await
        })
        .await
        .unwrap_err();
    assert!(matches!(err, kennel::Error::Crashed { .. }), "{err}");
    assert_eq!(err.to_string(), "worker failed before responding");
    settle().await;
    assert_eq!(pool.run(async |w: &mut Fake| w.id).await.unwrap(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_lease_dropped_on_a_thread_outside_the_runtime_returns_its_worker() {
    let farm = Farm::new();
    let pool = Pool::builder(farm.factory())
        .sizing(Fixed(1))
        .eviction(kennel::IdleTimeout::new(secs(10)).unwrap())
        .build()
        .unwrap();
    let lease = pool.lend().await.unwrap();
    std::thread::spawn(move || drop(lease)).join().unwrap();
    assert_eq!(pool.stats().idle, 1);
    // Its eviction timer runs on the pool's runtime.
    advance(secs(10)).await;
    assert!(farm.has_exited(0));
}

#[tokio::test(start_paused = true)]
async fn a_worker_that_ended_as_its_job_returned_is_never_lent_again() {
    let farm = Farm::new();
    let pool = parallel(&farm, 1);
    let held = pool.lend().await.unwrap();
    let next = spawn_run_id(&pool);
    settle().await;
    assert_eq!(pool.stats().waiting, 1);
    // The worker ends just as its job gives it back, before the pool's
    // watcher has seen the exit.
    let mut events = pool.events();
    held.crash();
    drop(held);
    assert_eq!(
        next.await.unwrap().unwrap(),
        1,
        "the next job got a new worker"
    );
    let names = support::names(&mut events);
    assert!(names.contains(&"worker:crashed"), "{names:?}");
}

#[tokio::test(start_paused = true)]
async fn try_lend_gives_no_worker_when_it_would_have_to_queue_and_turns_nothing_away() {
    let farm = Farm::new();
    let pool = parallel(&farm, 1);
    settle().await;
    let mut events = pool.events();
    let held = pool
        .try_lend()
        .await
        .unwrap()
        .expect("the idle worker is lent");
    assert!(pool.try_lend().await.unwrap().is_none(), "it would queue");
    assert_eq!(pool.stats().waiting, 0, "it did not queue");
    assert!(
        !drain(&mut events)
            .iter()
            .any(|e| matches!(e, Event::Rejected { .. })),
        "no job was turned away"
    );
    drop(held);
    assert_eq!(pool.try_lend().await.unwrap().map(|l| l.slot()), Some(0));
}

#[tokio::test(start_paused = true)]
async fn try_lend_waits_for_the_worker_it_starts_in_an_empty_slot() {
    let farm = Farm::with_warmup(secs(5));
    let pool = on_demand(&farm, 1);
    let p = pool.clone();
    let job = tokio::spawn(async move { p.try_lend().await.map(|l| l.map(|l| l.slot())) });
    settle().await;
    assert_eq!(farm.made(), 1, "it started a worker for itself");
    assert!(!job.is_finished(), "and waits for its warm-up");
    advance(secs(5)).await;
    assert_eq!(job.await.unwrap().unwrap(), Some(0));
}
