//! Keyed jobs (ADR 0062): a job of a key goes to a worker that holds it;
//! workers load keys (`load`) or are started for one (`spawn`); the keyed
//! lending order, its starvation bound, hot keys, LRU unloads. In-memory
//! workers on the paused clock (real processes are in kennel-process's
//! tests).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kennel::{
    BoxError, Error, Event, Fixed, Key, KeyBinding, Meter, Parallel, Pool, PoolBuilder, Reconfig,
    RetireReason, RunOptions, Worker,
};
use tokio::time::Instant;

const LOAD: Duration = Duration::from_secs(1);

/// What the workers did, in order: `"<worker> load <key>"`, `"<worker> unload <key>"`.
type Log = Arc<Mutex<Vec<String>>>;

/// A worker that holds keys: loading one takes [`LOAD`]; loading `"bad"` fails.
struct Holder {
    id: usize,
    /// The key it was started for (`spawn`).
    born_for: Option<Key>,
    held: BTreeSet<String>,
    log: Log,
    /// 100 MB per key held, as its meter reads it.
    memory: Arc<AtomicU64>,
}

const PER_KEY: u64 = 100_000_000;

impl Worker for Holder {
    async fn load(&mut self, key: &str) -> Result<(), BoxError> {
        tokio::time::sleep(LOAD).await;
        if key == "bad" {
            return Err("no such model: bad".into());
        }
        self.held.insert(key.to_owned());
        self.memory
            .store(PER_KEY * self.held.len() as u64, Ordering::SeqCst);
        self.log
            .lock()
            .unwrap()
            .push(format!("{} load {key}", self.id));
        Ok(())
    }

    async fn unload(&mut self, key: &str) -> Result<(), BoxError> {
        self.held.remove(key);
        self.memory
            .store(PER_KEY * self.held.len() as u64, Ordering::SeqCst);
        self.log
            .lock()
            .unwrap()
            .push(format!("{} unload {key}", self.id));
        Ok(())
    }

    fn meter(&self) -> Option<Meter> {
        let memory = self.memory.clone();
        Some(Meter::new(move || Some(memory.load(Ordering::SeqCst))))
    }
}

fn key(k: &str) -> Key {
    Key::new(k).unwrap()
}

fn builder(workers: usize, log: &Log, born: &Arc<Mutex<Vec<Option<Key>>>>) -> PoolBuilder<Holder> {
    let (log, born) = (log.clone(), born.clone());
    let made = Arc::new(Mutex::new(0));
    Pool::builder(move |info: kennel::SlotInfo| {
        let (log, born, made) = (log.clone(), born.clone(), made.clone());
        async move {
            let id = {
                let mut n = made.lock().unwrap();
                *n += 1;
                *n - 1
            };
            born.lock().unwrap().push(info.key.clone());
            let held = info.key.iter().map(|k| k.to_string()).collect();
            Ok::<_, std::convert::Infallible>(Holder {
                id,
                born_for: info.key,
                held,
                log,
                memory: Arc::default(),
            })
        }
    })
    .startup(Parallel)
    .sizing(Fixed(workers))
}

fn new_log() -> (Log, Arc<Mutex<Vec<Option<Key>>>>) {
    (Arc::default(), Arc::default())
}

/// Runs a job of `k` that checks its worker holds the key, takes `took`,
/// and gives the worker's id.
async fn job(pool: &Pool<Holder>, k: &str, took: Duration) -> Result<usize, Error> {
    let want = k.to_owned();
    pool.run_with(
        RunOptions::new().key(key(k)),
        async move |w: &mut Holder| {
            assert!(
                w.held.contains(&want) || w.born_for.as_ref().is_some_and(|b| b.as_str() == want),
                "worker {} got a job of {want} without the key ({:?})",
                w.id,
                w.held
            );
            tokio::time::sleep(took).await;
            w.id
        },
    )
    .await
}

fn loads(log: &Log) -> Vec<String> {
    log.lock().unwrap().clone()
}

