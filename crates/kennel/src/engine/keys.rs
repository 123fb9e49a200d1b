//! Keyed jobs: the keyed lending order, and what the pool notes of the keys
//! its workers hold (ADR 0062).
//!
//! A job of a key takes, in this order:
//!
//! 1. an idle worker that holds its key (the lowest running slot);
//! 2. nothing, while a worker holds or loads its key, unless the key is
//!    *hot*: its queue would take its workers longer than `max_key_wait`
//!    (or than a load, if loads are quicker) to clear, and it has fewer
//!    than `max_workers_per_key` workers. Otherwise it queues behind them;
//! 3. a *free place* for its key: an idle worker with room for one more
//!    key, a worker starting for no job, a new worker in an empty running
//!    slot; for a hot key, also the idle worker whose keys to let go are
//!    used least lately (the fewest jobs, counted with a half life and
//!    resumed when a key let go is loaded again; then the least recently
//!    used), if they went unused for `max_key_wait` (cold);
//! 4. the queue. Once it has waited `max_key_wait` with no worker holding
//!    its key, it claims the worker whose keys are used least lately, idle,
//!    busy or loading, and takes it once that is free (`places.rs`): a job
//!    that claims a worker waits no longer than `max_key_wait`, then, where
//!    that worker loads a key, that load and `max_key_wait` more, or its job
//!    in hand (a job in hand that has run `max_key_wait` lets it take the
//!    best idle worker from twice `max_key_wait`), then its own load. Jobs
//!    beyond the claims, when more keys wait than there are workers to
//!    claim, wait their turn.
//! 5. Before all this, the jobs a load was for: a worker that loaded a key
//!    serves the jobs of the key that came before it was ready, for up to
//!    a mean load's time, before a job of another key may take it (among
//!    jobs of the class the fair shares put first), and no claim takes it
//!    within `max_key_wait` of the load.
//!
//! A key named in `min_workers_per_key` is never let go while it has no
//! more workers than that, unless every running worker holds only such
//! keys: then an overdue job takes the least used one (the bound first).
//! A job without a key takes any idle worker.

use std::time::Duration;

use super::effects::{Effects, Wake};
use super::lend::Acquired;
use super::places::Place;
use super::state::State;
use crate::dispatch::{Choice, Class, Granted, Load, Queued};
use crate::error::Error;
use crate::event::Event;
use crate::key::{Key, KeyBinding};
use crate::slot::{Held, SlotState, transitions as t};
use crate::timer::Timer;
use crate::worker::Worker;

const LOAD_ALPHA: f64 = 0.2;

impl<W: Worker> State<W> {
    /// The keyed lending order for a new job of `key`.
    pub(crate) fn acquire_keyed(
        &mut self,
        fx: &mut Effects<W>,
        queue: bool,
        key: Key,
        class: &Class,
    ) -> Result<Acquired<W>, Error> {
        if self.closed {
            return Err(Error::Closed);
        }
        self.note_keyed();
        if !self.waiters.shares.may_run(class.tenant.as_ref()) {
            // A tenant at its `max_running` waits, whatever is free.
            return self.enqueue(fx, queue, Some(key), class);
        }
        if let Some(i) = self.idle_holder(&key) {
            let mut g = self.lend_hit(fx, i, &key);
            self.charge(class, &mut g, false);
            return Ok(Acquired::Now(g));
        }
        let place = if self.wants_place(&key, 1) && self.may_place(&key)? {
            self.place_for(fx, &key, Duration::ZERO, class.tenant.as_ref(), None)
        } else {
            None
        };
        match place {
            Some(Place::Load(i, unload)) => {
                let mut g = self.lend_to_load(fx, i, key, unload);
                self.charge(class, &mut g, false);
                Ok(Acquired::Now(g))
            }
            Some(Place::Starting(i)) => {
                let keyed = Some(self.key_timer(fx, key));
                let waiting = self.waiters.push_keyed(Some(i), keyed, class);
                let id = waiting.id;
                self.slots.apply(i, |s| t::await_by(s, Some(id)));
                Ok(Acquired::Wait(waiting))
            }
            Some(Place::Start(i)) => {
                let spawn_key = self.spawn_key(&key);
                let keyed = Some(self.key_timer(fx, key));
                let waiting = self.waiters.push_keyed(Some(i), keyed, class);
                self.start_slot_for(fx, i, Some(waiting.id), spawn_key);
                Ok(Acquired::Wait(waiting))
            }
            Some(Place::Respawn(i)) => {
                self.move_idle(fx, i, key.clone());
                self.enqueue(fx, queue, Some(key), class)
            }
            None => self.enqueue(fx, queue, Some(key), class),
        }
    }

