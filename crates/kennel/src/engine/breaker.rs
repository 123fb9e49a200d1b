//! The crash-loop breaker: when starts keep failing with no worker ready
//! between them, jobs stop starting workers of their own and fail at once
//! with [`Error::Unavailable`]; trial starts, one at a time and spaced by a
//! back-off, find out when the workers come up again (ADR 0015).

use std::time::Duration;

use tokio::time::Instant;

use super::effects::{Effects, Wake};
use super::state::State;
use crate::backoff;
use crate::error::Error;
use crate::event::Event;
use crate::timer::Timer;
use crate::worker::Worker;

/// Failed starts in a row across the pool, and what follows from them.
#[derive(Debug, Default)]
pub(crate) struct Breaker {
    /// Failed starts (a failed warm-up, an exit during it) in a row, with no
    /// worker ready between them.
    failed: u32,
    /// What the last one said.
    last_failure: String,
    /// The next trial start may not come before this.
    trial_at: Option<Instant>,
    /// Kicks an eager startup at `trial_at`.
    trial_timer: Option<Timer>,
    /// Whether `pool:broken` was said (and `pool:recovered` is owed).
    said: bool,
}

impl<W> State<W> {
    /// Whether the run of failed starts reached `break_after_failed_starts`.
    pub(crate) fn tripped(&self) -> bool {
        let failed = self.breaker.failed;
        self.opts
            .break_after_failed_starts
            .is_some_and(|n| failed >= n)
    }

    /// Whether the pool is broken: tripped, and no ready worker can serve.
    pub(crate) fn broken(&self) -> bool {
        let c = self.slots.counts();
        self.tripped() && c.idle + c.lent == 0
    }
}

impl<W: Worker> State<W> {
    /// A start failed with `message`.
    pub(crate) fn note_failed_start(&mut self, fx: &mut Effects<W>, message: &str) {
        let b = &mut self.breaker;
        b.failed = b.failed.saturating_add(1);
        b.last_failure = message.to_owned();
        let Some(threshold) = self.opts.break_after_failed_starts else {
            return;
        };
        if b.failed < threshold {
            return;
        }
        // 1 s after the run reached the threshold, then 2, 4 … 60 s.
        let delay = backoff::delay(b.failed - threshold + 1);
        let at = self.now + delay;
        b.trial_at = Some(at);
        b.trial_timer =
            (self.startup.is_eager() && !self.closed).then(|| fx.wake_at(at, Wake::Trial));
        if self.broken() && !self.breaker.said {
            self.breaker.said = true;
            fx.emit(Event::Broken {
                failed_starts: self.breaker.failed,
                last_failure: self.breaker.last_failure.clone(),
                retry_after: delay,
            });
            // Jobs that wait for no worker in particular would wait for a
            // trial that may not come soon: tell them now.
            while let Some(id) = self.waiters.oldest_unbound() {
                let err = self.unavailable();
                self.waiters.fail(id, err);
            }
        }
    }

    /// A worker became ready: the run of failed starts is over.
    pub(crate) fn note_ready(&mut self, fx: &mut Effects<W>) {
        if std::mem::take(&mut self.breaker.said) {
            fx.emit(Event::Recovered {
                failed_starts: self.breaker.failed,
            });
        }
        self.breaker.failed = 0;
        self.breaker.trial_at = None;
        self.breaker.trial_timer = None;
    }

    /// Whether a start may happen now: always, unless the breaker has
    /// tripped; then one trial at a time, once its back-off is over.
    pub(crate) fn may_try_start(&self) -> bool {
        if !self.tripped() {
            return true;
        }
        self.slots.counts().starting == 0 && self.breaker.trial_at.is_none_or(|at| self.now >= at)
    }

    /// Whether a job may start a worker of its own now: a tripped pool
    /// with an eager startup starts trials by itself; one that starts on
    /// demand lets the next job after the back-off make the trial.
    pub(crate) fn job_may_start(&self) -> bool {
        !self.tripped() || (!self.startup.is_eager() && self.may_try_start())
    }

    /// The error of a job the broken pool turns away.
    pub(crate) fn unavailable(&self) -> Error {
        let retry_after = self
            .breaker
            .trial_at
            .map_or(Duration::ZERO, |at| at.saturating_duration_since(self.now));
        Error::Unavailable {
            retry_after,
            last_failure: self.breaker.last_failure.clone(),
        }
    }

    /// The breaker's back-off ended: an eager startup tries a start.
    pub(crate) fn on_trial_due(&mut self, fx: &mut Effects<W>) {
        self.breaker.trial_timer = None;
        self.kick_startup(fx);
    }
}
