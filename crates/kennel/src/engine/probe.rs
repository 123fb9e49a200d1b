//! Health probes (`probe_every`, `probe_on_lend`, as their options say): a
//! probed worker is lent to the pool's own lease while [`Worker::check`]
//! runs. One that passes goes back idle with its idle time kept (the probe
//! does not delay its eviction). With `probe_on_lend`, a job waits in the
//! queue while the worker it would take is probed; a worker handed straight
//! from one job to the next is not probed: it has just served.

use std::time::Duration;

use tokio::time::Instant;

use super::effects::{Effects, Wake};
use super::state::State;
use crate::dispatch::Granted;
use crate::slot::Held;
use crate::slot::{Probed, SlotState};
use crate::worker::Worker;

/// A worker taken for its probe, and the probe's timeout.
#[derive(Debug)]
pub(crate) struct ProbeRun<W> {
    pub(crate) granted: Granted<W>,
    pub(crate) timeout: Duration,
}

impl<W: Worker> State<W> {
    /// Arms the next round of probes when the first idle running worker is
    /// due (`probe_every` after it turned idle or after its last probe),
    /// or `probe_every` from now when none is idle; none without
    /// `probe_every`.
    pub(crate) fn arm_probe(&mut self, fx: &mut Effects<W>) {
        self.probe_tick = match self.opts.probe_every {
            Some(every) if !self.closed => {
                let at = (0..self.slots.size())
                    .filter_map(|i| Some(self.probe_due(i, every)?.0))
                    .min()
                    .unwrap_or(self.now + every)
                    .max(self.now);
                Some((at, fx.wake_at(at, Wake::Probe)))
            }
            _ => None,
        };
    }

    /// A worker turned idle in slot `i`: the next round comes no later than
    /// its first probe.
    pub(crate) fn probe_in_time(&mut self, fx: &mut Effects<W>, i: usize) {
        let Some(every) = self.opts.probe_every.filter(|_| !self.closed) else {
            return;
        };
        let due = self.probe_due(i, every).map(|(due, _)| due);
        if due.is_some_and(|due| self.probe_tick.as_ref().is_none_or(|(at, _)| due < *at)) {
            self.arm_probe(fx);
        }
    }

    /// When the idle running worker of slot `i` is due for its probe:
    /// `every` after it turned idle, or after its last probe if later (at
    /// once when neither is known); with when it turned idle.
    fn probe_due(&self, i: usize, every: Duration) -> Option<(Instant, Option<Instant>)> {
        match self.slots.state(i) {
            SlotState::Ready {
                live,
                held: Held::Idle { since, .. },
            } => {
                let from = match (*since, live.record.probed_at) {
                    (Some(s), Some(p)) => s.max(p),
                    (Some(t), None) | (None, Some(t)) => t,
                    (None, None) => return Some((self.now, *since)),
                };
                Some((from + every, *since))
            }
            _ => None,
        }
    }

    /// Time to probe: every idle running worker that is due is taken for
    /// its probe.
    pub(crate) fn on_probe_tick(&mut self, fx: &mut Effects<W>) {
        if let Some(every) = self.opts.probe_every.filter(|_| !self.closed) {
            for i in 0..self.slots.size() {
                if let Some((due, idle_since)) = self.probe_due(i, every)
                    && due <= self.now
                {
                    self.probe_slot(fx, i, idle_since);
                }
            }
        }
        self.arm_probe(fx);
    }

    /// Takes the idle worker of slot `i` for its probe, on a task of the
    /// pool; `idle_since` is kept for when it goes back idle (`None` for a
    /// worker probed on its way to a job).
    pub(crate) fn probe_slot(
        &mut self,
        fx: &mut Effects<W>,
        i: usize,
        idle_since: Option<Instant>,
    ) {
        let Some(granted) = self.take_slot(i) else {
            return;
        };
        self.with_lent_record(i, |r| r.probe = Some(Probed { idle_since }));
        if idle_since.is_none() {
            self.probes_for_jobs += 1;
        }
        fx.probes.push(ProbeRun {
            granted,
            timeout: self.opts.probe_timeout,
        });
    }

    /// The lent worker of slot `i` is back from the pool's own use; if that
    /// was its probe, when it turned idle before it.
    pub(crate) fn end_probe(&mut self, i: usize) -> Option<Instant> {
        let now = self.now;
        let probe = self.with_lent_record(i, |r| {
            let probe = r.probe.take();
            if probe.is_some() {
                r.probed_at = Some(now);
            }
            probe
        })??;
        if probe.idle_since.is_none() {
            self.probes_for_jobs -= 1;
        }
        probe.idle_since
    }

    /// With `probe_on_lend`, whether every waiting job that may take any
    /// worker has a probe on its way to it already.
    pub(crate) fn jobs_covered_by_probes(&self) -> bool {
        self.probes_for_jobs > 0 && self.waiters.unbound() <= self.probes_for_jobs
    }

    /// Whether an idle worker's idle time must be read: for its eviction,
    /// or for its probes.
    pub(crate) fn reads_idle_time(&self) -> bool {
        self.eviction.may_evict() || self.opts.probe_every.is_some()
    }
}
