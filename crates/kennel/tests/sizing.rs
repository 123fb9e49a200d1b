//! The capacity, the fixed and resource sizings, and the computer a test
//! controls.
mod support;

use kennel::{
    Error, Event, Fixed, IdleTimeout, OnDemand, OrderedReady, Parallel, Pool, Resources, Sizing,
    TestComputer,
};
use support::{
    Fake, Farm, advance, drain, fixed, ms, parallel, secs, settle, spawn_lend_id, within,
};

const GIB: u64 = 1 << 30;

fn resources(per_worker: u64, computer: &TestComputer) -> Resources {
    Resources::new(per_worker, computer.clone())
}

/// An on-demand pool of workers of 2 GiB each, sized by `Resources`.
fn on_demand_2gib(farm: &Farm, computer: &TestComputer) -> Pool<Fake> {
    Pool::builder(farm.factory())
        .startup(OnDemand)
        .sizing(resources(2 * GIB, computer))
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn fixed_zero_is_a_build_error_naming_sizing() {
    let farm = Farm::new();
    let err = Pool::builder(farm.factory())
        .sizing(Fixed(0))
        .build()
        .unwrap_err();
    assert_eq!(err.option, "sizing");
    assert!(err.to_string().contains("`sizing`"), "{err}");
    assert!(err.message.contains("Fixed(0)"), "{}", err.message);
    assert_eq!(farm.made(), 0);
}

#[tokio::test(start_paused = true)]
async fn fixed_n_gives_capacity_and_size_n() {
    for n in [1, 3, 16] {
        let farm = Farm::new();
        let pool = parallel(&farm, n);
        settle().await;
        let s = pool.stats();
        assert_eq!((s.capacity, s.size, s.idle), (n, n, n));
        assert_eq!(farm.made(), n);
    }
}

#[tokio::test(start_paused = true)]
async fn resources_runs_one_worker_per_cpu_when_memory_allows() {
    let farm = Farm::new();
    let computer = TestComputer::new(4, 8 * GIB);
    let pool = Pool::builder(farm.factory())
        .startup(Parallel)
        .sizing(resources(2 * GIB, &computer))
        .build()
        .unwrap();
    settle().await;
    let s = pool.stats();
    assert_eq!((s.capacity, s.size), (4, 4));
    assert_eq!(farm.made(), 4);
}

#[tokio::test(start_paused = true)]
async fn resources_is_bound_by_free_memory() {
    let farm = Farm::new();
    let computer = TestComputer::new(8, 5 * GIB);
    let pool = Pool::builder(farm.factory())
        .startup(Parallel)
        .sizing(resources(2 * GIB, &computer))
        .build()
        .unwrap();
    settle().await;
    let s = pool.stats();
    assert_eq!((s.capacity, s.size), (2, 2), "5 GiB / 2 GiB per worker");
    assert_eq!(farm.made(), 2);
}

#[tokio::test(start_paused = true)]
async fn resources_reads_the_computer_when_the_pool_is_built() {
    let computer = TestComputer::new(2, 64 * GIB);
    let sizing = resources(GIB, &computer);
    computer.set_cpus(6);
    computer.set_memory(4 * GIB);
    let farm = Farm::new();
    let pool = Pool::builder(farm.factory())
        .sizing(sizing)
        .build()
        .unwrap();
    assert_eq!(pool.stats().capacity, 4, "min(6 cpus, 4 GiB / 1 GiB)");
    computer.set_cpus(64);
    computer.set_memory(64 * GIB);
    assert_eq!(pool.stats().capacity, 4, "capacity is fixed once built");
}

#[test]
fn resources_plans_one_worker_and_a_warning_when_memory_allows_none() {
    let mut sizing = Resources::new(2 * GIB, TestComputer::new(4, GIB));
    let plan = sizing.plan().unwrap();
    assert_eq!((plan.capacity, plan.size), (1, 1));
    let warning = plan.warning.expect("a warning");
    assert!(warning.contains("allows no worker"), "{warning}");

    let mut enough = Resources::new(2 * GIB, TestComputer::new(4, 2 * GIB));
    let plan = enough.plan().unwrap();
    assert_eq!(plan.capacity, 1);
    assert_eq!(plan.warning, None, "memory for exactly one worker");
}

#[tokio::test(start_paused = true)]
async fn free_memory_below_one_worker_gives_capacity_one_and_a_warning_event() {
    let farm = Farm::new();
    let pool = Pool::builder(farm.factory())
        .startup(Parallel)
        .sizing(Resources::new(2 * GIB, TestComputer::new(4, GIB)))
        .build()
        .unwrap();
    // Sent during `build()`; the first subscriber still gets it.
    let mut events = pool.events();
    let seen = drain(&mut events);
    let warnings: Vec<&Event> = seen.iter().filter(|e| e.name() == "pool:warning").collect();
    assert_eq!(warnings.len(), 1, "{seen:?}");
    let Event::Warning { message } = warnings[0] else {
        unreachable!()
    };
    assert!(message.contains("allows no worker"), "{message}");
    assert_eq!(seen[0].name(), "pool:warning", "before any worker starts");

    settle().await;
    let s = pool.stats();
    assert_eq!((s.capacity, s.size, s.idle), (1, 1, 1));
    assert_eq!(farm.made(), 1, "the one worker runs");
    assert_eq!(pool.run(async |w: &mut Fake| w.id).await.unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn enough_memory_for_one_worker_gives_no_warning() {
    let farm = Farm::new();
    let pool = Pool::builder(farm.factory())
        .startup(Parallel)
        .sizing(Resources::new(2 * GIB, TestComputer::new(4, 2 * GIB)))
        .build()
        .unwrap();
    assert_eq!(pool.stats().capacity, 1);
    let names: Vec<_> = drain(&mut pool.events()).iter().map(Event::name).collect();
    assert_eq!(
        names,
        ["worker:starting"],
        "the build's events, and no warning"
    );
}

#[tokio::test(start_paused = true)]
async fn memory_per_worker_zero_is_a_build_error() {
    let farm = Farm::new();
    let err = Pool::builder(farm.factory())
        .sizing(Resources::new(0, TestComputer::new(4, 8 * GIB)))
        .build()
        .unwrap_err();
    assert_eq!(err.option, "memory_per_worker");
    assert!(err.to_string().contains("memory_per_worker"), "{err}");
    assert_eq!(farm.made(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_new_worker_starts_only_while_its_memory_is_free() {
    let farm = Farm::new();
    let computer = TestComputer::new(2, 4 * GIB);
    let pool = on_demand_2gib(&farm, &computer);
    assert_eq!(pool.stats().capacity, 2);
    let first = pool.lend().await.unwrap();
    assert_eq!(farm.made(), 1);

    // The memory is gone now: a second job queues instead of starting one.
    computer.set_memory(2 * GIB - 1);
    let p = pool.clone();
    let second = tokio::spawn(async move { p.lend().await.map(|l| (l.slot(), l.id)) });
    advance(secs(60)).await;
    assert_eq!(farm.made(), 1, "no worker started without its memory");
    let s = pool.stats();
    assert_eq!((s.waiting, s.starting, s.lent), (1, 0, 1));

    // It gets the first worker when that one comes back.
    drop(first);
    assert_eq!(within(secs(60), second).await.unwrap().unwrap(), (0, 0));

    // With the memory back, a second worker starts beside the first.
    computer.set_memory(4 * GIB);
    let a = within(secs(60), pool.lend()).await.unwrap();
    let b = within(secs(60), pool.lend()).await.unwrap();
    assert_eq!((a.slot(), b.slot()), (0, 1));
    assert_eq!(farm.made(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_job_refused_a_start_for_memory_gets_one_within_a_second_of_memory_freeing() {
    let farm = Farm::new();
    let computer = TestComputer::new(2, 4 * GIB);
    let pool = on_demand_2gib(&farm, &computer);
    let first = pool.lend().await.unwrap();
    computer.set_memory(2 * GIB - 1);
    let p = pool.clone();
    let second = tokio::spawn(async move { p.lend().await.map(|l| (l.slot(), l.id)) });
    // In steps, as a real clock runs: the pool looks again every second.
    for _ in 0..21 {
        advance(ms(500)).await;
    }
    assert_eq!(farm.made(), 1, "no worker started without its memory");

    // The memory frees while the first worker is still lent: no worker of
    // the pool returns or ends, yet the job gets a new worker.
    computer.set_memory(4 * GIB);
    let got = within(secs(1), second).await.unwrap().unwrap();
    assert_eq!(got, (1, 1), "a second worker, in slot 1");
    assert_eq!(pool.stats().lent, 1, "the first is still lent");
    drop(first);
}

/// `@zukhruf/pool`'s example: the test computer's free memory is what the
/// pool's workers may hold in all. Free 8 GiB, then 2.5 GiB, with 2 GiB per
/// worker: 1 worker runs.
#[tokio::test(start_paused = true)]
async fn the_test_computers_free_memory_is_a_budget_for_all_the_pools_workers() {
    let farm = Farm::new();
    let computer = TestComputer::new(4, 8 * GIB);
    let pool = on_demand_2gib(&farm, &computer);
    assert_eq!(pool.stats().capacity, 4);
    let first = pool.lend().await.unwrap();
    computer.set_memory(5 * GIB / 2);
    let second = spawn_lend_id(&pool);
    advance(secs(60)).await;
    assert_eq!(farm.made(), 1, "2.5 GiB holds one worker of 2 GiB, not two");
    assert_eq!(pool.stats().waiting, 1);
    drop(first);
    assert_eq!(within(secs(60), second).await.unwrap().unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_eager_startup_starts_a_worker_only_while_its_memory_is_free() {
    let farm = Farm::with_warmup(secs(1));
    let computer = TestComputer::new(3, 8 * GIB);
    let pool = Pool::builder(farm.factory())
        .startup(OrderedReady)
        .sizing(resources(2 * GIB, &computer))
        .build()
        .unwrap();
    assert_eq!(pool.stats().capacity, 3);
    settle().await;
    assert_eq!(farm.made(), 1, "ordered: slot 0 first");
    advance(ms(500)).await;
    computer.set_memory(GIB);
    advance(secs(30)).await;
    assert_eq!(farm.made(), 1, "slot 1 waits for its memory");
    let s = pool.stats();
    assert_eq!((s.idle, s.starting), (1, 0));
}

#[tokio::test(start_paused = true)]
async fn the_first_worker_always_starts_even_when_memory_is_short() {
    let farm = Farm::new();
    let computer = TestComputer::new(2, 4 * GIB);
    let pool = on_demand_2gib(&farm, &computer);
    computer.set_memory(0);
    assert_eq!(pool.run(async |w: &mut Fake| w.id).await.unwrap(), 0);
}

/// Sends `jobs` jobs at once and checks, after every step of the clock, that
/// no more than `capacity` workers live; returns the most seen at once.
async fn burst(farm: &Farm, pool: &Pool<Fake>, jobs: usize, capacity: usize) -> usize {
    let mut handles = Vec::new();
    for n in 0..jobs {
        let p = pool.clone();
        handles.push(tokio::spawn(async move {
            p.run(async |w: &mut Fake| w.work(ms(20 + (n as u64 * 13) % 90)).await)
                .await
        }));
    }
    let mut most = 0;
    let mut steps = 0;
    while handles.iter().any(|h| !h.is_finished()) {
        steps += 1;
        assert!(steps < 10_000, "the burst did not drain");
        for _ in 0..10 {
            tokio::task::yield_now().await;
            let s = pool.stats();
            let alive = farm.alive();
            assert!(alive <= capacity, "{alive} workers alive: {s:?}");
            assert!(s.starting + s.idle + s.lent + s.kept <= s.capacity, "{s:?}");
            assert_eq!(s.capacity, capacity);
            most = most.max(alive);
        }
        tokio::time::advance(ms(5)).await;
    }
    for h in handles {
        let r = h.await.unwrap();
        assert!(
            matches!(
                r,
                Ok(_) | Err(Error::Crashed { .. } | Error::WarmupFailed { .. })
            ),
            "{r:?}"
        );
    }
    most
}

#[tokio::test(start_paused = true)]
async fn the_pool_never_runs_more_workers_than_its_capacity_under_a_burst() {
    let farm = Farm::with_warmup(ms(150));
    let pool = fixed(&farm, OnDemand, 4)
        .with_options(|o| o.max_waiting = Some(100))
        .build()
        .unwrap();
    let most = burst(&farm, &pool, 100, 4).await;
    assert_eq!(most, 4, "the burst used every slot");
    assert_eq!(farm.made(), 4);
}

#[tokio::test(start_paused = true)]
async fn the_pool_never_runs_more_than_its_resource_capacity_while_workers_come_and_go() {
    let farm = Farm::with_warmup(ms(50));
    let computer = TestComputer::new(8, 7 * GIB);
    let pool = Pool::builder(farm.factory())
        .startup(Parallel)
        .sizing(resources(2 * GIB, &computer))
        .eviction(IdleTimeout::new(ms(30)).unwrap())
        .with_options(|o| o.max_waiting = Some(100))
        .build()
        .unwrap();
    // Workers crash now and then, and are evicted between waves.
    let f = farm.clone();
    let crasher = tokio::spawn(async move {
        for n in 0..40 {
            tokio::time::sleep(ms(37)).await;
            if let Some(id) = f.in_slot(n % 3) {
                f.exit(id);
            }
        }
    });
    let mut most = 0;
    for _ in 0..3 {
        most = most.max(burst(&farm, &pool, 100, 3).await);
        advance(ms(200)).await;
    }
    crasher.await.unwrap();
    assert_eq!(most, 3);
    assert!(farm.made() > 3, "workers were replaced: {}", farm.made());
}

#[tokio::test(start_paused = true)]
async fn a_worker_still_closing_counts_against_the_capacity() {
    let farm = Farm::new();
    let endings = support::Endings::default();
    let pool = Pool::builder(farm.watched_factory(&endings, secs(5)))
        .startup(OnDemand)
        .sizing(Fixed(2))
        .eviction(IdleTimeout::new(secs(1)).unwrap())
        .build()
        .unwrap();
    let (a, b) = (pool.lend().await.unwrap(), pool.lend().await.unwrap());
    drop((a, b));
    advance(secs(1)).await;
    // Both were evicted and take 5 s to close.
    assert_eq!(endings.of(0), Some(support::Ending::Closed));
    assert_eq!(endings.of(1), Some(support::Ending::Closed));
    assert_eq!(farm.alive(), 2);

    let mut jobs = Vec::new();
    for _ in 0..10 {
        let p = pool.clone();
        jobs.push(tokio::spawn(async move {
            p.run(async |w: &mut support::Watched| w.work(ms(100)).await)
                .await
        }));
    }
    for _ in 0..100 {
        advance(ms(100)).await;
        assert!(
            farm.alive() <= 2,
            "{} alive: {:?}",
            farm.alive(),
            pool.stats()
        );
    }
    for j in jobs {
        within(secs(60), j).await.unwrap().unwrap();
    }
    assert_eq!(farm.made(), 4);
}