async fn settle() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_job_goes_to_the_worker_that_holds_its_key() {
    let (log, born) = new_log();
    let pool = builder(2, &log, &born).build().unwrap();
    assert_eq!(job(&pool, "A", Duration::ZERO).await.unwrap(), 0);
    // Worker 1 has room for a key: B loads there, not over A.
    assert_eq!(job(&pool, "B", Duration::ZERO).await.unwrap(), 1);
    for _ in 0..10 {
        assert_eq!(job(&pool, "A", Duration::from_millis(5)).await.unwrap(), 0);
        assert_eq!(job(&pool, "B", Duration::from_millis(5)).await.unwrap(), 1);
    }
    assert_eq!(loads(&log), ["0 load A", "1 load B"]);
    let rows = pool.workers();
    assert_eq!(rows[0].keys, [key("A")]);
    assert_eq!(rows[1].keys, [key("B")]);
}

#[tokio::test(start_paused = true)]
async fn a_job_waits_for_its_keys_busy_worker_rather_than_loading_it_elsewhere() {
    let (log, born) = new_log();
    let pool = builder(2, &log, &born).build().unwrap();
    job(&pool, "A", Duration::ZERO).await.unwrap();
    job(&pool, "B", Duration::ZERO).await.unwrap();
    tokio::time::advance(Duration::from_secs(5)).await;
    // Worker 0 is busy with A for 100 ms; worker 1 (B, cold) is idle. A
    // second job of A clears in 100 ms behind it, a load takes 1 s.
    let p = pool.clone();
    let long = tokio::spawn(async move { job(&p, "A", Duration::from_millis(100)).await });
    settle().await;
    let start = Instant::now();
    assert_eq!(job(&pool, "A", Duration::from_millis(10)).await.unwrap(), 0);
    assert_eq!(start.elapsed(), Duration::from_millis(110));
    assert_eq!(long.await.unwrap().unwrap(), 0);
    assert_eq!(
        loads(&log),
        ["0 load A", "1 load B"],
        "nothing loaded again"
    );
}