    /// The timing of jobs (the hot-key rule reads their mean) starts with
    /// the first keyed job.
    fn note_keyed(&mut self) {
        if !self.keyed {
            self.keyed = true;
            self.retime();
        }
    }

    /// A keyed job's entry in the queue: its key, when it came, and the
    /// timers that look at it again once it has waited `max_key_wait`, and
    /// twice that.
    pub(crate) fn key_timer(
        &self,
        fx: &mut Effects<W>,
        key: Key,
    ) -> (Key, tokio::time::Instant, [Timer; 2]) {
        let timers = key_timers(fx, self.opts.max_key_wait, self.now, self.now);
        (key, self.now, timers)
    }

    /// A new `max_key_wait`: each waiting keyed job looks again once it has
    /// waited that long, and twice that. Its old timers may have passed
    /// already, and a job whose worker came free in between would then be
    /// looked at by nothing.
    pub(super) fn rearm_key_waits(&mut self, fx: &mut Effects<W>) {
        let (wait, now) = (self.opts.max_key_wait, self.now);
        self.waiters
            .rearm_keyed(|since| key_timers(fx, wait, now, since));
    }

    /// The key a new worker starts for: the job's, in a `spawn` pool.
    fn spawn_key(&self, key: &Key) -> Option<Key> {
        (self.opts.key_binding == KeyBinding::Spawn).then(|| key.clone())
    }

    /// The lowest running slot whose idle worker holds `key`, loaded.
    fn idle_holder(&self, key: &Key) -> Option<usize> {
        (0..self.slots.size()).find(|&i| match self.slots.state(i) {
            SlotState::Ready {
                live,
                held: Held::Idle { .. },
            } => live.record.keys.has_loaded(key),
            _ => false,
        })
    }

    /// How many running workers hold `key`, loaded or loading, or are
    /// starting for a job of it.
    pub(super) fn holders(&self, key: &Key) -> usize {
        let holds = |s: &SlotState<W>| match s {
            SlotState::Ready { live, .. } => live.record.keys.holds(key),
            SlotState::Starting {
                awaited_by: Some(id),
                ..
            } => self.waiters.key_of(*id) == Some(key),
            // Started for a key (`spawn`) with no job awaiting it.
            SlotState::Starting { key: started, .. } => started.as_ref() == Some(key),
            // Ending to start one for the key (`spawn`).
            SlotState::Closing { restart_for, .. } => restart_for.as_ref() == Some(key),
            _ => false,
        };
        self.slots
            .states(self.slots.size())
            .filter(|s| holds(s))
            .count()
    }

    /// Whether a job of `key` should get a place of its own: no worker
    /// holds the key, or the key is hot. `coming` counts jobs of the key
    /// not yet in the queue (the one asking).
    fn wants_place(&self, key: &Key, coming: usize) -> bool {
        let holders = self.holders(key);
        if holders == 0 {
            return true;
        }
        if self.opts.max_workers_per_key.is_some_and(|m| holders >= m) {
            return false;
        }
        let Some(mean) = self.ewma else {
            return false;
        };
        let jobs = (self.waiters.queued(key) + coming) as f64;
        let clears_in = jobs * mean / holders as f64;
        let limit = self.opts.max_key_wait.as_secs_f64();
        clears_in > self.load_ewma.map_or(limit, |l| l.min(limit))
    }

    /// Lends the idle worker of slot `i`, which holds `key`.
    fn lend_hit(&mut self, fx: &mut Effects<W>, i: usize, key: &Key) -> Granted<W> {
        let now = self.now;
        let counted = Some(self.half_life());
        self.with_record(i, |r| r.keys.mark_used(key, now, counted));
        let mut g = self.take_slot(i).expect("an idle holder was chosen");
        g.key = Some(key.clone());
        self.arm_slow(fx, i);
        self.keep_spares(fx);
        g
    }

