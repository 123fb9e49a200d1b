//! Tenants sharing a pool (ADR 0065): weighted fair shares of the workers
//! while they are scarce, work conservation, priorities within a tenant and
//! their bound on starvation, each tenant's limits, weights changed live,
//! and keys: a key switch charged to its tenant, a load kept off the worker
//! of a key another tenant uses.
//! In-memory workers on the paused clock.
mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kennel::{Error, Parallel, Pool, Priority, Reconfig, RunOptions, Tenant, TenantShare};
use support::{Fake, Farm, fixed, ms, settle};

/// The order in which jobs got their workers: each job's tenant (and
/// priority).
type Log = Arc<Mutex<Vec<(String, Priority)>>>;

fn tenant(name: &str) -> Tenant {
    Tenant::new(name).unwrap()
}

/// A pool of `n` workers with these tenants' shares.
fn pool(farm: &Farm, n: usize, shares: &[(&str, TenantShare)]) -> Pool<Fake> {
    let tenants = shares.iter().map(|(t, s)| (tenant(t), *s)).collect();
    fixed(farm, Parallel, n)
        .with_options(move |o| {
            o.tenants = tenants;
            o.max_waiting = Some(1_000);
        })
        .build()
        .unwrap()
}

/// Queues `count` jobs of `who` at `priority`, each 100 ms of work, that
/// log themselves when they get their worker.
fn queue(pool: &Pool<Fake>, log: &Log, who: &str, priority: Priority, count: usize) {
    for _ in 0..count {
        let (pool, log, who) = (pool.clone(), log.clone(), who.to_owned());
        tokio::spawn(async move {
            let options = RunOptions::new().tenant(tenant(&who)).priority(priority);
            pool.run_with(options, async |w: &mut Fake| {
                log.lock().unwrap().push((who, priority));
                w.work(ms(100)).await;
            })
            .await
        });
    }
}

/// The tenants of the grants `range` of the log.
fn grants(log: &Log, range: std::ops::Range<usize>) -> Vec<String> {
    log.lock().unwrap()[range]
        .iter()
        .map(|(t, _)| t.clone())
        .collect()
}

fn count(of: &[String], who: &str) -> usize {
    of.iter().filter(|t| *t == who).count()
}

/// Lets the pool run until `n` jobs have got workers.
async fn until_granted(log: &Log, n: usize) {
    for _ in 0..100_000 {
        if log.lock().unwrap().len() >= n {
            return;
        }
        tokio::time::advance(ms(10)).await;
        settle().await;
    }
    panic!("{n} jobs never got workers");
}

#[tokio::test(start_paused = true)]
async fn shares_under_contention_follow_the_weights() {
    let farm = Farm::new();
    let pool = pool(
        &farm,
        2,
        &[("a", TenantShare::weight(3)), ("b", TenantShare::weight(1))],
    );
    settle().await;
    let log = Log::default();
    // Both keep far more jobs waiting than the pool runs.
    queue(&pool, &log, "b", Priority::Normal, 100);
    settle().await;
    queue(&pool, &log, "a", Priority::Normal, 100);
    settle().await;
    until_granted(&log, 82).await;
    // The first two found idle workers; from then on both wait.
    let window = grants(&log, 2..82);
    assert!(
        (59..=61).contains(&count(&window, "a")),
        "3:1, within one job in 80: {window:?}"
    );
    // Never more than 3 of a's in a row, nor 2 of b's.
    let longest = |who: &str| {
        window
            .split(|t| t != who)
            .map(<[String]>::len)
            .max()
            .unwrap_or(0)
    };
    assert!(longest("a") <= 4 && longest("b") <= 2, "{window:?}");
}

