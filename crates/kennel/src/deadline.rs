//! A job's deadlines: the soft `job_timeout` (moved by heartbeats when the
//! pool says so), the hard `job_kill_after`, and the worker's end, raced
//! against the job.
//!
//! The race is one future ([`Race`]) that holds the job once: an `async
//! fn` that takes the job and awaits it in a `select!` keeps it twice (as
//! its argument and in the `select!`), and every job's future would carry
//! that copy, which a caller that boxes the job (the service does) pays
//! in memory and in copying.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::sync::watch;
use tokio::time::{Instant, Sleep};
use tokio_util::sync::ReusableBoxFuture;

/// How a job's race ended.
pub(crate) enum End<R> {
    /// The job returned.
    Done(R),
    /// The soft limit passed (`job_timeout`): the worker may be asked to
    /// cancel.
    TimedOut(Duration),
    /// The hard limit passed (`job_kill_after`): the worker is killed.
    KillAfter(Duration),
    /// The worker ended under the job.
    Died,
}

/// The limits of one job.
pub(crate) struct Limits {
    /// `job_timeout`, for this call.
    pub(crate) soft: Option<Duration>,
    /// `job_kill_after`.
    pub(crate) hard: Option<Duration>,
    /// The worker's heartbeat, when beats move the soft deadline.
    pub(crate) beats: Option<watch::Receiver<u64>>,
}

/// Races `job` against the worker's end (`died`) and the limits, counted
/// from `start`. Each poll looks, in this order, at the job, the soft
/// limit, the hard limit, the worker's end, then a heartbeat.
pub(crate) fn race<J: Future, D: Future<Output = ()>>(
    job: J,
    died: D,
    limits: Limits,
    start: Instant,
) -> Race<J, D> {
    let Limits { soft, hard, beats } = limits;
    Race {
        job,
        died,
        soft: soft.map(|d| tokio::time::sleep_until(start + d)),
        hard: hard.map(|d| tokio::time::sleep_until(start + d)),
        soft_for: soft.unwrap_or_default(),
        hard_for: hard.unwrap_or_default(),
        // A heartbeat only moves a soft limit.
        beats: soft.and(beats).map(Beats::new),
    }
}

pin_project! {
    /// The future of [`race`].
    pub(crate) struct Race<J, D> {
        #[pin]
        job: J,
        #[pin]
        died: D,
        #[pin]
        soft: Option<Sleep>,
        #[pin]
        hard: Option<Sleep>,
        soft_for: Duration,
        hard_for: Duration,
        beats: Option<Beats>,
    }
}

impl<J: Future, D: Future<Output = ()>> Future for Race<J, D> {
    type Output = End<J::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            if let Poll::Ready(r) = this.job.as_mut().poll(cx) {
                return Poll::Ready(End::Done(r));
            }
            if let Some(soft) = this.soft.as_mut().as_pin_mut()
                && soft.poll(cx).is_ready()
            {
                return Poll::Ready(End::TimedOut(*this.soft_for));
            }
            if let Some(hard) = this.hard.as_mut().as_pin_mut()
                && hard.poll(cx).is_ready()
            {
                return Poll::Ready(End::KillAfter(*this.hard_for));
            }
            if this.died.as_mut().poll(cx).is_ready() {
                return Poll::Ready(End::Died);
            }
            let Some(beats) = this.beats.as_mut() else {
                return Poll::Pending;
            };
            match beats.poll_beat(cx) {
                Poll::Pending => return Poll::Pending,
                // A beat moves the soft limit; then all is looked at again.
                Poll::Ready(true) => {
                    if let Some(soft) = this.soft.as_mut().as_pin_mut() {
                        soft.reset(Instant::now() + *this.soft_for);
                    }
                }
                // The worker dropped its heartbeat: no more beats.
                Poll::Ready(false) => *this.beats = None,
            }
        }
    }
}

/// A worker's heartbeat, as beats that can be polled: each poll that
/// resolves is one beat (`true`) or the end of the heartbeat (`false`).
/// Boxed, in one box reused from beat to beat: only the pools whose beats
/// move the soft limit pay for it.
struct Beats(ReusableBoxFuture<'static, (bool, watch::Receiver<u64>)>);

impl Beats {
    fn new(rx: watch::Receiver<u64>) -> Self {
        Self(ReusableBoxFuture::new(next_beat(rx)))
    }

    fn poll_beat(&mut self, cx: &mut Context<'_>) -> Poll<bool> {
        let (alive, rx) = std::task::ready!(self.0.poll(cx));
        self.0.set(next_beat(rx));
        Poll::Ready(alive)
    }
}

async fn next_beat(mut rx: watch::Receiver<u64>) -> (bool, watch::Receiver<u64>) {
    let alive = rx.changed().await.is_ok();
    (alive, rx)
}
