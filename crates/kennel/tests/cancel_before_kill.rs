//! Cancel before kill (ADR 0035): a job aborted or past its `job_timeout`
//! asks a worker that can cancel to stop; the worker stays if it answers
//! within `cancel_grace` and is killed if not; `job_kill_after` kills
//! whatever; progress beats move the soft deadline when the pool says so.
//! In-memory workers on the paused clock (the coprocess side, against real
//! child processes, is in kennel-process's tests).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kennel::{
    CancelOutcome, Error, Event, ExitSignal, Exited, Fixed, Heartbeat, Killer, Parallel, Pool,
    RetireReason, Worker,
};
use tokio::sync::broadcast;

/// A worker whose job can be asked to stop; it takes `answer_after` to
/// answer a cancel, or never answers when that is `None`.
struct Stoppable {
    id: usize,
    answer_after: Option<Duration>,
    signal: ExitSignal,
    exited: Option<Exited>,
    heartbeat: Heartbeat,
}

impl Stoppable {
    /// Works for `d`, beating every `beat` if given.
    async fn work(&mut self, d: Duration, beat: Option<Duration>) -> usize {
        match beat {
            None => tokio::time::sleep(d).await,
            Some(every) => {
                let mut left = d;
                while !left.is_zero() {
                    let step = every.min(left);
                    tokio::time::sleep(step).await;
                    left -= step;
                    self.heartbeat.beat();
                }
            }
        }
        self.id
    }
}

impl Worker for Stoppable {
    fn exited(&mut self) -> Exited {
        self.exited.take().unwrap_or_else(Exited::never)
    }

    fn killer(&self) -> Killer {
        self.signal.killer()
    }

    fn is_alive(&self) -> bool {
        self.signal.try_exited().is_none()
    }

    fn can_cancel(&self) -> bool {
        true
    }

    async fn cancel(&mut self, _grace: Duration) -> CancelOutcome {
        match self.answer_after {
            Some(d) => {
                tokio::time::sleep(d).await;
                CancelOutcome::Kept
            }
            None => std::future::pending().await,
        }
    }

    fn heartbeat(&self) -> Option<Heartbeat> {
        Some(self.heartbeat.clone())
    }
}

fn pool(answer_after: Option<Duration>, made: Arc<AtomicUsize>) -> kennel::PoolBuilder<Stoppable> {
    Pool::builder(move |_| {
        let id = made.fetch_add(1, Ordering::SeqCst);
        async move {
            let (signal, exited) = ExitSignal::new();
            Ok::<_, std::convert::Infallible>(Stoppable {
                id,
                answer_after,
                signal,
                exited: Some(exited),
                heartbeat: Heartbeat::new(),
            })
        }
    })
    .startup(Parallel)
    .sizing(Fixed(1))
    .with_options(|o| o.cancel_grace = Duration::from_secs(2))
}

fn cancelled(rx: &mut broadcast::Receiver<Event>) -> Vec<(RetireReason, CancelOutcome)> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        if let Event::Cancelled {
            reason, outcome, ..
        } = e
        {
            out.push((reason, outcome));
        }
    }
    out
}

async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn an_aborted_job_whose_worker_answers_the_cancel_keeps_the_worker() {
    let made = Arc::new(AtomicUsize::new(0));
    let pool = pool(Some(Duration::from_millis(300)), made.clone())
        .build()
        .unwrap();
    let mut events = pool.events();
    let first = pool.run(async |w: &mut Stoppable| w.id).await.unwrap();
    // Dropped mid-job.
    let aborted = tokio::time::timeout(
        Duration::from_secs(1),
        pool.run(async |w: &mut Stoppable| w.work(Duration::from_secs(60), None).await),
    )
    .await;
    assert!(aborted.is_err(), "the job was dropped at 1 s");
    settle().await;
    assert_eq!(
        pool.stats().lent,
        1,
        "the slot is busy while the worker answers"
    );
    tokio::time::advance(Duration::from_millis(400)).await;
    settle().await;
    let next = pool.run(async |w: &mut Stoppable| w.id).await.unwrap();
    assert_eq!(next, first, "the same worker serves the next job");
    assert_eq!(
        made.load(Ordering::SeqCst),
        1,
        "no worker was started again"
    );
    assert_eq!(
        cancelled(&mut events),
        [(RetireReason::Aborted, CancelOutcome::Kept)]
    );
    pool.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_worker_that_does_not_answer_within_cancel_grace_is_killed_and_replaced() {
    let made = Arc::new(AtomicUsize::new(0));
    let pool = pool(None, made.clone()).build().unwrap();
    let mut events = pool.events();
    let first = pool.run(async |w: &mut Stoppable| w.id).await.unwrap();
    let _ = tokio::time::timeout(
        Duration::from_secs(1),
        pool.run(async |w: &mut Stoppable| w.work(Duration::from_secs(60), None).await),
    )
    .await;
    tokio::time::advance(Duration::from_millis(1_900)).await;
    settle().await;
    assert!(cancelled(&mut events).is_empty(), "still within the grace");
    tokio::time::advance(Duration::from_millis(200)).await;
    settle().await;
    let next = pool.run(async |w: &mut Stoppable| w.id).await.unwrap();
    assert_ne!(next, first, "a new worker serves the next job");
    assert_eq!(made.load(Ordering::SeqCst), 2);
    let seen: Vec<_> = std::iter::from_fn(|| events.try_recv().ok()).collect();
    assert!(
        seen.iter().any(|e| matches!(
            e,
            Event::Cancelled {
                outcome: CancelOutcome::Killed,
                reason: RetireReason::Aborted,
                took,
                ..
            } if *took == Duration::from_secs(2)
        )),
        "{seen:?}"
    );
    pool.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_job_past_job_timeout_fails_at_once_and_its_worker_is_cancelled_and_kept() {
    let made = Arc::new(AtomicUsize::new(0));
    let pool = pool(Some(Duration::from_millis(100)), made.clone())
        .with_options(|o| o.job_timeout = Some(Duration::from_secs(5)))
        .build()
        .unwrap();
    let mut events = pool.events();
    let started = tokio::time::Instant::now();
    let err = pool
        .run(async |w: &mut Stoppable| w.work(Duration::from_secs(60), None).await)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { after } if after == Duration::from_secs(5)));
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(5),
        "the caller waits no grace"
    );
    let again = pool.run(async |w: &mut Stoppable| w.id).await.unwrap();
    assert_eq!(again, 0);
    assert_eq!(made.load(Ordering::SeqCst), 1);
    assert_eq!(
        cancelled(&mut events),
        [(RetireReason::Timeout, CancelOutcome::Kept)]
    );
    pool.close().await;
}

