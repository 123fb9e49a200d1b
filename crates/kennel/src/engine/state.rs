//! The pool's state under its one lock (ADR 0005).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::breaker::Breaker;
use crate::dispatch::{Order, Waiters};
use crate::eviction::Eviction;
use crate::gpu::placer::GpuPlacer;
use crate::options::Options;
use crate::sizing::{Sizing, SizingView};
use crate::slot::Held;
use crate::slot::Slots;
use crate::startup::Startup;
use crate::stats::Stats;
use crate::timer::Timer;

/// Everything the handlers decide on. Never held across `.await`; nothing
/// is spawned, killed, closed or emitted while it is held: the handlers
/// (methods of `State`, in the files beside this one) return those as
/// [`Effects`](super::effects::Effects).
#[derive(Debug)]
pub(crate) struct State<W> {
    /// The time of this lock session, read once when the lock was taken:
    /// handlers read the clock only through it.
    pub(crate) now: Instant,
    pub(crate) slots: Slots<W>,
    pub(crate) waiters: Waiters<W>,
    pub(crate) opts: Options,
    pub(crate) startup: Arc<dyn Startup>,
    pub(crate) sizing: Box<dyn Sizing>,
    /// Whether the sizing hears of finished jobs (its plan says).
    pub(crate) sizing_jobs: bool,
    pub(crate) eviction: Arc<dyn Eviction>,
    /// Whether the metrics were switched on when the pool was built.
    pub(crate) metrics: bool,
    /// Whether jobs are timed: something reads their times.
    pub(crate) timing: bool,
    pub(crate) closed: bool,
    pub(crate) ever_ready: bool,
    pub(crate) order: Order,
    /// Mean job time (EWMA), in seconds.
    pub(crate) ewma: Option<f64>,
    /// Mean time a worker took to load a key (EWMA), in seconds.
    pub(crate) load_ewma: Option<f64>,
    /// Whether a warm-up or a load as long as half of `max_lifetime` was
    /// said (`pool:warning`), since `max_lifetime` last changed.
    pub(crate) short_lifetime_said: bool,
    /// Whether a keyed job came: jobs are timed from then (the hot-key
    /// rule reads their mean).
    pub(crate) keyed: bool,
    /// The counts of jobs of the keys let go, resumed when loaded again.
    pub(crate) let_go: crate::slot::LetGo,
    /// The keys whose load or start failed lately, refused for a back-off.
    pub(crate) refusals: super::refusals::Refusals,
    /// Keys kept warm whose load failed: not tried again until the pool is
    /// reconfigured.
    pub(crate) warm_failed: std::collections::BTreeSet<crate::Key>,
    pub(crate) sizing_wake: Option<Timer>,
    /// The next look at the waiting jobs when a tenant's hold on a worker's
    /// keys lapses: when, and its timer.
    pub(crate) guard_lapse: Option<(Instant, Timer)>,
    /// The next look at a start the sizing refused while jobs wait.
    pub(crate) start_retry: Option<Timer>,
    /// Draws the lifetime jitter of each worker.
    pub(crate) rng: rand::rngs::StdRng,
    /// Slots at or above this keep no worker (after a memory-forced shrink).
    pub(crate) kept_limit: usize,
    /// The most jobs ever waiting at once, as its gauge shows.
    pub(crate) high_water: usize,
    pub(crate) breaker: Breaker,
    /// The next memory sample, with `max_memory`.
    pub(crate) memory_tick: Option<Timer>,
    /// The next round of probes (`probe_every`): when, and its timer.
    pub(crate) probe_tick: Option<(Instant, Timer)>,
    /// Probes running on workers on their way to a waiting job
    /// (`probe_on_lend`).
    pub(crate) probes_for_jobs: usize,
    /// The warm-ups seen lately: how far ahead of a known deadline a
    /// replacement starts (`max_surge`).
    pub(crate) warmups: super::surge::WarmupsSeen,
    /// The workers' places on the GPUs, with `gpus_per_worker`.
    pub(crate) gpus: Option<GpuPlacer>,
}

