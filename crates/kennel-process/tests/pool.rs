//! The pool's rules (abort, time limits, back-off, close) with real child
//! processes: an aborted job and a timed-out job kill their worker process, a
//! worker with a broken stream is replaced, a crash loop backs off, and closing
//! or dropping the pool leaves no process behind. Last, a timed-out
//! `ThreadWorker` is abandoned and replaced.
//!
//! Real processes need real time, so these tests run on the real clock with
//! short, bounded waits.

#![cfg(target_os = "linux")]

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{assert_group_ends, assert_process_ends, fixture, spin, within};
use kennel::{Error, Event, Fixed, OnDemand, Parallel, Pool, SlotInfo};
use kennel_process::{Coprocess, CoprocessSpec, ProcessError};
use serde_json::json;

/// The pids of every worker a factory started, in order.
#[derive(Clone, Default)]
struct Started(Arc<Mutex<Vec<u32>>>);

impl Started {
    fn pids(&self) -> Vec<u32> {
        self.0.lock().unwrap().clone()
    }
}

/// A pool builder whose factory starts `spec`, labelled with the pool's name
/// and the slot, and notes each pid.
fn pool_of(spec: CoprocessSpec, started: &Started) -> kennel::PoolBuilder<Coprocess> {
    let started = started.clone();
    Pool::builder(move |info: SlotInfo| {
        let spec = spec.clone().label(&*info.pool, info.slot);
        let started = started.clone();
        async move {
            let worker = spec.spawn()?;
            started.0.lock().unwrap().push(worker.pid());
            Ok::<_, ProcessError>(worker)
        }
    })
    .name("fixture")
}

async fn pid_of(pool: &Pool<Coprocess>) -> u32 {
    within("a job", pool.run(async |w: &mut Coprocess| w.pid()))
        .await
        .expect("a worker")
}

#[tokio::test]
async fn dropping_a_running_job_kills_its_worker_process_and_the_next_job_gets_a_new_one() {
    let started = Started::default();
    let pool = pool_of(fixture(&[]), &started)
        .startup(OnDemand)
        .sizing(Fixed(1))
        .build()
        .expect("pool");
    let first = pid_of(&pool).await;

    let hang = json!({"op": "hang"});
    let aborted = tokio::time::timeout(
        Duration::from_millis(300),
        pool.run(async |w: &mut Coprocess| w.request(&hang).await),
    )
    .await;
    assert!(
        aborted.is_err(),
        "the job was still running when it was dropped"
    );
    assert_process_ends(first).await;

    let second = pid_of(&pool).await;
    assert_ne!(second, first, "a new worker process serves the next job");
    assert_eq!(started.pids(), vec![first, second]);
    within("close", pool.close()).await;
    assert_process_ends(second).await;
}