#[tokio::test(start_paused = true)]
async fn no_job_waits_beyond_max_key_wait_and_one_load() {
    let (log, born) = new_log();
    let pool = builder(2, &log, &born).build().unwrap();
    job(&pool, "A", Duration::ZERO).await.unwrap();
    job(&pool, "B", Duration::ZERO).await.unwrap();
    // Jobs of A and B keep both workers busy (40 ms each, back to back).
    let mut loops = Vec::new();
    for k in ["A", "B", "A", "B"] {
        let p = pool.clone();
        loops.push(tokio::spawn(async move {
            for _ in 0..200 {
                job(&p, k, Duration::from_millis(40)).await.unwrap();
            }
        }));
    }
    settle().await;
    let start = Instant::now();
    let worker = job(&pool, "C", Duration::ZERO).await.unwrap();
    let waited = start.elapsed();
    let bound = Duration::from_millis(250) + LOAD + Duration::from_millis(40);
    assert!(waited <= bound, "C waited {waited:?}, over {bound:?}");
    assert!(
        waited >= Duration::from_millis(250) + LOAD,
        "C took a warm worker before it had waited max_key_wait ({waited:?})"
    );
    assert!(loads(&log).contains(&format!("{worker} load C")));
    for l in loops {
        l.await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn a_key_that_no_worker_holds_takes_a_cold_worker_at_once() {
    let (log, born) = new_log();
    let pool = builder(2, &log, &born).build().unwrap();
    job(&pool, "A", Duration::ZERO).await.unwrap();
    job(&pool, "B", Duration::ZERO).await.unwrap();
    tokio::time::advance(Duration::from_millis(300)).await;
    job(&pool, "B", Duration::ZERO).await.unwrap();
    // A went unused for 300 ms (cold), B was just used (warm).
    let start = Instant::now();
    assert_eq!(job(&pool, "C", Duration::ZERO).await.unwrap(), 0);
    assert_eq!(start.elapsed(), LOAD, "no wait beyond the load");
    assert_eq!(loads(&log)[2..], ["0 unload A", "0 load C"]);
}

#[tokio::test(start_paused = true)]
async fn a_full_worker_unloads_its_least_recently_used_key() {
    let (log, born) = new_log();
    let pool = builder(1, &log, &born)
        .with_options(|o| o.keys_per_worker = 2)
        .build()
        .unwrap();
    job(&pool, "A", Duration::ZERO).await.unwrap();
    job(&pool, "B", Duration::ZERO).await.unwrap();
    tokio::time::advance(Duration::from_secs(1)).await;
    job(&pool, "A", Duration::ZERO).await.unwrap();
    tokio::time::advance(Duration::from_secs(1)).await;
    job(&pool, "C", Duration::ZERO).await.unwrap();
    assert_eq!(
        loads(&log),
        ["0 load A", "0 load B", "0 unload B", "0 load C"]
    );
    assert_eq!(pool.workers()[0].keys, [key("A"), key("C")]);
}

#[tokio::test(start_paused = true)]
async fn a_failed_load_fails_its_job_and_the_worker_keeps_its_other_keys() {
    let (log, born) = new_log();
    let pool = builder(1, &log, &born)
        .with_options(|o| o.keys_per_worker = 2)
        .build()
        .unwrap();
    let mut events = pool.events();
    job(&pool, "A", Duration::ZERO).await.unwrap();
    match job(&pool, "bad", Duration::ZERO).await {
        Err(Error::LoadFailed {
            slot,
            key: k,
            message,
        }) => {
            assert_eq!((slot, k.as_str()), (0, "bad"));
            assert_eq!(message, "no such model: bad");
        }
        other => panic!("expected LoadFailed, got {other:?}"),
    }
    assert_eq!(pool.workers()[0].keys, [key("A")]);
    job(&pool, "A", Duration::ZERO).await.unwrap();
    assert_eq!(loads(&log), ["0 load A"], "A was not loaded again");
    let mut loaded = Vec::new();
    while let Ok(e) = events.try_recv() {
        if let Event::Loaded { slot, key, took } = e {
            loaded.push((slot, key.to_string(), took));
        }
    }
    assert_eq!(loaded, [(0, "A".to_owned(), LOAD)]);
}

#[tokio::test(start_paused = true)]
async fn a_spawn_bound_worker_is_retired_and_one_started_for_the_new_key() {
    let (log, born) = new_log();
    let pool = builder(1, &log, &born)
        .with_options(|o| o.key_binding = KeyBinding::Spawn)
        .build()
        .unwrap();
    let mut events = pool.events();
    settle().await;
    assert_eq!(job(&pool, "A", Duration::ZERO).await.unwrap(), 1);
    assert_eq!(job(&pool, "A", Duration::ZERO).await.unwrap(), 1);
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(job(&pool, "B", Duration::ZERO).await.unwrap(), 2);
    assert_eq!(
        *born.lock().unwrap(),
        [None, Some(key("A")), Some(key("B"))]
    );
    assert!(loads(&log).is_empty(), "a spawn-bound worker loads nothing");
    let mut moved = 0;
    while let Ok(e) = events.try_recv() {
        if let Event::Retired {
            reason: RetireReason::KeyMoved,
            ..
        } = e
        {
            moved += 1;
        }
    }
    assert_eq!(moved, 2, "the keyless worker, then A's");
    assert_eq!(pool.workers()[0].keys, [key("B")]);
}

/// Worker 0 holds A and is busy; jobs of A queue. Sets the mean job time
/// to 100 ms first.
async fn hot_a(pool: &Pool<Holder>) -> Vec<tokio::task::JoinHandle<usize>> {
    job(pool, "A", Duration::ZERO).await.unwrap();
    job(pool, "B", Duration::ZERO).await.unwrap();
    for _ in 0..5 {
        job(pool, "A", Duration::from_millis(100)).await.unwrap();
    }
    tokio::time::advance(Duration::from_secs(1)).await;
    let mut jobs = Vec::new();
    for _ in 0..6 {
        let p = pool.clone();
        jobs.push(tokio::spawn(async move {
            job(&p, "A", Duration::from_millis(100)).await.unwrap()
        }));
        settle().await;
    }
    jobs
}

#[tokio::test(start_paused = true)]
async fn a_hot_key_gets_a_second_worker() {
    let (log, born) = new_log();
    let pool = builder(2, &log, &born).build().unwrap();
    let jobs = hot_a(&pool).await;
    let mut on = BTreeSet::new();
    for j in jobs {
        on.insert(j.await.unwrap());
    }
    assert_eq!(on, BTreeSet::from([0, 1]), "A ran on both workers");
    assert!(loads(&log).contains(&"1 load A".to_owned()));
}

#[tokio::test(start_paused = true)]
async fn max_workers_per_key_caps_a_hot_key() {
    let (log, born) = new_log();
    let pool = builder(2, &log, &born)
        .with_options(|o| o.max_workers_per_key = Some(1))
        .build()
        .unwrap();
    let jobs = hot_a(&pool).await;
    for j in jobs {
        assert_eq!(j.await.unwrap(), 0);
    }
    assert_eq!(loads(&log), ["0 load A", "1 load B"]);
}

#[tokio::test(start_paused = true)]
async fn a_job_without_a_key_takes_any_idle_worker() {
    let (log, born) = new_log();
    let pool = builder(2, &log, &born).build().unwrap();
    job(&pool, "A", Duration::ZERO).await.unwrap();
    job(&pool, "B", Duration::ZERO).await.unwrap();
    let p = pool.clone();
    let busy = tokio::spawn(async move { job(&p, "A", Duration::from_millis(50)).await });
    settle().await;
    let id = pool.run(async |w: &mut Holder| w.id).await.unwrap();
    assert_eq!(id, 1, "the idle worker, which holds B");
    busy.await.unwrap().unwrap();
    assert_eq!(
        pool.workers()[1].keys,
        [key("B")],
        "its keys are as they were"
    );
    assert_eq!(loads(&log), ["0 load A", "1 load B"]);
}

#[tokio::test(start_paused = true)]
async fn key_options_change_on_a_live_pool() {
    let (log, born) = new_log();
    let pool = builder(1, &log, &born).build().unwrap();
    job(&pool, "A", Duration::ZERO).await.unwrap();
    tokio::time::advance(Duration::from_secs(1)).await;
    job(&pool, "B", Duration::ZERO).await.unwrap();
    assert_eq!(loads(&log), ["0 load A", "0 unload A", "0 load B"]);
    pool.reconfigure(Reconfig::new().with_options(|o| o.keys_per_worker = 2))
        .unwrap();
    job(&pool, "C", Duration::ZERO).await.unwrap();
    assert_eq!(
        loads(&log)[3..],
        ["0 load C"],
        "room for a second key: nothing unloaded"
    );
    let refused = pool.reconfigure(Reconfig::new().with_options(|o| o.keys_per_worker = 0));
    assert!(matches!(refused, Err(Error::Config(e)) if e.option == "keys_per_worker"));
}

#[tokio::test(start_paused = true)]
async fn a_key_kept_warm_is_loaded_ahead_and_never_unloaded_for_another() {
    let (log, born) = new_log();
    let pool = builder(2, &log, &born)
        .with_options(|o| {
            o.min_workers_per_key.insert(key("W"), 1);
        })
        .build()
        .unwrap();
    settle().await;
    tokio::time::advance(LOAD).await;
    settle().await;
    assert_eq!(loads(&log), ["0 load W"], "loaded before any job");
    let start = Instant::now();
    assert_eq!(job(&pool, "W", Duration::ZERO).await.unwrap(), 0);
    assert_eq!(start.elapsed(), Duration::ZERO, "a hit");
    // Other keys take worker 1 in turn, never worker 0's W, however cold.
    for k in ["A", "B", "C"] {
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(job(&pool, k, Duration::ZERO).await.unwrap(), 1);
    }
    assert_eq!(pool.workers()[0].keys, [key("W")]);
    let refused = pool.reconfigure(Reconfig::new().with_options(|o| {
        o.key_binding = KeyBinding::Spawn;
    }));
    assert!(matches!(refused, Err(Error::Config(e)) if e.option == "min_workers_per_key"));
}

#[tokio::test(start_paused = true)]
async fn over_the_key_memory_budget_idle_workers_unload_their_least_recently_used_keys() {
    let (log, born) = new_log();
    let pool = builder(2, &log, &born)
        .with_options(|o| {
            o.keys_per_worker = 2;
            o.memory_check_every = Duration::from_secs(1);
        })
        .build()
        .unwrap();
    for k in ["A", "B", "C", "D"] {
        job(&pool, k, Duration::ZERO).await.unwrap();
        tokio::time::advance(Duration::from_millis(10)).await;
    }
    // A busy job of D: its key stays, whatever the budget.
    let p = pool.clone();
    let busy = tokio::spawn(async move { job(&p, "D", Duration::from_secs(5)).await });
    settle().await;
    // 400 MB held; the budget is 250 MB: two keys go, the oldest first.
    pool.reconfigure(Reconfig::new().with_options(|o| o.key_memory_budget = Some(250_000_000)))
        .unwrap();
    tokio::time::advance(Duration::from_millis(1100)).await;
    settle().await;
    let unloaded: Vec<String> = loads(&log)
        .into_iter()
        .filter(|l| l.contains("unload"))
        .collect();
    assert_eq!(unloaded, ["0 unload A", "0 unload B"]);
    assert_eq!(busy.await.unwrap().unwrap(), 1);
    let keys: Vec<Vec<Key>> = pool.workers().into_iter().map(|r| r.keys).collect();
    assert_eq!(keys, [vec![], vec![key("C"), key("D")]]);
}

#[tokio::test(start_paused = true)]
async fn a_job_that_gives_up_as_its_worker_is_handed_to_it_leaves_the_workers_keys_as_they_were() {
    let (log, born) = new_log();
    let pool = builder(1, &log, &born).build().unwrap();
    let lease = pool.lend_keyed(key("A")).await.unwrap();
    let p = pool.clone();
    let waiting = tokio::spawn(async move { job(&p, "C", Duration::ZERO).await });
    settle().await;
    tokio::time::advance(Duration::from_millis(300)).await;
    settle().await;
    // C has waited past max_key_wait: the worker, back now, is handed to
    // it to load C, and the job is gone before it takes it.
    drop(lease);
    waiting.abort();
    settle().await;
    assert_eq!(pool.workers()[0].keys, [key("A")]);
    let c = tokio::time::timeout(Duration::from_secs(10), job(&pool, "C", Duration::ZERO)).await;
    assert_eq!(c.expect("C got a worker").unwrap(), 0);
    assert_eq!(loads(&log), ["0 load A", "0 unload A", "0 load C"]);
}

#[tokio::test(start_paused = true)]
async fn a_thousand_jobs_of_four_keys_each_run_where_their_key_is() {
    let (log, born) = new_log();
    let pool = builder(2, &log, &born)
        .with_options(|o| o.keys_per_worker = 1)
        .build()
        .unwrap();
    let mut tasks = Vec::new();
    for client in 0..8 {
        let p = pool.clone();
        tasks.push(tokio::spawn(async move {
            for n in 0..125 {
                // Each client changes key now and then.
                let k = ["A", "B", "C", "D"][(client + n / 10) % 4];
                // `job` asserts that the worker holds the key.
                job(&p, k, Duration::from_millis(20)).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    // Four keys in demand at once on two workers: each key gets a worker
    // within max_key_wait and a load, so workers switch keys often, and
    // no job ever ran on a worker without its key.
    let loaded = loads(&log).iter().filter(|l| l.contains(" load ")).count();
    assert!(
        (4..=1000).contains(&loaded),
        "{loaded} loads for 1,000 jobs"
    );
}
