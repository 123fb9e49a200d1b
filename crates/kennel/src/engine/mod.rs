//! The engine behind a pool: a core that decides and a shell that acts
//! (ADR 0013).
//!
//! The core is [`State`]: the pool's state under one lock, and its handlers
//! (`lend.rs`, `life.rs`, `resize.rs` and the rest), plain functions of the
//! locked state and their input that change it through the slot transitions
//! and return what must happen as [`Effects`]: spawn a warm-up, arm a timer,
//! emit an event, close or kill a worker, wake a job. The shell,
//! [`Engine::act`], takes the lock, calls a handler, releases it, then carries
//! the effects out. Nothing is spawned, killed, closed or emitted under it.

mod breaker;
mod close;
mod effects;
mod evict;
mod gpus;
mod keys;
mod lead;
mod lend;
mod life;
mod memory;
mod places;
mod probe;
mod reconfigure;
mod refill;
mod refusals;
mod release;
mod resize;
mod resized;
mod retire;
mod side;
mod state;
mod surge;
mod tasks;
mod victims;
mod warm_keys;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::{Notify, broadcast};
use tokio::time::Instant;

pub(crate) use effects::{Effects, Wake};
pub(crate) use lend::Acquired;
pub(crate) use release::{Outcome, Returned};
pub(crate) use state::{Parts, State};

use crate::dispatch::Handing;
use crate::event::Event;
use crate::lease::Lease;
use crate::metrics::PoolMetrics;
use crate::worker::{BoxError, SlotInfo, Worker};

pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;
pub(crate) type FactoryFn<W> =
    Arc<dyn Fn(SlotInfo) -> BoxFuture<Result<W, BoxError>> + Send + Sync>;

/// The engine: shared by the pool handles, leases and tasks.
pub(crate) struct Engine<W> {
    pub(crate) name: Arc<str>,
    factory: FactoryFn<W>,
    state: parking_lot::Mutex<State<W>>,
    events: broadcast::Sender<Event>,
    /// Subscribed at build, so the first subscriber sees the build's events.
    first_events: Mutex<Option<broadcast::Receiver<Event>>>,
    ended: Notify,
    me: Weak<Self>,
    pub(crate) metrics: PoolMetrics,
    /// The runtime the pool was built on: its tasks run there, also when a
    /// lease is dropped on a thread outside the runtime.
    rt: tokio::runtime::Handle,
}

impl<W: Worker> Engine<W> {
    /// Builds the engine (inside a tokio runtime) and starts what the
    /// startup and sizing start.
    pub(crate) fn start(
        parts: Parts,
        factory: FactoryFn<W>,
        event_capacity: usize,
        warning: Option<String>,
    ) -> Arc<Self> {
        let (events, first) = broadcast::channel(event_capacity.max(1));
        let metrics = PoolMetrics::new(&parts.name, parts.metrics);
        let engine = Arc::new_cyclic(|me| Self {
            name: parts.name.clone(),
            factory,
            state: parking_lot::Mutex::new(State::new(parts)),
            events,
            first_events: Mutex::new(Some(first)),
            ended: Notify::new(),
            me: me.clone(),
            rt: tokio::runtime::Handle::current(),
            metrics,
        });
        engine.act(|st, fx| {
            if let Some(message) = warning {
                fx.emit(Event::Warning { message });
            }
            st.wake_sizing(fx);
            st.kick_startup(fx);
            st.keep_spares(fx);
            st.arm_memory(fx);
            st.arm_probe(fx);
            st.keep_keys_warm(fx);
        });
        engine
    }

