//! A worker that holds keys, and the helpers of the keyed tests
//! (`keys.rs`, `keys_kept.rs`, `keys_counted.rs`, `keys_refused.rs`,
//! `keys_properties.rs`): loading a key takes [`LOAD`], loading `"bad"`
//! (or starting a worker for it) fails, each key held weighs [`PER_KEY`]
//! bytes on its meter, and a test may end a worker as if it crashed
//! ([`Signals`]).

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kennel::{
    BoxError, Error, ExitSignal, ExitStatus, Exited, Fixed, Key, Killer, Meter, Parallel, Pool,
    PoolBuilder, RunOptions, Worker,
};

pub const LOAD: Duration = Duration::from_secs(1);

/// What the workers did, in order: `"<worker> load <key>"`, `"<worker> unload <key>"`.
pub type Log = Arc<Mutex<Vec<String>>>;

/// Each worker's exit signal, by id: `exit(ExitStatus::Code(..))` ends it
/// as if it crashed.
pub type Signals = Arc<Mutex<Vec<ExitSignal>>>;

/// A worker that holds keys: loading one takes [`LOAD`]; loading `"bad"`
/// fails, and so does starting a worker for it (`spawn`).
pub struct Holder {
    pub id: usize,
    /// The key it was started for (`spawn`).
    pub born_for: Option<Key>,
    pub held: BTreeSet<String>,
    log: Log,
    /// 100 MB per key held, as its meter reads it.
    memory: Arc<AtomicU64>,
    signal: ExitSignal,
    exited: Option<Exited>,
}

pub const PER_KEY: u64 = 100_000_000;

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

    fn exited(&mut self) -> Exited {
        self.exited.take().unwrap_or_else(Exited::never)
    }

    fn killer(&self) -> Killer {
        self.signal.killer()
    }

    fn is_alive(&self) -> bool {
        !self.signal.has_exited()
    }

    async fn close(self) {
        self.signal.exit(ExitStatus::Closed);
    }
}

pub fn key(k: &str) -> Key {
    Key::new(k).unwrap()
}

pub fn builder(
    workers: usize,
    log: &Log,
    born: &Arc<Mutex<Vec<Option<Key>>>>,
) -> PoolBuilder<Holder> {
    builder_with(workers, log, born, &Signals::default())
}

/// [`builder`], each worker's exit signal pushed onto `signals`.
pub fn builder_with(
    workers: usize,
    log: &Log,
    born: &Arc<Mutex<Vec<Option<Key>>>>,
    signals: &Signals,
) -> PoolBuilder<Holder> {
    builder_warming(workers, log, born, signals, Duration::ZERO)
}

/// [`builder_with`], each worker taking `warmup` to start.
pub fn builder_warming(
    workers: usize,
    log: &Log,
    born: &Arc<Mutex<Vec<Option<Key>>>>,
    signals: &Signals,
    warmup: Duration,
) -> PoolBuilder<Holder> {
    let (log, born, signals) = (log.clone(), born.clone(), signals.clone());
    Pool::builder(move |info: kennel::SlotInfo| {
        let (log, born, signals) = (log.clone(), born.clone(), signals.clone());
        async move {
            tokio::time::sleep(warmup).await;
            if info.key.as_ref().is_some_and(|k| k.as_str() == "bad") {
                return Err("no such model: bad");
            }
            let (signal, exited) = ExitSignal::new();
            let id = {
                let mut all = signals.lock().unwrap();
                all.push(signal.clone());
                all.len() - 1
            };
            born.lock().unwrap().push(info.key.clone());
            let held = info.key.iter().map(|k| k.to_string()).collect();
            Ok(Holder {
                id,
                born_for: info.key,
                held,
                log,
                memory: Arc::default(),
                signal,
                exited: Some(exited),
            })
        }
    })
    .startup(Parallel)
    .sizing(Fixed(workers))
}

pub fn new_log() -> (Log, Arc<Mutex<Vec<Option<Key>>>>) {
    (Arc::default(), Arc::default())
}

/// Runs a job of `k` that checks its worker holds the key, takes `took`,
/// and gives the worker's id.
pub async fn job(pool: &Pool<Holder>, k: &str, took: Duration) -> Result<usize, Error> {
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

pub fn loads(log: &Log) -> Vec<String> {
    log.lock().unwrap().clone()
}

pub async fn settle() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}

/// A `spawn` pool of 2 whose workers were moved to A and B, then left idle
/// 5 s; and its events from then on.
pub async fn spawn_a_and_b(
    log: &Log,
    born: &Arc<Mutex<Vec<Option<Key>>>>,
) -> (
    Pool<Holder>,
    tokio::sync::broadcast::Receiver<kennel::Event>,
) {
    let pool = builder(2, log, born)
        .with_options(|o| o.key_binding = kennel::KeyBinding::Spawn)
        .build()
        .unwrap();
    settle().await;
    job(&pool, "A", Duration::ZERO).await.unwrap();
    job(&pool, "B", Duration::ZERO).await.unwrap();
    tokio::time::advance(Duration::from_secs(5)).await;
    let mut events = pool.events();
    while events.try_recv().is_ok() {}
    (pool, events)
}

/// How many workers `events` says were moved to another key (`key-moved`).
pub fn moved(events: &mut tokio::sync::broadcast::Receiver<kennel::Event>) -> usize {
    std::iter::from_fn(|| events.try_recv().ok())
        .filter(|e| {
            matches!(
                e,
                kennel::Event::Retired {
                    reason: kennel::RetireReason::KeyMoved,
                    ..
                }
            )
        })
        .count()
}