    /// Lends the idle worker of slot `i` to a job of `key`, which it loads
    /// first (after letting go of `unload`). The slot shows the key as
    /// loading from now, so that jobs of the key wait for it.
    pub(super) fn lend_to_load(
        &mut self,
        fx: &mut Effects<W>,
        i: usize,
        key: Key,
        unload: Vec<Key>,
    ) -> Granted<W> {
        let (now, half_life) = (self.now, self.half_life());
        self.let_go_of(i, &unload);
        let count = self.let_go.take(&key, now, half_life);
        self.with_record(i, |r| {
            r.keys.add(&key, now, true, count);
            r.keys.mark_used(&key, now, Some(half_life));
        });
        let mut g = self.take_slot(i).expect("an idle worker was chosen");
        g.key = Some(key.clone());
        g.load = Some(Load { key, unload });
        self.arm_slow(fx, i);
        self.keep_spares(fx);
        g
    }

    /// A worker handed to a keyed job that gave up before it loaded the
    /// key: its record shows the keys it still holds.
    pub(crate) fn undo_load(&mut self, i: usize, load: &Load) {
        let (now, half_life) = (self.now, self.half_life());
        self.let_go_of(i, std::slice::from_ref(&load.key));
        let counts: Vec<f64> = (load.unload.iter())
            .map(|k| self.let_go.take(k, now, half_life))
            .collect();
        self.with_record(i, |r| {
            for (k, count) in load.unload.iter().zip(counts) {
                r.keys.add(k, now, false, count);
            }
        });
    }

    /// Takes `keys` off the worker of slot `i`, keeping their counts of
    /// jobs for when a worker loads them again.
    pub(super) fn let_go_of(&mut self, i: usize, keys: &[Key]) {
        let (now, half_life) = (self.now, self.half_life());
        let gone = self.with_record(i, |r| {
            keys.iter()
                .filter_map(|k| r.keys.remove(k))
                .collect::<Vec<_>>()
        });
        for held in gone.unwrap_or_default() {
            self.let_go.keep(&held, now, half_life);
        }
    }

    /// A worker a keyed job got has loaded its key (`took` the time), or
    /// failed to (`None`); `unloaded` went first.
    pub(crate) fn key_settled(
        &mut self,
        fx: &mut Effects<W>,
        i: usize,
        cell: &std::sync::Arc<crate::slot::WorkerCell>,
        load: &Load,
        took: Option<Duration>,
    ) {
        let ours = self
            .slots
            .state(i)
            .cell()
            .is_some_and(|c| std::sync::Arc::ptr_eq(c, cell));
        if !ours {
            return;
        }
        for key in &load.unload {
            fx.emit(Event::Unloaded {
                slot: i,
                key: key.clone(),
            });
        }
        let key = &load.key;
        match took {
            Some(took) => {
                let now = self.now;
                self.with_record(i, |r| r.keys.loaded(key, now));
                self.refusals.loaded(key);
                let secs = took.as_secs_f64();
                self.load_ewma = Some(self.load_ewma.map_or(secs, |m| m + LOAD_ALPHA * (secs - m)));
                self.note_start_cost(fx, "loading a key", took);
                fx.emit(Event::Loaded {
                    slot: i,
                    key: key.clone(),
                    took,
                });
            }
            None => {
                self.let_go_of(i, std::slice::from_ref(key));
            }
        }
    }

    /// Gives waiting jobs what the keyed lending order has for them, in the
    /// order of the fair shares (oldest first within one tenant's level); a
    /// job that gets nothing now does not hold back the next. First, though,
    /// the jobs a load was for go: a worker that loaded a key serves the jobs
    /// of the key that came before it was ready, for a load's time, before a
    /// job of another key may take it.
    pub(crate) fn pump_keyed(&mut self, fx: &mut Effects<W>) {
        let queued = self.waiters.snapshot();
        // Only jobs of the class the fair shares put first pass others.
        let lead = queued
            .first()
            .and_then(|q| self.waiters.class_of(q.id))
            .cloned();
        let mut rest = Vec::new();
        for q in queued {
            match self.batch_holder(&q, lead.as_ref()) {
                Some((i, key)) if self.may_pump(q.id) => {
                    let g = self.lend_hit(fx, i, &key);
                    self.grant_to(q.id, g);
                }
                _ => rest.push(q),
            }
        }
        for q in rest {
            if self.may_pump(q.id) {
                self.pump_queued(fx, q);
            }
        }
    }