#[tokio::test]
async fn a_job_timeout_kills_the_worker_process_and_a_new_one_is_started() {
    let started = Started::default();
    let pool = pool_of(fixture(&[]), &started)
        .startup(Parallel)
        .sizing(Fixed(1))
        .with_options(|o| o.job_timeout = Some(Duration::from_millis(300)))
        .build()
        .expect("pool");
    let mut events = pool.events();
    let first = pid_of(&pool).await;

    let hang = json!({"op": "hang"});
    let err = within(
        "the timed-out job",
        pool.run(async |w: &mut Coprocess| w.request(&hang).await),
    )
    .await
    .expect_err("timed out");
    assert!(
        matches!(err, Error::Timeout { after } if after == Duration::from_millis(300)),
        "{err:?}"
    );
    assert_process_ends(first).await;

    // The eager startup refills the slot by itself, with no back-off: the
    // pool ended that worker, it did not exit on its own.
    within("a new worker", async {
        while started.pids().len() < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let second = pid_of(&pool).await;
    assert_ne!(second, first);
    let reply = within(
        "echo",
        pool.run(async |w: &mut Coprocess| w.request(&json!(1)).await),
    )
    .await
    .expect("lent")
    .expect("reply");
    assert_eq!(reply, json!(1));

    let mut timed_out = false;
    while let Ok(event) = events.try_recv() {
        timed_out |= matches!(event, Event::TimedOut { slot: 0, .. });
        assert!(
            !matches!(event, Event::Backoff { .. }),
            "no back-off: {event:?}"
        );
    }
    assert!(timed_out, "a worker:timeout event was sent");
    within("close", pool.close()).await;
}

#[tokio::test]
async fn a_worker_whose_stream_broke_is_replaced() {
    let started = Started::default();
    let pool = pool_of(fixture(&[]), &started)
        .startup(OnDemand)
        .sizing(Fixed(1))
        .build()
        .expect("pool");
    let garbage = json!({"op": "garbage"});
    let (pid, result, alive) = within(
        "the garbage job",
        pool.run(async |w: &mut Coprocess| {
            let result = w.request(&garbage).await;
            (w.pid(), result, kennel::Worker::is_alive(w))
        }),
    )
    .await
    .expect("the job ran");
    assert!(
        matches!(result, Err(ProcessError::Protocol { .. })),
        "{result:?}"
    );
    assert!(
        !alive,
        "the worker was no longer alive when the job saw the error"
    );
    // The pool kills it once the job gives it back.
    assert_process_ends(pid).await;

    // The pool never lends a worker that is no longer alive
    // (`Worker::is_alive`), so the next job gets a fresh worker at once,
    // whether or not the pool's watcher has seen the exit yet.
    let (next_pid, reply) = within(
        "the next job",
        pool.run(async |w: &mut Coprocess| (w.pid(), w.request(&json!({"ok": 1})).await)),
    )
    .await
    .expect("the job ran");
    assert_ne!(next_pid, pid);
    assert_eq!(reply.expect("reply"), json!({"ok": 1}));
    assert_eq!(started.pids(), vec![pid, next_pid]);
    within("close", pool.close()).await;
}

#[tokio::test]
async fn a_crash_loop_under_an_eager_startup_backs_off() {
    let started = Started::default();
    let pool = pool_of(fixture(&["--fail-warmup"]), &started)
        .startup(Parallel)
        .sizing(Fixed(1))
        .build()
        .expect("pool");
    let mut events = pool.events();
    let began = Instant::now();

    // Every worker fails its warm-up (exit 3): the slot is started again after
    // 1 s, then 2 s, and so on, instead of in a tight loop.
    let mut backoffs = Vec::new();
    let mut starts = Vec::new();
    within("two back-offs and three starts", async {
        while starts.len() < 3 {
            match events.recv().await.expect("the pool sends events") {
                Event::Starting { slot: 0 } => starts.push(began.elapsed()),
                Event::Backoff {
                    slot: 0,
                    delay,
                    early_exits,
                } => backoffs.push((delay, early_exits)),
                _ => {}
            }
        }
    })
    .await;
    assert_eq!(
        backoffs,
        vec![(Duration::from_secs(1), 1), (Duration::from_secs(2), 2)]
    );
    assert!(
        starts[1] - starts[0] >= Duration::from_secs(1),
        "{starts:?}"
    );
    assert!(
        starts[2] - starts[1] >= Duration::from_secs(2),
        "{starts:?}"
    );
    assert!(
        started.pids().len() <= 3,
        "no tight loop: {:?}",
        started.pids()
    );

    within("close", pool.close()).await;
    for pid in started.pids() {
        assert_process_ends(pid).await;
    }
}

#[tokio::test]
async fn a_job_that_needs_a_crashed_slot_does_not_wait_for_the_back_off() {
    let started = Started::default();
    let pool = pool_of(fixture(&[]), &started)
        .startup(Parallel)
        .sizing(Fixed(1))
        .build()
        .expect("pool");
    let crash = json!({"op": "crash", "code": 1});
    let mut pid = 0;
    let result = within(
        "the crashing job",
        pool.run(async |w: &mut Coprocess| {
            pid = w.pid();
            w.request(&crash).await
        }),
    )
    .await;
    assert!(matches!(result, Err(Error::Crashed { .. })), "{result:?}");
    assert_process_ends(pid).await;

    let asked = Instant::now();
    let next = pid_of(&pool).await;
    assert_ne!(next, pid);
    assert!(
        asked.elapsed() < Duration::from_secs(1),
        "no back-off for a job"
    );
    within("close", pool.close()).await;
}

#[tokio::test]
async fn closing_the_pool_leaves_no_process() {
    let started = Started::default();
    let pool = pool_of(
        fixture(&[]).close_grace(Duration::from_millis(500)),
        &started,
    )
    .startup(Parallel)
    .sizing(Fixed(2))
    .build()
    .expect("pool");
    let grandchild = json!({"op": "grandchild"});
    let reply = within(
        "a grandchild",
        pool.run(async |w: &mut Coprocess| w.request(&grandchild).await),
    )
    .await
    .expect("lent")
    .expect("reply");
    let grandchild = reply["pid"].as_u64().expect("a pid") as u32;
    within("both workers", async {
        while pool.stats().idle < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;

    within("close", pool.close()).await;
    let pids = started.pids();
    assert_eq!(pids.len(), 2);
    for pid in pids {
        assert_process_ends(pid).await;
        assert_group_ends(pid).await;
    }
    assert_process_ends(grandchild).await;
}

#[tokio::test]
async fn dropping_the_pool_kills_every_worker_process() {
    let started = Started::default();
    let pool = pool_of(fixture(&["--ignore-eof", "--ignore-sigterm"]), &started)
        .startup(Parallel)
        .sizing(Fixed(2))
        .build()
        .expect("pool");
    within("both workers", async {
        while pool.stats().idle < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let pids = started.pids();
    drop(pool);
    for pid in pids {
        assert_process_ends(pid).await;
        assert_group_ends(pid).await;
    }
}

#[tokio::test]
async fn a_job_timeout_abandons_a_thread_worker_and_a_new_one_is_built() {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use kennel_process::{ThreadError, ThreadWorker};

    let inits = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&inits);
    let pool = Pool::builder(move |_: SlotInfo| {
        let counter = Arc::clone(&counter);
        async move {
            ThreadWorker::spawn(move || {
                let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
                Ok::<_, std::io::Error>(n)
            })
        }
    })
    .name("threads")
    .startup(OnDemand)
    .sizing(Fixed(1))
    .with_options(|o| o.job_timeout = Some(Duration::from_millis(200)))
    .build()
    .expect("pool");

    let first = within(
        "a job",
        pool.run(async |w: &mut ThreadWorker<usize>| w.run(|n| *n).await),
    )
    .await
    .expect("lent")
    .expect("ran");
    assert_eq!(first, 1);

    // The job spins past the limit: the pool gives up on it at once, though
    // the thread cannot be stopped and finishes the spin on its own.
    let asked = Instant::now();
    let err = within(
        "the slow job",
        pool.run(async |w: &mut ThreadWorker<usize>| {
            w.run(|_| spin(Duration::from_millis(1500))).await
        }),
    )
    .await
    .expect_err("timed out");
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    assert!(
        asked.elapsed() < Duration::from_millis(1200),
        "did not wait for the thread"
    );

    let second: Result<usize, ThreadError> = within(
        "the next job",
        pool.run(async |w: &mut ThreadWorker<usize>| w.run(|n| *n).await),
    )
    .await
    .expect("lent");
    assert_eq!(second.expect("ran"), 2, "a new worker built its own state");
    assert_eq!(inits.load(Ordering::SeqCst), 2);
    within("close", pool.close()).await;
}