#[tokio::test(start_paused = true)]
async fn progress_beats_move_the_soft_deadline_when_the_pool_says_so() {
    let made = Arc::new(AtomicUsize::new(0));
    let pool = pool(Some(Duration::from_millis(100)), made.clone())
        .with_options(|o| {
            o.job_timeout = Some(Duration::from_secs(5));
            o.progress_extends_timeout = true;
        })
        .build()
        .unwrap();
    // 30 s of work, a beat every 2 s: never 5 s without one.
    let id = pool
        .run(async |w: &mut Stoppable| {
            w.work(Duration::from_secs(30), Some(Duration::from_secs(2)))
                .await
        })
        .await
        .unwrap();
    assert_eq!(id, 0);
    // A job that goes quiet after its beats times out 5 s after the last.
    let started = tokio::time::Instant::now();
    let err = pool
        .run(async |w: &mut Stoppable| {
            w.work(Duration::from_secs(6), Some(Duration::from_secs(2)))
                .await;
            w.work(Duration::from_secs(60), None).await
        })
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    assert_eq!(started.elapsed(), Duration::from_secs(11));
    pool.close().await;
}

#[tokio::test(start_paused = true)]
async fn without_progress_extends_timeout_beats_move_nothing() {
    let made = Arc::new(AtomicUsize::new(0));
    let pool = pool(Some(Duration::from_millis(100)), made)
        .with_options(|o| o.job_timeout = Some(Duration::from_secs(5)))
        .build()
        .unwrap();
    let started = tokio::time::Instant::now();
    let err = pool
        .run(async |w: &mut Stoppable| {
            w.work(Duration::from_secs(30), Some(Duration::from_secs(1)))
                .await
        })
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }));
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    pool.close().await;
}

#[tokio::test(start_paused = true)]
async fn job_kill_after_kills_a_beating_job_with_no_cancel() {
    let made = Arc::new(AtomicUsize::new(0));
    let pool = pool(Some(Duration::from_millis(100)), made.clone())
        .with_options(|o| {
            o.job_timeout = Some(Duration::from_secs(5));
            o.job_kill_after = Some(Duration::from_secs(12));
            o.progress_extends_timeout = true;
        })
        .build()
        .unwrap();
    let mut events = pool.events();
    let started = tokio::time::Instant::now();
    let err = pool
        .run(async |w: &mut Stoppable| {
            w.work(Duration::from_secs(60), Some(Duration::from_secs(1)))
                .await
        })
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { after } if after == Duration::from_secs(12)));
    assert_eq!(started.elapsed(), Duration::from_secs(12));
    settle().await;
    assert!(
        cancelled(&mut events).is_empty(),
        "a hard limit asks nothing"
    );
    let next = pool.run(async |w: &mut Stoppable| w.id).await.unwrap();
    assert_eq!(next, 1, "the worker was killed and replaced");
    pool.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_cancel_grace_of_zero_kills_as_before() {
    let made = Arc::new(AtomicUsize::new(0));
    let pool = pool(Some(Duration::ZERO), made.clone())
        .with_options(|o| o.cancel_grace = Duration::ZERO)
        .build()
        .unwrap();
    let _ = tokio::time::timeout(
        Duration::from_secs(1),
        pool.run(async |w: &mut Stoppable| w.work(Duration::from_secs(60), None).await),
    )
    .await;
    settle().await;
    let next = pool.run(async |w: &mut Stoppable| w.id).await.unwrap();
    assert_eq!(next, 1);
    pool.close().await;
}