    /// The idle worker that loaded the key of waiting job `q` (of class
    /// `lead`) for the batch `q` is of: the key was ready after `q` came,
    /// less than a mean load ago.
    fn batch_holder(&self, q: &Queued, lead: Option<&Class>) -> Option<(usize, Key)> {
        let (key, came) = q.key.as_ref()?;
        if self.waiters.class_of(q.id) != lead {
            return None;
        }
        let i = self.idle_holder(key)?;
        let SlotState::Ready { live, .. } = self.slots.state(i) else {
            return None;
        };
        let ready = live.record.keys.ready(key)?;
        let load = Duration::from_secs_f64(self.load_ewma.unwrap_or(0.0));
        (*came <= ready && self.now < ready + load).then(|| (i, key.clone()))
    }

    /// Whether waiting job `id` may get a worker in this pump: the pool is
    /// open, and its tenant did not get its `max_running` meanwhile.
    fn may_pump(&self, id: u64) -> bool {
        let class = self.waiters.class_of(id);
        !self.closed && class.is_some_and(|c| self.waiters.shares.may_run(c.tenant.as_ref()))
    }

    /// The keyed lending order for waiting job `q`.
    fn pump_queued(&mut self, fx: &mut Effects<W>, q: Queued) {
        let Queued { id, bound, key } = q;
        let Some((key, since)) = key else {
            self.pump_one(fx, id, bound);
            return;
        };
        if let Some(i) = self.idle_holder(&key) {
            let g = self.lend_hit(fx, i, &key);
            self.grant_to(id, g);
            return;
        }
        if bound.is_some() || !self.wants_place(&key, 0) {
            return;
        }
        match self.may_place(&key) {
            Ok(true) => {}
            Ok(false) => return,
            Err(err) => return self.waiters.fail(id, err),
        }
        let tenant = self.waiters.class_of(id).and_then(|c| c.tenant.clone());
        let waited = self.now.saturating_duration_since(since);
        match self.place_for(fx, &key, waited, tenant.as_ref(), Some(id)) {
            Some(Place::Load(i, unload)) => {
                let g = self.lend_to_load(fx, i, key, unload);
                self.grant_to(id, g);
            }
            Some(Place::Starting(i)) => {
                self.waiters.set_bound(id, Some(i));
                self.slots.apply(i, |s| t::await_by(s, Some(id)));
            }
            Some(Place::Start(i)) => {
                self.waiters.set_bound(id, Some(i));
                let spawn_key = self.spawn_key(&key);
                self.start_slot_for(fx, i, Some(id), spawn_key);
            }
            Some(Place::Respawn(i)) => {
                self.move_idle(fx, i, key);
            }
            None => {}
        }
    }

    /// A job without a key, in the keyed pump: any idle worker, else (when
    /// it waits for no starting worker) a starting or new one.
    fn pump_one(&mut self, fx: &mut Effects<W>, id: u64, bound: Option<usize>) {
        match self.choose(bound.is_none()) {
            Choice::Idle(i) => {
                let g = self
                    .take_slot(i)
                    .expect("the lending order chose an idle slot");
                self.arm_slow(fx, i);
                self.grant_to(id, g);
            }
            Choice::Starting(i) => {
                self.waiters.set_bound(id, Some(i));
                self.slots.apply(i, |s| t::await_by(s, Some(id)));
            }
            Choice::Start(i) if self.job_may_start() => {
                self.waiters.set_bound(id, Some(i));
                self.start_slot(fx, i, Some(id));
            }
            Choice::Start(_) | Choice::Queue => {}
        }
    }
}

/// The timers of a keyed job that came at `since`: once it has waited
/// `wait`, and twice that (at once, where that is past).
fn key_timers<W: Worker>(
    fx: &mut Effects<W>,
    wait: Duration,
    now: tokio::time::Instant,
    since: tokio::time::Instant,
) -> [Timer; 2] {
    [1, 2].map(|n| fx.wake_at((since + wait * n).max(now), Wake::KeyWait))
}
