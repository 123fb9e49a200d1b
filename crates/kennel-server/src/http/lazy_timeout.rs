//! A timeout whose timer goes into tokio's wheel only if the future is
//! still pending once it has been polled again.
//!
//! A request's body that came with its head is handed over by hyper in the
//! same turn of the connection's task: the first poll of the read is
//! pending (it asks hyper for the body), the next one is ready. A
//! `tokio::time::timeout` puts its timer into the wheel at that first
//! pending poll and takes it out again when the read ends: two lock
//! sessions of the timer driver for every request. [`LazyTimeout`] wakes
//! its task itself at the first pending poll instead (so it is polled
//! again), and arms the timer at the second, with the deadline counted from
//! its creation: a body that does not come is timed out as before.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};

/// `fut` within `limit` from now, the timer armed lazily (see the module's
/// documentation). Resolves to `None` past the deadline.
pub(crate) fn lazy_timeout<F: Future>(limit: Duration, fut: F) -> LazyTimeout<F> {
    LazyTimeout {
        fut,
        deadline: Instant::now() + limit,
        polled: false,
        sleep: None,
    }
}

pin_project! {
    /// The future of [`lazy_timeout`].
    pub(crate) struct LazyTimeout<F> {
        #[pin]
        fut: F,
        deadline: Instant,
        // Whether it was polled once already.
        polled: bool,
        #[pin]
        sleep: Option<Sleep>,
    }
}

impl<F: Future> Future for LazyTimeout<F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Poll::Ready(out) = this.fut.poll(cx) {
            return Poll::Ready(Some(out));
        }
        if !*this.polled {
            *this.polled = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if this.sleep.is_none() {
            this.sleep
                .set(Some(tokio::time::sleep_until(*this.deadline)));
        }
        match this.sleep.as_pin_mut().map(|sleep| sleep.poll(cx)) {
            Some(Poll::Ready(())) => Poll::Ready(None),
            _ => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_future_that_never_ends_times_out_at_the_deadline_counted_from_its_creation() {
        let start = Instant::now();
        let timed = lazy_timeout(Duration::from_secs(5), std::future::pending::<()>());
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(timed.await, None);
        assert_eq!(start.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_future_ready_on_its_second_poll_never_arms_the_timer() {
        let mut polls = 0;
        let second = std::future::poll_fn(move |cx| {
            polls += 1;
            if polls == 1 {
                // As hyper's body asks the connection for its bytes.
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            Poll::Ready(7)
        });
        let mut timed = std::pin::pin!(lazy_timeout(Duration::from_secs(5), second));
        assert_eq!(futures_util::poll!(timed.as_mut()), Poll::Pending);
        assert!(timed.sleep.is_none());
        assert_eq!(timed.await, Some(7));
    }

    #[tokio::test(start_paused = true)]
    async fn a_future_pending_twice_arms_the_timer_and_still_ends_in_time() {
        let (tx, rx) = tokio::sync::oneshot::channel::<u8>();
        let mut timed = std::pin::pin!(lazy_timeout(Duration::from_secs(5), rx));
        assert_eq!(futures_util::poll!(timed.as_mut()), Poll::Pending);
        assert_eq!(futures_util::poll!(timed.as_mut()), Poll::Pending);
        assert!(timed.sleep.is_some(), "armed at the second pending poll");
        tx.send(3).expect("the receiver waits");
        assert_eq!(timed.await, Some(Ok(3)));
    }
}
