//! `ThreadWorker`: state built once on its own thread, CPU work off the
//! runtime, a panic is a crash, a kill abandons the thread.

mod common;

use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{eventually, spin, within};
use kennel::{ExitStatus, Worker};
use kennel_process::{ThreadError, ThreadWorker};

#[tokio::test]
async fn the_state_is_built_once_on_the_workers_own_thread() {
    let inits = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&inits);
    let test_thread = std::thread::current().id();
    // An `Rc` is not Send: the state never leaves its thread.
    let mut worker = ThreadWorker::spawn(move || {
        counter.fetch_add(1, Ordering::SeqCst);
        Ok::<_, std::io::Error>((Rc::new(std::thread::current().id()), 0u32))
    })
    .expect("spawn");
    within("ready", worker.ready()).await.expect("ready");

    for expected in 1..=5 {
        let (thread, count) = within(
            "job",
            worker.run(|(thread, count): &mut (Rc<std::thread::ThreadId>, u32)| {
                *count += 1;
                assert_eq!(
                    **thread,
                    std::thread::current().id(),
                    "jobs run where init ran"
                );
                (**thread, *count)
            }),
        )
        .await
        .expect("job");
        assert_ne!(thread, test_thread);
        assert_eq!(count, expected, "the same state serves every job");
    }
    assert_eq!(inits.load(Ordering::SeqCst), 1, "built once");

    let exit = within("close", worker.close()).await;
    assert_eq!(exit.status, ExitStatus::Closed);
}

#[tokio::test]
async fn a_job_sent_during_the_warm_up_runs_after_it() {
    let mut worker = ThreadWorker::spawn(|| {
        spin(Duration::from_millis(100));
        Ok::<_, std::io::Error>(vec![1, 2, 3])
    })
    .expect("spawn");
    let sum = within("job", worker.run(|v: &mut Vec<i32>| v.iter().sum::<i32>()))
        .await
        .expect("job");
    assert_eq!(sum, 6);
}

