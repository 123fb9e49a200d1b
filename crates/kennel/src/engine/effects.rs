//! What a handler decides must happen, carried out by the shell once the
//! pool's lock is released.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::event::Event;
use crate::eviction::EvictAfter;
use crate::slot::WorkerCell;
use crate::timer::Timer;
use crate::worker::{Exited, Killer};

/// The side effects of one lock session, in the order they were decided.
#[derive(Debug)]
pub(crate) struct Effects<W> {
    /// A returned job held its worker this long (for the metrics).
    pub(crate) job_done: Option<Duration>,
    pub(crate) events: Vec<Event>,
    pub(crate) kills: Vec<Killer>,
    /// Workers to close gracefully, each on a task of its own.
    pub(crate) closes: Vec<(W, Killer)>,
    /// Workers to drop (dropping one may kill a process).
    pub(crate) drops: Vec<W>,
    pub(crate) warmups: Vec<Warmup>,
    /// Exit watchers to spawn: slot, generation, the worker's exit.
    pub(crate) watches: Vec<(usize, u64, Exited)>,
    pub(crate) wakes: Vec<Arm>,
    /// Cells of ended workers whose jobs must learn of the end.
    pub(crate) holders: Vec<Arc<WorkerCell>>,
    /// Meters to read off the lock (slot, generation, meter), then report.
    pub(crate) meters: Vec<(usize, u64, crate::worker::Meter)>,
    /// Workers taken for their probe, each to check on a task of its own.
    pub(crate) probes: Vec<super::probe::ProbeRun<W>>,
    /// Workers taken to load a key kept warm (`min_workers_per_key`), each
    /// on a task of its own.
    pub(crate) key_loads: Vec<crate::dispatch::Granted<W>>,
    /// Workers taken to unload keys over the key memory budget, and those
    /// keys, each on a task of its own.
    pub(crate) key_unloads: Vec<(crate::dispatch::Granted<W>, Vec<crate::Key>)>,
    /// Something that `close` waits for may have ended.
    pub(crate) ended: bool,
}

impl<W> Default for Effects<W> {
    fn default() -> Self {
        Self {
            job_done: None,
            events: Vec::new(),
            kills: Vec::new(),
            closes: Vec::new(),
            drops: Vec::new(),
            warmups: Vec::new(),
            watches: Vec::new(),
            wakes: Vec::new(),
            holders: Vec::new(),
            meters: Vec::new(),
            probes: Vec::new(),
            key_loads: Vec::new(),
            key_unloads: Vec::new(),
            ended: false,
        }
    }
}

impl<W> Effects<W> {
    pub(crate) fn emit(&mut self, event: Event) {
        self.events.push(event);
    }

    pub(crate) fn kill(&mut self, killer: Killer) {
        self.kills.push(killer);
    }

    /// Arms a timer that reports `wake` at `at`; dropping the returned
    /// [`Timer`] cancels it.
    pub(crate) fn wake_at(&mut self, at: Instant, wake: Wake) -> Timer {
        self.wake_on(When::At(at), wake)
    }

    /// As [`wake_at`](Self::wake_at), when `when` is due.
    pub(crate) fn wake_on(&mut self, when: When, wake: Wake) -> Timer {
        let (timer, token) = Timer::new();
        self.wakes.push(Arm { when, wake, token });
        timer
    }
}

/// A warm-up to run on a task of the pool.
#[derive(Debug)]
pub(crate) struct Warmup {
    pub(crate) slot: usize,
    /// The pool's running size as it starts.
    pub(crate) size: usize,
    pub(crate) generation: u64,
    pub(crate) limit: Option<Duration>,
    pub(crate) token: CancellationToken,
    /// The key the worker starts for (`spawn`).
    pub(crate) key: Option<crate::Key>,
    /// The GPU it is placed on (`gpus_per_worker`).
    pub(crate) gpu: Option<crate::GpuPlace>,
}

/// A timer to arm.
#[derive(Debug)]
pub(crate) struct Arm {
    pub(crate) when: When,
    pub(crate) wake: Wake,
    pub(crate) token: CancellationToken,
}

/// When a timer fires.
pub(crate) enum When {
    At(Instant),
    /// When an eviction's future resolves.
    On(EvictAfter),
}

impl std::fmt::Debug for When {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::At(at) => f.debug_tuple("At").field(at).finish(),
            Self::On(_) => f.write_str("On(..)"),
        }
    }
}

/// What a timer reports to the engine when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// A worker outlived its lifetime.
    Lifetime { slot: usize, generation: u64 },
    /// A slot's back-off ended.
    Backoff { slot: usize, generation: u64 },
    /// An idle worker's eviction is due.
    Evict {
        slot: usize,
        generation: u64,
        since: Instant,
    },
    /// The sizing asked to be woken.
    Sizing,
    /// Look again at a start the sizing refused while jobs wait.
    StartRetry,
    /// The crash-loop breaker's back-off ended: time for a trial start.
    Trial,
    /// A job has held the worker of this slot past `slow_job`.
    Slow { slot: usize, generation: u64 },
    /// Time to sample the workers' memory.
    Memory,
    /// Time to probe the workers idle for `probe_every`.
    Probe,
    /// A slot rested after the pool's own limit retired a young worker.
    Rested { slot: usize, generation: u64 },
    /// Time to start the replacement of a worker ahead of its lifetime.
    SurgeDue { slot: usize, generation: u64 },
    /// A keyed job has waited `max_key_wait`.
    KeyWait,
}