/// What a pool is built from.
#[derive(Debug)]
pub(crate) struct Parts {
    pub(crate) name: Arc<str>,
    pub(crate) capacity: usize,
    pub(crate) size: usize,
    pub(crate) sizing_jobs: bool,
    pub(crate) opts: Options,
    pub(crate) startup: Arc<dyn Startup>,
    pub(crate) sizing: Box<dyn Sizing>,
    pub(crate) eviction: Arc<dyn Eviction>,
    pub(crate) metrics: bool,
    pub(crate) rng: rand::rngs::StdRng,
    pub(crate) gpus: Option<GpuPlacer>,
}

const EWMA_ALPHA: f64 = 0.2;

impl<W> State<W> {
    pub(crate) fn new(p: Parts) -> Self {
        let mut st = Self {
            now: Instant::now(),
            slots: Slots::new(p.capacity, p.size),
            waiters: Waiters::new(),
            opts: p.opts,
            startup: p.startup,
            sizing: p.sizing,
            sizing_jobs: p.sizing_jobs,
            eviction: p.eviction,
            metrics: p.metrics,
            timing: false,
            closed: false,
            ever_ready: false,
            order: Order::default(),
            ewma: None,
            load_ewma: None,
            short_lifetime_said: false,
            keyed: false,
            let_go: crate::slot::LetGo::default(),
            refusals: super::refusals::Refusals::default(),
            warm_failed: std::collections::BTreeSet::new(),
            sizing_wake: None,
            guard_lapse: None,
            start_retry: None,
            rng: p.rng,
            kept_limit: usize::MAX,
            high_water: 0,
            breaker: Breaker::default(),
            memory_tick: None,
            probe_tick: None,
            probes_for_jobs: 0,
            warmups: super::surge::WarmupsSeen::default(),
            gpus: p.gpus,
        };
        st.waiters.shares.set_table(&st.opts.tenants);
        st.retime();
        st
    }

    /// Times jobs only when something reads their times: the metrics, the
    /// mean job time behind `max_queue_wait`, a sizing that learns from
    /// jobs.
    pub(crate) fn retime(&mut self) {
        self.timing = self.metrics || self.opts.max_queue_wait.is_some() || self.sizing_jobs || self.keyed
                // A tenant's `Retry-After` is its projected wait.
                || !self.opts.tenants.is_empty();
    }

    pub(crate) fn stats(&self) -> Stats {
        let c = self.slots.counts();
        Stats {
            starting: c.starting,
            idle: c.idle,
            lent: c.lent + c.lent_above,
            waiting: self.waiters.len(),
            capacity: self.slots.capacity(),
            size: self.slots.size(),
            kept: c.kept,
            backing_off: c.backing_off,
            surging: self.slots.surging(),
            broken: self.broken(),
        }
    }

    pub(crate) fn view(&self) -> SizingView {
        let mut view = view_of(&self.slots, &self.waiters, self.now);
        // With `replace_on_resize`, a size is measured once its workers
        // started at it.
        if self.opts.replace_on_resize && view.all_ready {
            view.all_ready = super::resized::all_at_size(&self.slots);
        }
        view
    }

    /// The wait of a job that joined the queue now, in seconds, with jobs
    /// that take `mean` seconds: (waiting + 1) / running slots × `mean`.
    pub(crate) fn projected(&self, mean: f64) -> f64 {
        let running = self.slots.size().max(1) as f64;
        (self.waiters.len() as f64 + 1.0) / running * mean
    }

    /// As [`Pool::is_warming`](crate::Pool::is_warming).
    pub(crate) fn is_warming(&self) -> bool {
        let starts_itself = self.startup.is_eager() || self.opts.min_idle.is_some_and(|n| n > 0);
        starts_itself && !self.ever_ready
    }

