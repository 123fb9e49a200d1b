//! A model-based property test of the pool: random sequences of lends, runs,
//! returns, `fail`s, aborts at each phase (a job dropped while it waits in the
//! queue, while it waits for a warm-up, while it runs), warm-ups that finish or
//! fail, workers that exit on their own (warming up, idle, lent), clock
//! advances (back-offs, evictions, workers that pass ten minutes) and
//! reconfigurations of the size, under each startup, on the paused clock.
//!
//! After every step the real pool is compared with a small reference model
//! written from the pool's documented rules (docs/concepts): which slot each
//! job gets (lowest idle slot, then a starting worker nobody awaits, then a new
//! worker in the lowest empty slot, then the FIFO queue), which job a freed
//! worker goes to (the oldest waiting one), which jobs are rejected or fail
//! their warm-up, which slots start and back off, and every count of `stats()`.
//! Checked also: each slot holds at most one live worker, so the live workers
//! never exceed the capacity (plus lent ones draining above a lowered
//! capacity); no worker is lent to two jobs; after `close()` no worker is
//! alive.
//!
//! Warm-ups are gated: a worker is ready only when the test says so, so the
//! order of events is the test's, not the scheduler's. A clock advance stops
//! at each timer's deadline in turn. Two back-offs due at the same instant
//! under `OrderedReady` or `LeaderFirst` would let the scheduler pick which
//! slot starts first; such an advance is not generated.
//!
//! `PROPTEST_CASES=N` runs N sequences (default 256).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kennel::{
    BoxError, Error, ExitSignal, ExitStatus, Exited, Fixed, IdleTimeout, Killer, LeaderFirst,
    Lease, NoEviction, OnDemand, OrderedReady, Parallel, Pool, Reconfig, RejectReason, SlotInfo,
    Stats, Worker,
};
use proptest::prelude::*;
use proptest::strategy::{BoxedStrategy, Union};
use proptest::test_runner::Config;
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest, prop_state_machine};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

// ---------------------------------------------------------------------------
// The reference model
// ---------------------------------------------------------------------------

type JobId = u32;

/// A worker that ran this long (ten minutes) is not an early exit.
const EARLY_MS: u64 = 600_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StartupKind {
    OnDemand,
    Parallel,
    OrderedReady,
    LeaderFirst,
}

impl StartupKind {
    fn is_eager(self) -> bool {
        self != Self::OnDemand
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `pool.lend()`: the test holds the lease.
    Lend,
    /// `pool.run(job)`: the job runs until the test lets it finish.
    Run,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    Empty,
    Starting {
        awaited_by: Option<JobId>,
        started: u64,
    },
    Idle {
        since: u64,
        started: u64,
    },
    Lent {
        job: JobId,
        started: u64,
    },
    /// The worker exited while a lend job held it; the slot waits for the
    /// lease to come back.
    Gone {
        job: JobId,
    },
}

#[derive(Debug, Clone, Copy)]
struct SlotM {
    st: St,
    early_exits: u32,
    backoff_until: Option<u64>,
    evicted: bool,
}

impl SlotM {
    fn new() -> Self {
        Self {
            st: St::Empty,
            early_exits: 0,
            backoff_until: None,
            evicted: false,
        }
    }

