//! A connection's future polled again at once when it wakes itself.
//!
//! hyper's HTTP/1 connection hands a request's body to the handler
//! through a channel whose two ends live in the same task: each chunk the
//! handler takes wakes the connection's side. The task is thus woken
//! while it is being polled, and tokio's multi-thread scheduler treats a
//! task woken during its own poll as one that yielded: it goes to the back
//! of the run queue and a parked worker thread is unparked to steal it.
//! That thread finds nothing to do and parks again: one futex wake-up and
//! two context switches for every request with a body, on the path of the
//! reply (on two cores, the idle thread runs in front of the worker
//! process the job was just written to).
//!
//! [`Rewake`] polls the connection with a waker of its own. A wake that
//! comes while the connection is being polled is kept as a mark, and the
//! connection is polled again in the same turn, at most
//! [`MAX_REPOLLS`] times and only while the task's cooperative budget
//! lasts; then the task's own waker is woken, as before. A wake that comes
//! between polls goes straight to the task's waker.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;
use pin_project_lite::pin_project;

/// How many times one poll of [`Rewake`] polls its future again after a
/// wake that came during the poll, before it yields to the scheduler.
pub(super) const MAX_REPOLLS: usize = 4;

/// Not being polled: a wake goes to the task.
const IDLE: u8 = 0;
/// Being polled: a wake is kept as [`WOKEN`].
const POLLING: u8 = 1;
/// Being polled, and woken since the poll began.
const WOKEN: u8 = 2;

/// What the inner future's waker shares with [`Rewake`].
struct Shared {
    state: AtomicU8,
    task: AtomicWaker,
}

impl Wake for Shared {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        match self
            .state
            .compare_exchange(POLLING, WOKEN, Ordering::AcqRel, Ordering::Acquire)
        {
            // Kept: the poll in progress polls again.
            Ok(_) | Err(WOKEN) => {}
            Err(_) => self.task.wake(),
        }
    }
}

pin_project! {
    /// `fut`, polled again in the same turn when it wakes itself (see the
    /// module's documentation). Pinned in place: the task it is spawned
    /// as holds it, with no box of its own.
    pub(super) struct Rewake<F> {
        #[pin]
        fut: F,
        shared: Arc<Shared>,
        // The inner future's waker, made once: the same waker on every
        // poll lets hyper and tokio keep the one they hold (`will_wake`).
        waker: Waker,
    }
}

impl<F: Future> Rewake<F> {
    /// Wraps `fut`.
    pub(super) fn new(fut: F) -> Self {
        let shared = Arc::new(Shared {
            state: AtomicU8::new(IDLE),
            task: AtomicWaker::new(),
        });
        Self {
            fut,
            waker: Waker::from(Arc::clone(&shared)),
            shared,
        }
    }
}

impl<F: Future> Future for Rewake<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let mut this = self.project();
        this.shared.task.register(cx.waker());
        let mut inner = Context::from_waker(this.waker);
        for _ in 0..=MAX_REPOLLS {
            this.shared.state.store(POLLING, Ordering::SeqCst);
            if let Poll::Ready(out) = this.fut.as_mut().poll(&mut inner) {
                this.shared.state.store(IDLE, Ordering::SeqCst);
                return Poll::Ready(out);
            }
            let woken = this
                .shared
                .state
                .compare_exchange(POLLING, IDLE, Ordering::AcqRel, Ordering::Acquire)
                .is_err();
            if !woken {
                return Poll::Pending;
            }
            if !tokio::task::coop::has_budget_remaining() {
                break;
            }
        }
        // Woken during the last poll (and the state is WOKEN): yield, as
        // the scheduler would have.
        this.shared.state.store(IDLE, Ordering::SeqCst);
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A future that wakes itself `n` times during its polls, then is ready.
    struct SelfWaking {
        left: usize,
        polls: Arc<AtomicUsize>,
    }

    impl Future for SelfWaking {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.polls.fetch_add(1, Ordering::SeqCst);
            if self.left == 0 {
                return Poll::Ready(());
            }
            self.left -= 1;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    /// Counts the task's wakes.
    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_future_that_wakes_itself_is_polled_again_without_waking_the_task() {
        let polls = Arc::new(AtomicUsize::new(0));
        let mut fut = Rewake::new(SelfWaking {
            left: 2,
            polls: polls.clone(),
        });
        let task = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(task.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut fut).poll(&mut cx).is_ready());
        assert_eq!(polls.load(Ordering::SeqCst), 3);
        assert_eq!(task.0.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_future_that_keeps_waking_itself_yields_to_the_task_after_the_bound() {
        let polls = Arc::new(AtomicUsize::new(0));
        let mut fut = Rewake::new(SelfWaking {
            left: usize::MAX,
            polls: polls.clone(),
        });
        let task = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(task.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut fut).poll(&mut cx).is_pending());
        assert_eq!(polls.load(Ordering::SeqCst), MAX_REPOLLS + 1);
        assert_eq!(task.0.load(Ordering::SeqCst), 1, "the task yields once");
    }

    #[test]
    fn a_wake_between_polls_reaches_the_task() {
        let polls = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let mut fut = std::pin::pin!(Rewake::new(async move {
            polls.fetch_add(1, Ordering::SeqCst);
            rx.await.ok();
        }));
        let task = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(task.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        assert_eq!(task.0.load(Ordering::SeqCst), 0);
        tx.send(()).expect("the receiver waits");
        assert_eq!(task.0.load(Ordering::SeqCst), 1);
        assert!(fut.as_mut().poll(&mut cx).is_ready());
    }
}