#[tokio::test]
async fn a_failed_init_fails_the_warm_up_and_ends_the_worker() {
    let mut worker: ThreadWorker<()> =
        ThreadWorker::spawn(|| Err::<(), _>("the table file is missing")).expect("spawn");
    let exited = worker.exited();
    let err = within("ready", worker.ready())
        .await
        .expect_err("warm-up failed");
    assert!(
        matches!(&err, ThreadError::WarmupFailed { message } if message == "the table file is missing"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "worker warm-up failed: the table file is missing"
    );
    // Through the Worker trait the pool gets the same error.
    let boxed = within("ready", Worker::ready(&mut worker))
        .await
        .expect_err("failed");
    assert!(boxed.to_string().contains("the table file is missing"));

    let exit = within("exit", exited).await;
    assert!(
        matches!(exit.status, ExitStatus::Other(ref m) if m.contains("warm-up failed")),
        "{exit:?}"
    );
    let err = within("run", worker.run(|()| 1))
        .await
        .expect_err("no state");
    assert!(matches!(err, ThreadError::WarmupFailed { .. }), "{err:?}");
}

#[tokio::test]
async fn a_panicking_init_fails_the_warm_up() {
    let mut worker: ThreadWorker<()> = ThreadWorker::spawn(|| -> Result<(), std::io::Error> {
        panic!("out of memory while loading");
    })
    .expect("spawn");
    let err = within("ready", worker.ready())
        .await
        .expect_err("warm-up failed");
    assert!(
        matches!(&err, ThreadError::WarmupFailed { message } if message.contains("out of memory while loading")),
        "{err:?}"
    );
    within("exit", worker.exited()).await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_cpu_bound_job_does_not_block_the_runtime() {
    let mut worker = ThreadWorker::spawn(|| Ok::<_, std::io::Error>(())).expect("spawn");
    within("ready", worker.ready()).await.expect("ready");

    // One runtime thread: if the job ran on it, nothing else could run.
    let ticks = Arc::new(AtomicUsize::new(0));
    let ticking = Arc::clone(&ticks);
    let ticker = tokio::spawn(async move {
        let mut interval = tokio::time::interval(Duration::from_millis(10));
        loop {
            interval.tick().await;
            ticking.fetch_add(1, Ordering::SeqCst);
        }
    });
    let spun = within("job", worker.run(|()| spin(Duration::from_millis(500))))
        .await
        .expect("job");
    ticker.abort();
    assert!(spun > 0);
    let ticks = ticks.load(Ordering::SeqCst);
    assert!(
        ticks >= 10,
        "the runtime kept ticking during the job: {ticks} ticks"
    );
}

#[tokio::test]
async fn a_panicking_job_is_crashed_and_the_worker_exits_panicked() {
    let dropped = Arc::new(AtomicBool::new(false));

    struct State(Arc<AtomicBool>);
    impl Drop for State {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    let flag = Arc::clone(&dropped);
    let mut worker =
        ThreadWorker::spawn(move || Ok::<_, std::io::Error>(State(flag))).expect("spawn");
    let exited = Worker::exited(&mut worker);
    within("ready", worker.ready()).await.expect("ready");

    let err = within(
        "job",
        worker.run(|_: &mut State| -> u32 { panic!("index out of bounds: 7") }),
    )
    .await
    .expect_err("crashed");
    match &err {
        ThreadError::Crashed { message } => assert_eq!(message, "index out of bounds: 7"),
        other => panic!("expected Crashed, got {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        "worker failed before responding: job panicked: index out of bounds: 7"
    );

    let exit = within("exit", exited).await;
    assert_eq!(
        exit.status,
        ExitStatus::Panicked("index out of bounds: 7".into())
    );
    let dropped_flag = Arc::clone(&dropped);
    eventually("the state is dropped", move || {
        dropped_flag.load(Ordering::SeqCst)
    })
    .await;

    let err = within("next job", worker.run(|_: &mut State| 1))
        .await
        .expect_err("ended");
    assert!(
        matches!(
            err,
            ThreadError::Ended {
                status: ExitStatus::Panicked(_)
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_panic_with_a_formatted_message_keeps_it() {
    let mut worker = ThreadWorker::spawn(|| Ok::<_, std::io::Error>(41)).expect("spawn");
    let err = within(
        "job",
        worker.run(|n: &mut i32| -> () { panic!("bad value {}", *n + 1) }),
    )
    .await
    .expect_err("crashed");
    assert!(
        matches!(&err, ThreadError::Crashed { message } if message == "bad value 42"),
        "{err:?}"
    );
}

#[tokio::test]
async fn kill_resolves_exited_at_once_and_abandons_the_running_job() {
    let mut worker = ThreadWorker::spawn(|| Ok::<_, std::io::Error>(())).expect("spawn");
    let exited = Worker::exited(&mut worker);
    let killer = Worker::killer(&worker);
    within("ready", worker.ready()).await.expect("ready");

    let job_finished = Arc::new(AtomicBool::new(false));
    let finished = Arc::clone(&job_finished);
    let kill_soon = async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        killer.kill();
    };
    let started = Instant::now();
    let (result, ()) = within("job and kill", async {
        tokio::join!(
            worker.run(move |()| {
                spin(Duration::from_millis(1500));
                finished.store(true, Ordering::SeqCst);
            }),
            kill_soon
        )
    })
    .await;
    let err = result.expect_err("killed");
    assert!(
        matches!(
            err,
            ThreadError::Ended {
                status: ExitStatus::Killed
            }
        ),
        "{err:?}"
    );
    assert!(
        started.elapsed() < Duration::from_millis(1000),
        "the run returned at the kill"
    );
    assert!(
        !job_finished.load(Ordering::SeqCst),
        "the job still runs on its thread"
    );

    let exit = within("exit", exited).await;
    assert_eq!(exit.status, ExitStatus::Killed);

    let err = within("next job", worker.run(|()| 1))
        .await
        .expect_err("abandoned");
    assert!(
        matches!(
            err,
            ThreadError::Ended {
                status: ExitStatus::Killed
            }
        ),
        "{err:?}"
    );
    // Close does not wait for an abandoned thread.
    let exit = within("close", worker.close()).await;
    assert_eq!(exit.status, ExitStatus::Killed);
}

#[tokio::test]
async fn close_waits_for_the_running_job_and_the_thread_to_end() {
    let dropped = Arc::new(AtomicBool::new(false));

    struct State(Arc<AtomicBool>);
    impl Drop for State {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    let flag = Arc::clone(&dropped);
    let mut worker =
        ThreadWorker::spawn(move || Ok::<_, std::io::Error>(State(flag))).expect("spawn");
    within("ready", worker.ready()).await.expect("ready");
    // Start a job, then drop its future: the job goes on on the thread.
    let job_done = Arc::new(AtomicBool::new(false));
    let done = Arc::clone(&job_done);
    let abandoned = tokio::time::timeout(
        Duration::from_millis(20),
        worker.run(move |_: &mut State| {
            spin(Duration::from_millis(300));
            done.store(true, Ordering::SeqCst);
        }),
    )
    .await;
    assert!(abandoned.is_err());

    let exit = within("close", worker.close()).await;
    assert_eq!(exit.status, ExitStatus::Closed);
    assert!(job_done.load(Ordering::SeqCst), "close let the job finish");
    assert!(
        dropped.load(Ordering::SeqCst),
        "the state was dropped before close returned"
    );
}

#[tokio::test]
async fn a_dropped_run_leaves_the_worker_usable() {
    let mut worker = ThreadWorker::spawn(|| Ok::<_, std::io::Error>(0u32)).expect("spawn");
    let abandoned = tokio::time::timeout(
        Duration::from_millis(10),
        worker.run(|n: &mut u32| {
            spin(Duration::from_millis(200));
            *n += 1;
        }),
    )
    .await;
    assert!(abandoned.is_err());
    let n = within("job", worker.run(|n: &mut u32| *n))
        .await
        .expect("usable");
    assert_eq!(n, 1, "the abandoned job still ran, first");
}

#[tokio::test(start_paused = true)]
async fn ran_for_is_measured_on_the_tokio_clock() {
    let mut worker = ThreadWorker::spawn(|| Ok::<_, std::io::Error>(())).expect("spawn");
    worker.ready().await.expect("ready");
    tokio::time::advance(Duration::from_secs(600)).await;
    worker.kill();
    let exit = worker.exited().await;
    assert_eq!(exit.status, ExitStatus::Killed);
    assert!(exit.ran_for >= Duration::from_secs(600), "{exit:?}");
}