    fn has_live_worker(&self) -> bool {
        matches!(
            self.st,
            St::Starting { .. } | St::Idle { .. } | St::Lent { .. }
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JobSt {
    Waiting,
    Lent {
        slot: usize,
    },
    Rejected,
    WarmupFailed {
        slot: usize,
    },
    /// A run job whose worker exited under it.
    Crashed,
    /// Over, as the test asked (returned, failed, finished, aborted).
    Over,
}

#[derive(Debug, Clone, Copy)]
struct JobM {
    kind: Kind,
    st: JobSt,
}

#[derive(Debug, Clone)]
struct Model {
    startup: StartupKind,
    evict_after: Option<u64>,
    max_waiting: usize,
    now: u64,
    capacity: usize,
    size: usize,
    slots: Vec<SlotM>,
    /// The one FIFO of waiting jobs, each maybe bound to a starting slot.
    waiters: Vec<(JobId, Option<usize>)>,
    jobs: BTreeMap<JobId, JobM>,
    next_job: JobId,
    ever_ready: bool,
    /// The deadlines the last `Advance` stopped at, for the real pool to
    /// stop at too.
    stops: Vec<u64>,
}

#[derive(Debug, Clone)]
enum Op {
    Lend,
    Run,
    /// Drop the lease of a lend job.
    Return(JobId),
    /// `lease.fail()`.
    Fail(JobId),
    /// Let a run job's closure return.
    Finish(JobId),
    /// Drop a job's future: while it waits, or while a run job runs.
    Abort(JobId),
    /// The worker warming up in this slot becomes ready.
    Ready(usize),
    /// The worker warming up in this slot fails its warm-up.
    WarmupFail(usize),
    /// The worker in this slot exits on its own.
    Crash(usize),
    Advance(u64),
    Reconfigure(usize),
}

impl Model {
    fn running(&self, i: usize) -> bool {
        i < self.size
    }

    fn job_mut(&mut self, id: JobId) -> &mut JobM {
        self.jobs.get_mut(&id).expect("a job the model knows")
    }

    fn unbound(&self) -> usize {
        self.waiters.iter().filter(|(_, b)| b.is_none()).count()
    }

    fn set_awaited(&mut self, slot: usize, by: Option<JobId>) {
        if let St::Starting { awaited_by, .. } = &mut self.slots[slot].st {
            *awaited_by = by;
        }
    }

    fn bind(&mut self, id: JobId, slot: Option<usize>) {
        if let Some(w) = self.waiters.iter_mut().find(|(j, _)| *j == id) {
            w.1 = slot;
        }
    }

    fn lowest_idle(&self) -> Option<usize> {
        (0..self.size).find(|&i| matches!(self.slots[i].st, St::Idle { .. }))
    }

    fn unawaited_starting(&self) -> Option<usize> {
        (0..self.size).find(|&i| {
            matches!(
                self.slots[i].st,
                St::Starting {
                    awaited_by: None,
                    ..
                }
            )
        })
    }

    fn startable(&self) -> Option<usize> {
        (0..self.size).find(|&i| self.slots[i].st == St::Empty)
    }

    fn start_slot(&mut self, i: usize, awaited_by: Option<JobId>) {
        let now = self.now;
        let s = &mut self.slots[i];
        s.backoff_until = None;
        s.evicted = false;
        s.st = St::Starting {
            awaited_by,
            started: now,
        };
    }

    /// An eager startup fills running slots.
    fn kick_startup(&mut self) {
        if !self.startup.is_eager() {
            return;
        }
        #[derive(PartialEq)]
        enum Phase {
            Wanted,
            Resting,
            Starting,
            Up,
        }
        let phases: Vec<Phase> = self.slots[..self.size]
            .iter()
            .map(|s| match s.st {
                St::Empty if s.evicted || s.backoff_until.is_some() => Phase::Resting,
                St::Empty => Phase::Wanted,
                St::Starting { .. } => Phase::Starting,
                _ => Phase::Up,
            })
            .collect();
        let all_wanted = || -> Vec<usize> {
            (0..phases.len())
                .filter(|&i| phases[i] == Phase::Wanted)
                .collect()
        };
        let wanted: Vec<usize> = match self.startup {
            StartupKind::OnDemand => Vec::new(),
            StartupKind::Parallel => all_wanted(),
            StartupKind::OrderedReady => {
                if phases.contains(&Phase::Starting) {
                    Vec::new()
                } else {
                    all_wanted().into_iter().take(1).collect()
                }
            }
            StartupKind::LeaderFirst => {
                if self.ever_ready {
                    all_wanted()
                } else if phases.first() == Some(&Phase::Wanted) {
                    vec![0]
                } else {
                    Vec::new()
                }
            }
        };
        for i in wanted {
            self.start_slot(i, None);
        }
    }

    /// Hands the worker of slot `i` to the oldest waiting job.
    fn grant_oldest(&mut self, i: usize, started: u64) {
        let (id, bound) = self.waiters.remove(0);
        if let Some(b) = bound {
            if b != i {
                self.set_awaited(b, None);
            }
        }
        self.slots[i].st = St::Lent { job: id, started };
        self.job_mut(id).st = JobSt::Lent { slot: i };
    }

    /// Gives waiting jobs what the pool has (idle workers, unawaited
    /// starting ones, empty running slots), oldest job first.
    fn pump(&mut self) {
        while !self.waiters.is_empty() {
            if let Some(i) = self.lowest_idle() {
                let St::Idle { started, .. } = self.slots[i].st else {
                    unreachable!()
                };
                self.grant_oldest(i, started);
                continue;
            }
            let Some(id) = self
                .waiters
                .iter()
                .find(|(_, b)| b.is_none())
                .map(|(j, _)| *j)
            else {
                return;
            };
            if let Some(i) = self.unawaited_starting() {
                self.bind(id, Some(i));
                self.set_awaited(i, Some(id));
                continue;
            }
            if let Some(i) = self.startable() {
                self.bind(id, Some(i));
                self.start_slot(i, Some(id));
                continue;
            }
            return;
        }
    }

    fn after_empty(&mut self) {
        self.kick_startup();
        self.pump();
    }

    /// A ready worker is free in slot `i`: to the oldest job, or idle.
    fn place(&mut self, i: usize, started: u64) {
        if !self.waiters.is_empty() && self.running(i) {
            self.grant_oldest(i, started);
        } else {
            self.slots[i].st = St::Idle {
                since: self.now,
                started,
            };
        }
    }

    fn early(&self, started: u64) -> bool {
        self.now - started < EARLY_MS
    }

    /// Eager startups start the slot again after its back-off.
    fn schedule_refill(&mut self, i: usize) {
        if !self.startup.is_eager() {
            return;
        }
        let n = self.slots[i].early_exits;
        self.slots[i].backoff_until = None;
        if n == 0 {
            return;
        }
        let delay = (1u64 << (n.min(7) - 1)).min(60) * 1000;
        self.slots[i].backoff_until = Some(self.now + delay);
    }

    /// The pool ended the worker of slot `i` itself (retired, evicted): its
    /// exit was seen; a worker that ran ten minutes ends the back-off.
    fn ended_by_pool(&mut self, i: usize, started: u64) {
        self.slots[i].st = St::Empty;
        if !self.early(started) {
            self.slots[i].early_exits = 0;
        }
    }

    fn acquire(&mut self, kind: Kind) {
        let id = self.next_job;
        self.next_job += 1;
        self.jobs.insert(
            id,
            JobM {
                kind,
                st: JobSt::Waiting,
            },
        );
        if let Some(i) = self.lowest_idle() {
            let St::Idle { started, .. } = self.slots[i].st else {
                unreachable!()
            };
            self.slots[i].st = St::Lent { job: id, started };
            self.job_mut(id).st = JobSt::Lent { slot: i };
            return;
        }
        if let Some(i) = self.unawaited_starting() {
            self.waiters.push((id, Some(i)));
            self.set_awaited(i, Some(id));
            return;
        }
        if let Some(i) = self.startable() {
            self.waiters.push((id, Some(i)));
            self.start_slot(i, Some(id));
            return;
        }
        if self.unbound() >= self.max_waiting {
            self.job_mut(id).st = JobSt::Rejected;
            return;
        }
        self.waiters.push((id, None));
    }

    fn slot_of(&self, job: JobId) -> Option<usize> {
        match self.jobs.get(&job)?.st {
            JobSt::Lent { slot } => Some(slot),
            _ => None,
        }
    }

    /// A lease comes back: `retire` when the pool ends the worker (fail,
    /// abort).
    fn release(&mut self, job: JobId, fail: bool, restart: bool) {
        let i = self.slot_of(job).expect("a lent job");
        self.job_mut(job).st = JobSt::Over;
        match self.slots[i].st {
            St::Gone { .. } => {
                self.slots[i].st = St::Empty;
                self.after_empty();
            }
            St::Lent { started, .. } => {
                if fail {
                    self.ended_by_pool(i, started);
                    // `fail` is replaced at once whatever the startup; an
                    // abort by the eager startups' refill.
                    if restart && self.running(i) {
                        self.start_slot(i, None);
                    }
                    self.after_empty();
                } else if i >= self.capacity {
                    // Its slot was removed by a reconfiguration.
                    self.ended_by_pool(i, started);
                    self.after_empty();
                } else {
                    self.place(i, started);
                    self.pump();
                }
            }
            other => panic!("job {job} in slot {i} which is {other:?}"),
        }
    }

    fn cancel_wait(&mut self, job: JobId) {
        let at = self
            .waiters
            .iter()
            .position(|(j, _)| *j == job)
            .expect("a waiting job");
        let (_, bound) = self.waiters.remove(at);
        if let Some(b) = bound {
            self.set_awaited(b, None);
        }
        self.job_mut(job).st = JobSt::Over;
        self.pump();
    }

    fn fail_bound(&mut self, awaited_by: Option<JobId>, slot: usize) {
        if let Some(id) = awaited_by {
            if let Some(at) = self.waiters.iter().position(|(j, _)| *j == id) {
                self.waiters.remove(at);
                self.job_mut(id).st = JobSt::WarmupFailed { slot };
            }
        }
    }

    fn ready(&mut self, i: usize) {
        let St::Starting {
            awaited_by,
            started,
        } = self.slots[i].st
        else {
            panic!("ready in slot {i}: {:?}", self.slots[i].st)
        };
        self.ever_ready = true;
        if let Some(id) = awaited_by {
            self.bind(id, None);
        }
        self.place(i, started);
        self.kick_startup();
        self.pump();
    }

    fn warmup_fail(&mut self, i: usize) {
        let St::Starting { awaited_by, .. } = self.slots[i].st else {
            panic!("warm-up failure in slot {i}: {:?}", self.slots[i].st)
        };
        self.slots[i].st = St::Empty;
        self.fail_bound(awaited_by, i);
        self.slots[i].early_exits += 1;
        self.schedule_refill(i);
        self.after_empty();
    }

    fn crash(&mut self, i: usize) {
        match self.slots[i].st {
            St::Starting { awaited_by, .. } => {
                self.slots[i].st = St::Empty;
                self.fail_bound(awaited_by, i);
                self.slots[i].early_exits += 1;
                self.schedule_refill(i);
                self.after_empty();
            }
            St::Idle { started, .. } => {
                self.slots[i].st = St::Empty;
                self.count_exit(i, started);
                self.schedule_refill(i);
                self.after_empty();
            }
            St::Lent { job, started } => {
                self.count_exit(i, started);
                self.schedule_refill(i);
                match self.jobs[&job].kind {
                    Kind::Lend => self.slots[i].st = St::Gone { job },
                    Kind::Run => {
                        // The run ends with `Crashed` and gives the slot back.
                        self.job_mut(job).st = JobSt::Crashed;
                        self.slots[i].st = St::Empty;
                        self.after_empty();
                    }
                }
            }
            other => panic!("crash in slot {i}: {other:?}"),
        }
    }

    fn count_exit(&mut self, i: usize, started: u64) {
        if self.early(started) {
            self.slots[i].early_exits += 1;
        } else {
            self.slots[i].early_exits = 0;
        }
    }

    /// The distinct deadlines of the timers due by `now + d`.
    fn deadlines(&self, d: u64) -> Vec<u64> {
        let target = self.now + d;
        let mut ts: Vec<u64> = Vec::new();
        for (i, s) in self.slots.iter().enumerate() {
            if let Some(t) = s.backoff_until {
                ts.push(t);
            }
            if let (Some(after), St::Idle { since, .. }, true) =
                (self.evict_after, s.st, self.running(i))
            {
                ts.push(since + after);
            }
        }
        ts.retain(|&t| t <= target);
        ts.sort_unstable();
        ts.dedup();
        ts
    }

    /// Whether advancing by `d` would make two back-offs end at the same
    /// instant where the order of their refills decides which slot starts.
    fn ambiguous_advance(&self, d: u64) -> bool {
        if !matches!(
            self.startup,
            StartupKind::OrderedReady | StartupKind::LeaderFirst
        ) {
            return false;
        }
        let target = self.now + d;
        let mut ends: Vec<u64> = self
            .slots
            .iter()
            .filter_map(|s| s.backoff_until)
            .filter(|&t| t <= target)
            .collect();
        let n = ends.len();
        ends.sort_unstable();
        ends.dedup();
        ends.len() != n
    }

    fn advance(&mut self, d: u64) {
        let target = self.now + d;
        let stops = self.deadlines(d);
        for &t in &stops {
            self.now = t;
            // Evictions due now (floor 0: each is evicted).
            if let Some(after) = self.evict_after {
                for i in 0..self.size {
                    if let St::Idle { since, started } = self.slots[i].st {
                        if since + after == t {
                            self.ended_by_pool(i, started);
                            self.slots[i].evicted = true;
                            self.after_empty();
                        }
                    }
                }
            }
            // Back-offs that end now.
            for i in 0..self.slots.len() {
                if self.slots[i].backoff_until == Some(t) {
                    self.slots[i].backoff_until = None;
                    self.kick_startup();
                }
            }
        }
        self.now = target;
        self.stops = stops;
    }

    fn reconfigure(&mut self, n: usize) {
        let old_cap = self.capacity;
        if n < old_cap {
            self.capacity = n;
            self.size = n;
            for i in n..self.slots.len() {
                self.slots[i].backoff_until = None;
                match self.slots[i].st {
                    St::Idle { started, .. } => {
                        self.ended_by_pool(i, started);
                    }
                    St::Starting {
                        awaited_by,
                        started,
                    } => {
                        if let Some(id) = awaited_by {
                            self.bind(id, None);
                        }
                        self.ended_by_pool(i, started);
                    }
                    // Lent ones are retired when they come back.
                    St::Empty | St::Lent { .. } | St::Gone { .. } => {}
                }
            }
        } else if n > old_cap {
            while self.slots.len() < n {
                self.slots.push(SlotM::new());
            }
            self.capacity = n;
            let old_size = self.size;
            self.size = n;
            for i in old_size..n {
                if let St::Idle { started, .. } = self.slots[i].st {
                    self.place(i, started);
                }
            }
        }
        self.kick_startup();
        self.pump();
    }

    fn stats(&self) -> Stats {
        let mut s = Stats::default();
        for (i, slot) in self.slots.iter().enumerate() {
            match slot.st {
                St::Starting { .. } => s.starting += 1,
                St::Idle { .. } if self.running(i) => s.idle += 1,
                St::Idle { .. } => s.kept += 1,
                St::Lent { .. } => s.lent += 1,
                St::Empty if self.running(i) && slot.backoff_until.is_some() => {
                    s.backing_off += 1;
                }
                St::Empty | St::Gone { .. } => {}
            }
        }
        s.waiting = self.waiters.len();
        s.capacity = self.capacity;
        s.size = self.size;
        s
    }

    fn jobs_where(&self, f: impl Fn(&JobM, JobId) -> bool) -> Vec<JobId> {
        self.jobs
            .iter()
            .filter(|&(id, j)| f(j, *id))
            .map(|(id, _)| *id)
            .collect()
    }

    fn is_lent_lend(&self, id: JobId) -> bool {
        self.jobs
            .get(&id)
            .is_some_and(|j| j.kind == Kind::Lend && matches!(j.st, JobSt::Lent { .. }))
    }

    fn is_running_run(&self, id: JobId) -> bool {
        self.jobs
            .get(&id)
            .is_some_and(|j| j.kind == Kind::Run && matches!(j.st, JobSt::Lent { .. }))
    }

    fn is_waiting(&self, id: JobId) -> bool {
        self.jobs.get(&id).is_some_and(|j| j.st == JobSt::Waiting)
    }

    fn is_starting(&self, i: usize) -> bool {
        self.slots
            .get(i)
            .is_some_and(|s| matches!(s.st, St::Starting { .. }))
    }
}

struct PoolModel;

impl ReferenceStateMachine for PoolModel {
    type State = Model;
    type Transition = Op;

    fn init_state() -> BoxedStrategy<Model> {
        (
            prop_oneof![
                Just(StartupKind::OnDemand),
                Just(StartupKind::Parallel),
                Just(StartupKind::OrderedReady),
                Just(StartupKind::LeaderFirst),
            ],
            1usize..=4,
            0usize..=3,
            prop_oneof![Just(None), Just(Some(500u64)), Just(Some(2500u64))],
        )
            .prop_map(|(startup, capacity, max_waiting, evict_after)| {
                let mut m = Model {
                    startup,
                    evict_after,
                    max_waiting,
                    now: 0,
                    capacity,
                    size: capacity,
                    slots: (0..capacity).map(|_| SlotM::new()).collect(),
                    waiters: Vec::new(),
                    jobs: BTreeMap::new(),
                    next_job: 0,
                    ever_ready: false,
                    stops: Vec::new(),
                };
                m.kick_startup();
                m
            })
            .boxed()
    }

    fn transitions(m: &Model) -> BoxedStrategy<Op> {
        let mut choices: Vec<(u32, BoxedStrategy<Op>)> = vec![
            (6, Just(Op::Lend).boxed()),
            (4, Just(Op::Run).boxed()),
            (
                3,
                prop_oneof![
                    Just(1u64),
                    Just(250),
                    Just(999),
                    Just(1000),
                    Just(2000),
                    Just(4500),
                    Just(61_000),
                    Just(600_000),
                ]
                .prop_map(Op::Advance)
                .boxed(),
            ),
            (1, (1usize..=4).prop_map(Op::Reconfigure).boxed()),
        ];
        let lent_lend =
            m.jobs_where(|j, _| j.kind == Kind::Lend && matches!(j.st, JobSt::Lent { .. }));
        if !lent_lend.is_empty() {
            choices.push((
                4,
                proptest::sample::select(lent_lend.clone())
                    .prop_map(Op::Return)
                    .boxed(),
            ));
            choices.push((
                2,
                proptest::sample::select(lent_lend)
                    .prop_map(Op::Fail)
                    .boxed(),
            ));
        }
        let running_run =
            m.jobs_where(|j, _| j.kind == Kind::Run && matches!(j.st, JobSt::Lent { .. }));
        if !running_run.is_empty() {
            choices.push((
                4,
                proptest::sample::select(running_run.clone())
                    .prop_map(Op::Finish)
                    .boxed(),
            ));
            choices.push((
                2,
                proptest::sample::select(running_run)
                    .prop_map(Op::Abort)
                    .boxed(),
            ));
        }
        let waiting = m.jobs_where(|j, _| j.st == JobSt::Waiting);
        if !waiting.is_empty() {
            choices.push((
                2,
                proptest::sample::select(waiting)
                    .prop_map(Op::Abort)
                    .boxed(),
            ));
        }
        let starting: Vec<usize> = (0..m.slots.len()).filter(|&i| m.is_starting(i)).collect();
        if !starting.is_empty() {
            choices.push((
                6,
                proptest::sample::select(starting.clone())
                    .prop_map(Op::Ready)
                    .boxed(),
            ));
            choices.push((
                1,
                proptest::sample::select(starting)
                    .prop_map(Op::WarmupFail)
                    .boxed(),
            ));
        }
        let live: Vec<usize> = (0..m.slots.len())
            .filter(|&i| m.slots[i].has_live_worker())
            .collect();
        if !live.is_empty() {
            choices.push((
                2,
                proptest::sample::select(live).prop_map(Op::Crash).boxed(),
            ));
        }
        Union::new_weighted(choices).boxed()
    }

    fn preconditions(m: &Model, op: &Op) -> bool {
        match *op {
            Op::Lend | Op::Run => true,
            Op::Return(j) | Op::Fail(j) => m.is_lent_lend(j),
            Op::Finish(j) => m.is_running_run(j),
            Op::Abort(j) => m.is_waiting(j) || m.is_running_run(j),
            Op::Ready(i) | Op::WarmupFail(i) => m.is_starting(i),
            Op::Crash(i) => m.slots.get(i).is_some_and(SlotM::has_live_worker),
            Op::Advance(d) => !m.ambiguous_advance(d),
            Op::Reconfigure(n) => (1..=4).contains(&n),
        }
    }

    fn apply(mut m: Model, op: &Op) -> Model {
        m.stops.clear();
        match *op {
            Op::Lend => m.acquire(Kind::Lend),
            Op::Run => m.acquire(Kind::Run),
            Op::Return(j) => m.release(j, false, false),
            Op::Fail(j) => m.release(j, true, true),
            Op::Finish(j) => m.release(j, false, false),
            Op::Abort(j) => {
                if m.is_waiting(j) {
                    m.cancel_wait(j);
                } else {
                    // Dropped mid-job: the worker is killed; eager startups
                    // refill the slot through their startup, OnDemand leaves it.
                    m.release(j, true, false);
                }
            }
            Op::Ready(i) => m.ready(i),
            Op::WarmupFail(i) => m.warmup_fail(i),
            Op::Crash(i) => m.crash(i),
            Op::Advance(d) => m.advance(d),
            Op::Reconfigure(n) => m.reconfigure(n),
        }
        m
    }
}

// ---------------------------------------------------------------------------
// The system under test: a real pool of gated in-memory workers
// ---------------------------------------------------------------------------

/// An in-memory worker whose warm-up ends when the test opens its gate.
#[derive(Debug)]
struct Gated {
    id: usize,
    slot: usize,
    signal: ExitSignal,
    exited: Option<Exited>,
    gate: Option<oneshot::Receiver<bool>>,
}

impl Worker for Gated {
    async fn ready(&mut self) -> Result<(), BoxError> {
        match self.gate.take() {
            Some(gate) => match gate.await {
                Ok(true) => Ok(()),
                Ok(false) => Err("the model file is corrupt".into()),
                Err(_) => std::future::pending().await,
            },
            None => Ok(()),
        }
    }

    fn exited(&mut self) -> Exited {
        self.exited.take().unwrap_or_else(Exited::never)
    }

    fn killer(&self) -> Killer {
        self.signal.killer()
    }

    fn is_alive(&self) -> bool {
        !self.signal.has_exited()
    }

    async fn close(self) {
        self.signal.exit(ExitStatus::Closed);
    }
}

#[derive(Debug)]
struct Made {
    slot: usize,
    signal: ExitSignal,
    gate: Option<oneshot::Sender<bool>>,
}

/// Every worker the factory made, by id.
#[derive(Debug, Clone, Default)]
struct Farm(Arc<Mutex<Vec<Made>>>);

impl Farm {
    fn make(&self, slot: usize) -> Gated {
        let (signal, exited) = ExitSignal::new();
        let (tx, rx) = oneshot::channel();
        let mut made = self.0.lock().unwrap();
        let id = made.len();
        made.push(Made {
            slot,
            signal: signal.clone(),
            gate: Some(tx),
        });
        Gated {
            id,
            slot,
            signal,
            exited: Some(exited),
            gate: Some(rx),
        }
    }

    /// Ids of the live workers in `slot`.
    fn live_in(&self, slot: usize) -> Vec<usize> {
        let made = self.0.lock().unwrap();
        (0..made.len())
            .filter(|&id| made[id].slot == slot && !made[id].signal.has_exited())
            .collect()
    }

    fn alive(&self) -> usize {
        let made = self.0.lock().unwrap();
        made.iter().filter(|m| !m.signal.has_exited()).count()
    }

    fn open_gate(&self, slot: usize, ok: bool) {
        let mut made = self.0.lock().unwrap();
        let m = made
            .iter_mut()
            .rev()
            .find(|m| m.slot == slot && !m.signal.has_exited() && m.gate.is_some())
            .unwrap_or_else(|| panic!("no worker warms up in slot {slot}"));
        let _ = m.gate.take().expect("checked").send(ok);
    }

    fn crash(&self, slot: usize) {
        let made = self.0.lock().unwrap();
        let m = made
            .iter()
            .rev()
            .find(|m| m.slot == slot && !m.signal.has_exited())
            .unwrap_or_else(|| panic!("no live worker in slot {slot}"));
        m.signal.exit(ExitStatus::Code(1));
    }

    fn is_warming(&self, id: usize) -> bool {
        self.0.lock().unwrap()[id].gate.is_some()
    }
}

type Shared<T> = Arc<Mutex<Option<T>>>;

enum Job {
    Lend {
        task: JoinHandle<()>,
        got: Shared<Result<Lease<Gated>, Error>>,
    },
    Run {
        task: JoinHandle<()>,
        finish: Option<oneshot::Sender<()>>,
        /// `(slot, worker id)` once the job runs.
        running: Shared<(usize, usize)>,
        result: Shared<Result<usize, Error>>,
    },
}

struct Sut {
    rt: tokio::runtime::Runtime,
    pool: Pool<Gated>,
    farm: Farm,
    jobs: BTreeMap<JobId, Job>,
    /// Model time the real clock has been moved to.
    now: u64,
}

impl Sut {
    /// Lets every task that can run, run (the clock does not move).
    fn settle(&self) {
        self.rt.block_on(async {
            for _ in 0..200 {
                tokio::task::yield_now().await;
            }
        });
    }

    fn advance_to(&mut self, t: u64) {
        let d = Duration::from_millis(t - self.now);
        self.rt.block_on(tokio::time::advance(d));
        self.now = t;
        self.settle();
    }

    fn lease_of(&self, j: JobId) -> Option<Lease<Gated>> {
        match self.jobs.get(&j) {
            Some(Job::Lend { got, .. }) => match got.lock().unwrap().take() {
                Some(Ok(lease)) => Some(lease),
                other => panic!("job {j} holds no lease: {other:?}"),
            },
            _ => panic!("job {j} is not a lend job"),
        }
    }
}

struct PoolTest;

impl StateMachineTest for PoolTest {
    type SystemUnderTest = Sut;
    type Reference = PoolModel;

    fn init_test(m: &Model) -> Sut {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("runtime");
        let farm = Farm::default();
        let pool = {
            let _in_rt = rt.enter();
            let f = farm.clone();
            let b = Pool::builder(move |info: SlotInfo| {
                std::future::ready(Ok::<_, BoxError>(f.make(info.slot)))
            })
            .name("model")
            .sizing(Fixed(m.capacity))
            .max_waiting(m.max_waiting)
            // The reference model has no crash-loop breaker; its own tests
            // (breaker.rs) check it.
            .break_after_failed_starts(None)
            .job_grace(Duration::from_secs(1));
            let b = match m.evict_after {
                Some(ms) => b.eviction(IdleTimeout::new(Duration::from_millis(ms)).unwrap()),
                None => b.eviction(NoEviction),
            };
            match m.startup {
                StartupKind::OnDemand => b.startup(OnDemand),
                StartupKind::Parallel => b.startup(Parallel),
                StartupKind::OrderedReady => b.startup(OrderedReady),
                StartupKind::LeaderFirst => b.startup(LeaderFirst),
            }
            .build()
            .expect("pool")
        };
        let sut = Sut {
            rt,
            pool,
            farm,
            jobs: BTreeMap::new(),
            now: 0,
        };
        sut.settle();
        sut
    }

    fn apply(mut sut: Sut, m: &Model, op: Op) -> Sut {
        match op {
            Op::Lend => {
                let id = m.next_job - 1;
                let got: Shared<_> = Arc::default();
                let (pool, g) = (sut.pool.clone(), got.clone());
                let task = sut.rt.spawn(async move {
                    let r = pool.lend().await;
                    *g.lock().unwrap() = Some(r);
                });
                sut.jobs.insert(id, Job::Lend { task, got });
            }
            Op::Run => {
                let id = m.next_job - 1;
                let (finish, fin) = oneshot::channel::<()>();
                let running: Shared<_> = Arc::default();
                let result: Shared<_> = Arc::default();
                let (pool, r, res) = (sut.pool.clone(), running.clone(), result.clone());
                let task = sut.rt.spawn(async move {
                    let out = pool
                        .run(async move |w: &mut Gated| {
                            *r.lock().unwrap() = Some((w.slot, w.id));
                            let _ = fin.await;
                            w.id
                        })
                        .await;
                    *res.lock().unwrap() = Some(out);
                });
                sut.jobs.insert(
                    id,
                    Job::Run {
                        task,
                        finish: Some(finish),
                        running,
                        result,
                    },
                );
            }
            Op::Return(j) => drop(sut.lease_of(j)),
            Op::Fail(j) => sut.lease_of(j).expect("a lease").fail(),
            Op::Finish(j) => match sut.jobs.get_mut(&j) {
                Some(Job::Run { finish, .. }) => {
                    let _ = finish.take().expect("not finished yet").send(());
                }
                _ => panic!("job {j} is not a run job"),
            },
            Op::Abort(j) => match sut.jobs.get(&j) {
                Some(Job::Run { task, .. } | Job::Lend { task, .. }) => task.abort(),
                None => panic!("no job {j}"),
            },
            Op::Ready(i) => sut.farm.open_gate(i, true),
            Op::WarmupFail(i) => sut.farm.open_gate(i, false),
            Op::Crash(i) => sut.farm.crash(i),
            Op::Advance(_) => {
                for &t in &m.stops {
                    sut.advance_to(t);
                }
            }
            Op::Reconfigure(n) => {
                let _in_rt = sut.rt.enter();
                sut.pool
                    .reconfigure(Reconfig::new().sizing(Fixed(n)))
                    .expect("reconfigure");
            }
        }
        if let Op::Advance(_) = op {
            sut.advance_to(m.now);
        }
        sut.settle();
        sut
    }

    fn check_invariants(sut: &Sut, m: &Model) {
        // Every count of the snapshot.
        let stats = sut.pool.stats();
        assert_eq!(stats, m.stats(), "stats (model: {m:#?})");

        // Each slot holds what the model says, and at most one live worker.
        let mut lent_workers = Vec::new();
        for (i, s) in m.slots.iter().enumerate() {
            let live = sut.farm.live_in(i);
            let want = usize::from(s.has_live_worker());
            assert_eq!(
                live.len(),
                want,
                "live workers in slot {i}: {live:?}, model {s:?}"
            );
            if let St::Starting { .. } = s.st {
                assert!(sut.farm.is_warming(live[0]), "slot {i} warms up");
            }
        }
        assert_eq!(
            sut.farm.alive(),
            m.slots.iter().filter(|s| s.has_live_worker()).count(),
            "live workers"
        );

        // Each job is where the model says.
        for (&id, job) in &m.jobs {
            match (sut.jobs.get(&id), job.st) {
                (Some(Job::Lend { got, task }), st) => {
                    let got = got.lock().unwrap();
                    match (st, got.as_ref()) {
                        (JobSt::Waiting, None) => assert!(!task.is_finished(), "job {id} waits"),
                        (JobSt::Lent { slot }, Some(Ok(lease))) => {
                            assert_eq!(lease.slot(), slot, "job {id}'s slot");
                            let worker = lease.id;
                            if let St::Lent { .. } = m.slots[slot].st {
                                assert_eq!(
                                    sut.farm.live_in(slot),
                                    vec![worker],
                                    "job {id}'s worker"
                                );
                            }
                            lent_workers.push(worker);
                        }
                        (JobSt::Rejected, Some(Err(Error::Rejected { reason }))) => {
                            assert_eq!(*reason, RejectReason::QueueFull);
                        }
                        (
                            JobSt::WarmupFailed { slot },
                            Some(Err(Error::WarmupFailed { slot: s, .. })),
                        ) => {
                            assert_eq!(*s, slot, "job {id} failed on the warm-up of its slot");
                        }
                        (JobSt::Over, _) => {}
                        (st, got) => panic!("job {id}: model {st:?}, pool {got:?}"),
                    }
                }
                (
                    Some(Job::Run {
                        running, result, ..
                    }),
                    st,
                ) => {
                    let running = *running.lock().unwrap();
                    let result = result.lock().unwrap();
                    match (st, running, result.as_ref()) {
                        (JobSt::Waiting, None, None) => {}
                        (JobSt::Lent { slot }, Some((s, worker)), None) => {
                            assert_eq!(s, slot, "job {id}'s slot");
                            assert_eq!(sut.farm.live_in(slot), vec![worker], "job {id}'s worker");
                            lent_workers.push(worker);
                        }
                        (JobSt::Rejected, None, Some(Err(Error::Rejected { reason }))) => {
                            assert_eq!(*reason, RejectReason::QueueFull);
                        }
                        (
                            JobSt::WarmupFailed { slot },
                            None,
                            Some(Err(Error::WarmupFailed { slot: s, .. })),
                        ) => {
                            assert_eq!(*s, slot);
                        }
                        (JobSt::Crashed, Some(_), Some(Err(Error::Crashed { .. }))) => {}
                        (JobSt::Over, _, _) => {}
                        (st, running, result) => {
                            panic!(
                                "run job {id}: model {st:?}, pool running {running:?} result {result:?}"
                            )
                        }
                    }
                }
                (None, st) => panic!("job {id} unknown to the test ({st:?})"),
            }
        }
        // No worker is lent twice.
        let n = lent_workers.len();
        lent_workers.sort_unstable();
        lent_workers.dedup();
        assert_eq!(lent_workers.len(), n, "a worker lent to two jobs");
    }

    fn teardown(mut sut: Sut, _m: Model) {
        for (_, job) in std::mem::take(&mut sut.jobs) {
            match job {
                Job::Lend { task, got } => {
                    task.abort();
                    drop(got.lock().unwrap().take());
                }
                Job::Run { task, .. } => task.abort(),
            }
        }
        sut.settle();
        let pool = sut.pool.clone();
        // On the paused clock, the close grace passes at once.
        sut.rt.block_on(async move {
            tokio::time::timeout(Duration::from_secs(60), pool.close())
                .await
                .expect("close ends");
        });
        sut.settle();
        assert_eq!(sut.farm.alive(), 0, "a worker outlived close()");
        let s = sut.pool.stats();
        assert_eq!(
            (s.starting, s.idle, s.lent, s.waiting, s.kept),
            (0, 0, 0, 0, 0),
            "stats after close: {s:?}"
        );
    }
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(256)
}

prop_state_machine! {
    #![proptest_config(Config {
        cases: cases(),
        max_shrink_iters: 4096,
        .. Config::default()
    })]

    #[test]
    fn the_pool_follows_the_reference_model(sequential 1..60 => PoolTest);
}