#[tokio::test(start_paused = true)]
async fn an_idle_tenants_share_goes_to_the_others_and_is_not_banked() {
    let farm = Farm::new();
    let pool = pool(
        &farm,
        2,
        &[("a", TenantShare::weight(1)), ("b", TenantShare::weight(9))],
    );
    settle().await;
    let log = Log::default();
    // a alone: it has every worker, though its weight is a tenth.
    queue(&pool, &log, "a", Priority::Normal, 60);
    settle().await;
    let start = tokio::time::Instant::now();
    until_granted(&log, 40).await;
    assert!(
        start.elapsed() <= Duration::from_millis(1_910),
        "40 jobs of 100 ms on 2 workers, none idle: {:?}",
        start.elapsed()
    );
    // b comes now with as many: it gets its 9 in 10 from now on, not all
    // the workers for the 2 s it was away.
    queue(&pool, &log, "b", Priority::Normal, 40);
    settle().await;
    let seen = log.lock().unwrap().len();
    until_granted(&log, seen + 40).await;
    let window = grants(&log, seen + 2..seen + 40);
    assert!(
        (3..=5).contains(&count(&window, "a")),
        "a keeps about its tenth: {window:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_higher_priority_goes_first_and_a_low_one_still_moves() {
    let farm = Farm::new();
    let pool = pool(&farm, 2, &[]);
    settle().await;
    let log = Log::default();
    queue(&pool, &log, "a", Priority::Low, 60);
    settle().await;
    queue(&pool, &log, "a", Priority::High, 60);
    settle().await;
    until_granted(&log, 2 + 51).await;
    let levels: Vec<Priority> = log.lock().unwrap()[2..53].iter().map(|e| e.1).collect();
    let low = levels.iter().filter(|p| **p == Priority::Low).count();
    assert!(
        (2..=3).contains(&low),
        "1 in 17 while both wait: {levels:?}"
    );
    // The bound: a low job waits behind at most 17 high ones in a row.
    let longest_high = levels
        .split(|p| *p == Priority::Low)
        .map(<[Priority]>::len)
        .max()
        .unwrap_or(0);
    assert!(longest_high <= 17, "{levels:?}");
}

#[tokio::test(start_paused = true)]
async fn priorities_order_a_tenants_own_jobs_not_its_share() {
    let farm = Farm::new();
    let pool = pool(&farm, 2, &[]);
    settle().await;
    let log = Log::default();
    queue(&pool, &log, "a", Priority::High, 50);
    settle().await;
    queue(&pool, &log, "b", Priority::Low, 50);
    settle().await;
    until_granted(&log, 42).await;
    let window = grants(&log, 2..42);
    assert_eq!(
        count(&window, "b"),
        20,
        "b's low jobs still get b's half: {window:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_tenant_over_max_queued_is_refused_with_its_own_projected_wait() {
    let farm = Farm::new();
    let pool = pool(&farm, 1, &[("a", TenantShare::weight(1).max_queued(2))]);
    settle().await;
    let log = Log::default();
    queue(&pool, &log, "a", Priority::Normal, 3);
    settle().await;
    assert_eq!(pool.stats().waiting, 2);
    let refused = pool
        .run_with(
            RunOptions::new().tenant(tenant("a")),
            async |_: &mut Fake| (),
        )
        .await
        .unwrap_err();
    let Error::TenantLimit {
        tenant: Some(t),
        retry_after,
    } = refused
    else {
        panic!("{refused}");
    };
    assert_eq!(t.as_str(), "a");
    // Three jobs ahead of it on one worker, a second each before any job
    // was timed.
    assert_eq!(retry_after, Duration::from_secs(3));
    // Another tenant still waits in the pool's queue.
    let other = pool.clone();
    let b = tokio::spawn(async move {
        let options = RunOptions::new().tenant(tenant("b"));
        other.run_with(options, async |_: &mut Fake| ()).await
    });
    settle().await;
    assert_eq!(pool.stats().waiting, 3);
    until_granted(&log, 3).await;
    assert!(b.await.unwrap().is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_tenant_at_max_running_waits_while_others_use_the_free_workers() {
    let farm = Farm::new();
    let pool = pool(&farm, 3, &[("a", TenantShare::weight(1).max_running(1))]);
    settle().await;
    let log = Log::default();
    queue(&pool, &log, "a", Priority::Normal, 3);
    settle().await;
    let stats = pool.stats();
    assert_eq!((stats.lent, stats.idle, stats.waiting), (1, 2, 2));
    queue(&pool, &log, "b", Priority::Normal, 2);
    settle().await;
    let stats = pool.stats();
    assert_eq!((stats.lent, stats.idle, stats.waiting), (3, 0, 2));
    // As each of a's jobs ends, the next one of a's runs.
    until_granted(&log, 5).await;
    assert_eq!(grants(&log, 0..5), ["a", "b", "b", "a", "a"]);
}

#[tokio::test(start_paused = true)]
async fn weights_change_on_a_live_pool() {
    let farm = Farm::new();
    let pool = pool(
        &farm,
        2,
        &[("a", TenantShare::weight(1)), ("b", TenantShare::weight(1))],
    );
    settle().await;
    let log = Log::default();
    queue(&pool, &log, "a", Priority::Normal, 100);
    settle().await;
    queue(&pool, &log, "b", Priority::Normal, 100);
    settle().await;
    until_granted(&log, 22).await;
    let even = grants(&log, 2..22);
    assert_eq!(count(&even, "a"), 10, "{even:?}");
    pool.reconfigure(Reconfig::new().with_options(|o| {
        o.tenants.insert(tenant("a"), TenantShare::weight(4));
    }))
    .unwrap();
    let seen = log.lock().unwrap().len();
    until_granted(&log, seen + 40).await;
    let after = grants(&log, seen..seen + 40);
    assert!(
        (31..=33).contains(&count(&after, "a")),
        "4:1 from the change on: {after:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_tenant_name_and_weight_are_checked() {
    assert!(Tenant::new("a b").is_err());
    let farm = Farm::new();
    let err = fixed(&farm, Parallel, 1)
        .with_options(|o| {
            o.tenants.insert(tenant("a"), TenantShare::weight(0));
        })
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("tenants"), "{err}");
    assert!(err.to_string().contains("1 to 1000"), "{err}");
}

#[path = "keyed/holder.rs"]
mod holder;

/// A job of tenant `t`, of key `k` if set, that does nothing, on a keyed
/// pool.
async fn keyed_job(pool: &Pool<holder::Holder>, t: &str, k: Option<&str>) -> Result<(), Error> {
    let mut options = RunOptions::new().tenant(tenant(t));
    if let Some(k) = k {
        options = options.key(holder::key(k));
    }
    pool.run_with(options, async |_: &mut holder::Holder| ())
        .await
}

#[tokio::test(start_paused = true)]
async fn a_key_switch_is_charged_to_the_tenant_that_caused_it() {
    let (keys, born) = holder::new_log();
    let pool = holder::builder(2, &keys, &born)
        .with_options(|o| o.max_waiting = Some(1_000))
        .build()
        .unwrap();
    // Time the jobs and the loads first: a load (1 s) is ten jobs (100 ms).
    holder::job(&pool, "b", ms(100)).await.unwrap();
    holder::job(&pool, "warm", ms(100)).await.unwrap();
    let log = Log::default();
    let run = |who: &'static str, key: String| {
        let (pool, log) = (pool.clone(), log.clone());
        tokio::spawn(async move {
            let options = RunOptions::new().tenant(tenant(who)).key(holder::key(&key));
            pool.run_with(options, async |_: &mut holder::Holder| {
                log.lock().unwrap().push((who.to_owned(), Priority::Normal));
                tokio::time::sleep(ms(100)).await;
            })
            .await
        })
    };
    // a spreads its jobs over 40 keys, each a load; b keeps to one key.
    for i in 0..40 {
        run("a", format!("a{i}"));
    }
    for _ in 0..200 {
        run("b", "b".to_owned());
    }
    settle().await;
    until_granted(&log, 120).await;
    let window = grants(&log, 0..120);
    let (a, b) = (count(&window, "a"), count(&window, "b"));
    assert!(
        a >= 4 && b >= 8 * a,
        "a pays 11 job times a job (its load and the job), b 1: a {a}, b {b}"
    );
}

#[tokio::test(start_paused = true)]
async fn another_tenants_load_leaves_the_worker_of_a_key_in_use() {
    let (keys, born) = holder::new_log();
    let pool = holder::builder(2, &keys, &born)
        .with_options(|o| o.max_waiting = Some(1_000))
        .build()
        .unwrap();
    let run = |who: &'static str, key: &'static str, took: Duration| {
        let pool = pool.clone();
        tokio::spawn(async move {
            let start = tokio::time::Instant::now();
            let options = RunOptions::new().tenant(tenant(who)).key(holder::key(key));
            pool.run_with(options, async |_: &mut holder::Holder| {
                tokio::time::sleep(took).await;
            })
            .await
            .unwrap();
            start.elapsed()
        })
    };
    let finish = async |job: tokio::task::JoinHandle<Duration>| {
        while !job.is_finished() {
            tokio::time::advance(ms(10)).await;
            settle().await;
        }
        job.await.unwrap()
    };
    // b's key on one worker; a holds the other for 5 s.
    finish(run("b", "b", ms(100))).await;
    let long = run("a", "a0", Duration::from_secs(5));
    settle().await;
    // a's next job, of another key, waits past twice `max_key_wait`: the
    // idle worker holds b, which b used a moment ago and is owed.
    let next = run("a", "a1", ms(100));
    for _ in 0..100 {
        tokio::time::advance(ms(10)).await;
        settle().await;
    }
    let took = finish(run("b", "b", ms(100))).await;
    assert_eq!(took, ms(100), "b's job found its key where it was");
    // Then a's job takes b's worker once b has left its key unused for ten
    // `max_key_wait`s (b's job ended at 1.1 s): at 3.6 s, not when a's own
    // worker is free at 5 s. Its load and its job take 1.1 s more.
    assert_eq!(finish(next).await, ms(4_700));
    drop(long);
}

#[tokio::test(start_paused = true)]
async fn a_job_kept_off_another_tenants_key_takes_the_worker_once_that_key_goes_unused() {
    let (keys, born) = holder::new_log();
    let pool = holder::builder(1, &keys, &born)
        .with_options(|o| o.keys_per_worker = 2)
        .build()
        .unwrap();
    // b's key on the only worker, which has room for one more.
    keyed_job(&pool, "b", Some("b")).await.unwrap();
    // a has had more than b lately: b is owed.
    for _ in 0..2 {
        keyed_job(&pool, "a", None).await.unwrap();
    }
    let start = tokio::time::Instant::now();
    // a's job of another key stays off b's worker while b used its key
    // lately (ten `max_key_wait`s), then takes it: nothing else happens
    // in the pool meanwhile to look at it again.
    let a = keyed_job(&pool, "a", Some("a"));
    tokio::time::timeout(Duration::from_secs(60), a)
        .await
        .expect("a got the worker")
        .unwrap();
    assert_eq!(start.elapsed(), ms(2_500) + holder::LOAD);
}

#[tokio::test(start_paused = true)]
async fn a_key_loaded_ahead_for_no_job_keeps_no_tenant_off_its_worker() {
    let (keys, born) = holder::new_log();
    let pool = holder::builder(1, &keys, &born)
        .with_options(|o| {
            o.min_workers_per_key.insert(holder::key("w"), 1);
        })
        .build()
        .unwrap();
    settle().await;
    tokio::time::advance(holder::LOAD).await;
    settle().await;
    // a has had jobs; `w` was loaded ahead, for no tenant's job.
    for _ in 0..2 {
        keyed_job(&pool, "a", None).await.unwrap();
    }
    let start = tokio::time::Instant::now();
    keyed_job(&pool, "a", Some("a")).await.unwrap();
    // Its wait (`max_key_wait`: the only worker holds a key kept warm),
    // then its load: no other tenant's use to wait out.
    assert_eq!(start.elapsed(), ms(250) + holder::LOAD);
}

#[tokio::test(start_paused = true)]
async fn a_lend_that_may_not_queue_respects_max_running() {
    let farm = Farm::new();
    let pool = pool(&farm, 2, &[("a", TenantShare::weight(1).max_running(1))]);
    settle().await;
    let as_a = RunOptions::new().tenant(tenant("a"));
    let held = pool.try_lend_with(&as_a).await.unwrap();
    assert!(held.is_some(), "a worker is free");
    // A worker is still free, but a holds its one.
    assert!(pool.try_lend_with(&as_a).await.unwrap().is_none());
    let as_b = RunOptions::new().tenant(tenant("b"));
    assert!(pool.try_lend_with(&as_b).await.unwrap().is_some());
    assert_eq!(pool.stats().waiting, 0, "nothing queued");
}