    /// Locks the state, with the session's time read.
    pub(crate) fn lock(&self) -> parking_lot::MutexGuard<'_, State<W>> {
        let mut st = self.state.lock();
        st.now = Instant::now();
        st
    }

    /// The shell: runs a handler under the lock and publishes the gauges,
    /// then, after the lock is released, hands waiting jobs what they were granted and carries out
    /// what it decided. The handler runs in the pool's runtime (its clock),
    /// from any thread: a lease may be dropped on a plain thread.
    pub(crate) fn act<R>(&self, handler: impl FnOnce(&mut State<W>, &mut Effects<W>) -> R) -> R {
        let _rt = self.rt.enter();
        let mut fx = Effects::default();
        let mut st = self.lock();
        let r = handler(&mut st, &mut fx);
        if st.metrics {
            let stats = st.stats();
            self.metrics.publish(&stats, &mut st.high_water);
        }
        let handed = st.waiters.take_granted();
        drop(st);
        self.hand_over(handed);
        self.carry_out(fx);
        r
    }

    /// Sends waiting jobs what they were granted (each send wakes its job);
    /// a worker refused by a job that gave up meanwhile comes back to the
    /// pool.
    fn hand_over(&self, handed: Vec<Handing<W>>) {
        for (to, grant) in handed {
            if let Err(Ok(g)) = to.send(grant) {
                self.act(|st, fx| st.take_back(fx, g));
            }
        }
    }

    fn carry_out(&self, fx: Effects<W>) {
        let Effects {
            job_done,
            events,
            kills,
            closes,
            drops,
            warmups,
            watches,
            wakes,
            holders,
            meters,
            probes,
            key_loads,
            key_unloads,
            ended,
        } = fx;
        if let Some(held) = job_done {
            self.metrics.job_done(held);
        }
        for event in events {
            self.emit(event);
        }
        for killer in kills {
            killer.kill();
        }
        drop(drops);
        for cell in holders {
            cell.wake_holder();
        }
        for (worker, killer) in closes {
            self.rt.spawn(async move {
                worker.close().await;
                // A worker whose close resolved has ended; make sure of it.
                killer.kill();
            });
        }
        for w in warmups {
            let mut info = SlotInfo::new(self.name.clone(), w.slot).with_size(w.size);
            info.key = w.key.clone();
            info.gpu = w.gpu.clone();
            self.rt.spawn(tasks::warm_up(self.me.clone(), w, info));
        }
        for (slot, generation, exited) in watches {
            self.rt
                .spawn(tasks::watch_exit(self.me.clone(), slot, generation, exited));
        }
        for arm in wakes {
            self.rt.spawn(tasks::wake(self.me.clone(), arm));
        }
        if !meters.is_empty() {
            let me = self.me.clone();
            // On a task of its own, off the lock: a meter may scan /proc.
            self.rt.spawn(async move {
                let samples: Vec<_> = meters
                    .into_iter()
                    .map(|(slot, generation, meter)| (slot, generation, meter.read()))
                    .collect();
                if let Some(engine) = me.upgrade() {
                    engine.act(|st, fx| st.on_memory(fx, samples));
                }
            });
        }
        if let Some(me) = self.me.upgrade().filter(|_| !probes.is_empty()) {
            for run in probes {
                self.rt.spawn(tasks::probe(me.clone(), run));
            }
        }
        if let Some(me) = self.me.upgrade() {
            for granted in key_loads {
                self.rt
                    .spawn(crate::dispatch::load_warm(me.clone(), granted));
            }
            for (granted, keys) in key_unloads {
                self.rt
                    .spawn(crate::dispatch::unload(me.clone(), granted, keys));
            }
        }
        if ended {
            self.ended.notify_waiters();
        }
    }

    /// Traces, counts and broadcasts an event.
    pub(crate) fn emit(&self, event: Event) {
        event.trace(&self.name);
        self.metrics.event(&event);
        // No subscriber, or only slow ones: a broadcast never blocks the pool.
        let _ = self.events.send(event);
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Event> {
        let first = self
            .first_events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        first.unwrap_or_else(|| self.events.subscribe())
    }

    pub(crate) fn timed_out(&self, slot: usize, after: Duration) {
        // Read before the worker is killed: the slot still holds it.
        let pid = self.lock().pid_of(slot);
        self.emit(Event::TimedOut { slot, pid, after });
    }

    /// A lease comes back, with `worker` taken out of it. With `max_memory`
    /// (as it was at the lend), the worker's memory is read before the lock.
    pub(crate) fn release(&self, lease: &Lease<W>, worker: W, outcome: Outcome) {
        let meter = lease
            .cell
            .meter
            .as_ref()
            .filter(|_| lease.limits.max_memory);
        let memory = meter.and_then(crate::worker::Meter::read);
        let threads = lease
            .threads
            .as_ref()
            .zip(lease.cell.threads.as_ref())
            .and_then(|(lent, watch)| watch.at_return(lent));
        self.act(|st, fx| {
            let held = (lease.since).map(|since| st.now.saturating_duration_since(since));
            let back = Returned {
                slot: lease.slot,
                worker,
                cell: &lease.cell,
                outcome,
                held,
                job: lease.job,
                memory,
                key: lease.key.as_ref(),
                tenant: lease.job.then_some(&lease.tenant),
                threads,
            };
            st.release(fx, back);
            st.pump(fx);
        });
    }

    /// Waits until every worker has ended; kills lent ones after the grace.
    pub(crate) async fn wait_ended(&self) {
        let grace = self.lock().opts.job_grace;
        let deadline = Instant::now() + grace;
        let mut killed = false;
        loop {
            let notified = self.ended.notified();
            if self.lock().all_ended() {
                return;
            }
            if killed {
                notified.await;
            } else {
                tokio::select! {
                    () = notified => {}
                    () = tokio::time::sleep_until(deadline) => {
                        killed = true;
                        self.act(|st, fx| st.kill_lent(fx));
                    }
                }
            }
        }
    }
}

impl<W: Worker> State<W> {
    /// A timer of the pool fired.
    pub(crate) fn on_wake(&mut self, fx: &mut Effects<W>, wake: Wake) {
        match wake {
            Wake::Lifetime { slot, generation } => self.on_lifetime(fx, slot, generation),
            Wake::Backoff { slot, generation } => self.on_backoff_done(fx, slot, generation),
            Wake::Evict {
                slot,
                generation,
                since,
            } => self.on_evict(fx, slot, generation, since),
            Wake::Sizing => self.on_sizing_wake(fx),
            Wake::Trial => self.on_trial_due(fx),
            Wake::Slow { slot, generation } => self.on_slow(fx, slot, generation),
            Wake::Memory => self.on_memory_tick(fx),
            Wake::Probe => self.on_probe_tick(fx),
            Wake::Rested { slot, generation } => self.on_rested(fx, slot, generation),
            Wake::SurgeDue { slot, generation } => self.on_surge_due(fx, slot, generation),
            Wake::KeyWait => self.pump(fx),
            Wake::StartRetry => {
                self.start_retry = None;
                self.pump(fx);
            }
        }
    }
}

#[cfg(test)]
mod tests;