    /// As [`Pool::projected_wait`](crate::Pool::projected_wait).
    pub(crate) fn projected_wait(&self) -> Option<Duration> {
        Duration::try_from_secs_f64(self.projected(self.ewma?)).ok()
    }

    /// A job held its worker for `took` seconds.
    pub(crate) fn observe_job(&mut self, took: f64) {
        self.ewma = Some(match self.ewma {
            Some(m) => m + EWMA_ALPHA * (took - m),
            None => took,
        });
    }
}

/// What the sizing sees of the pool at `now`.
pub(crate) fn view_of<W>(slots: &Slots<W>, waiters: &Waiters<W>, now: Instant) -> SizingView {
    let c = slots.counts();
    SizingView {
        now,
        size: slots.size(),
        capacity: slots.capacity(),
        waiting: waiters.len(),
        all_ready: c.idle + c.lent == slots.size(),
        alive: slots.alive(),
    }
}

impl<W> State<W> {
    /// One row per slot: what it holds and what the pool knows of its
    /// worker.
    pub(crate) fn workers(&self) -> Vec<crate::status::WorkerRow> {
        use crate::slot::{Rest, SlotState};
        use crate::status::{RetireDue, WorkerRow, WorkerState};
        let size = self.slots.size();
        let now = self.now;
        (0..self.slots.len())
            .map(|i| {
                let state = self.slots.state(i);
                let kind = match state {
                    SlotState::Empty {
                        rest: Rest::BackOff(_),
                        ..
                    } => WorkerState::BackingOff,
                    SlotState::Empty {
                        rest: Rest::Evicted,
                        ..
                    } => WorkerState::Evicted,
                    SlotState::Empty { .. } => WorkerState::Empty,
                    SlotState::Starting { .. } => WorkerState::Starting,
                    SlotState::Ready {
                        held: Held::Idle { .. },
                        ..
                    } if i < size => WorkerState::Idle,
                    SlotState::Ready {
                        held: Held::Idle { .. },
                        ..
                    } => WorkerState::Kept,
                    SlotState::Ready {
                        live,
                        held: Held::Lent,
                    } if live.record.probe.is_some() => WorkerState::Probing,
                    SlotState::Ready {
                        held: Held::Lent, ..
                    } => WorkerState::Lent,
                    SlotState::LentGone { .. } | SlotState::Closing { .. } => WorkerState::Closing,
                };
                let live = match state {
                    SlotState::Starting { live, .. } => live.as_ref(),
                    SlotState::Ready { live, .. } => Some(live),
                    _ => None,
                };
                let retire_due = live.and_then(|l| {
                    if let Some(life) = &l.life {
                        return Some(RetireDue {
                            reason: crate::RetireReason::Lifetime,
                            in_time: Some(life.deadline.saturating_duration_since(now)),
                            jobs_left: None,
                        });
                    }
                    l.record.max_jobs.map(|n| RetireDue {
                        reason: crate::RetireReason::MaxJobs,
                        in_time: None,
                        jobs_left: Some(n.saturating_sub(l.record.jobs)),
                    })
                });
                WorkerRow {
                    slot: i,
                    state: kind,
                    generation: self.slots.generation(i),
                    pid: live.and_then(|l| l.record.pid),
                    running_for: state
                        .cell()
                        .map(|c| now.saturating_duration_since(c.started)),
                    ready_after: live.and_then(|l| l.record.ready_after),
                    jobs: live.map_or(0, |l| l.record.jobs),
                    last_job: live.and_then(|l| l.record.last_job),
                    early_exits: self.slots.early_exits(i),
                    memory: live.and_then(|l| l.record.memory),
                    threads: live.and_then(|l| l.record.threads),
                    retire_due,
                    about: live.and_then(|l| l.record.about.clone()),
                    keys: live.map_or_else(Vec::new, |l| l.record.keys.names()),
                    gpu: live.and_then(|l| l.record.gpu.clone()),
                }
            })
            .collect()
    }
}
