//! The reference model's events (lend, return, abort, warm-ups, exits,
//! clock advances, reconfigurations), its `stats()` and its queries.

use kennel::Stats;

use crate::reference::{JobId, JobM, JobSt, Kind, Model, SlotM, St, StartupKind};

impl Model {
    pub(crate) fn acquire(&mut self, kind: Kind) {
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
    pub(crate) fn release(&mut self, job: JobId, fail: bool, restart: bool) {
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

    pub(crate) fn cancel_wait(&mut self, job: JobId) {
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

    pub(crate) fn ready(&mut self, i: usize) {
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

    pub(crate) fn warmup_fail(&mut self, i: usize) {
        let St::Starting { awaited_by, .. } = self.slots[i].st else {
            panic!("warm-up failure in slot {i}: {:?}", self.slots[i].st)
        };
        self.slots[i].st = St::Empty;
        self.fail_bound(awaited_by, i);
        self.slots[i].early_exits += 1;
        self.schedule_refill(i);
        self.after_empty();
    }

    pub(crate) fn crash(&mut self, i: usize) {
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
    pub(crate) fn ambiguous_advance(&self, d: u64) -> bool {
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

    pub(crate) fn advance(&mut self, d: u64) {
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

    pub(crate) fn reconfigure(&mut self, n: usize) {
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

    pub(crate) fn stats(&self) -> Stats {
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

    pub(crate) fn jobs_where(&self, f: impl Fn(&JobM, JobId) -> bool) -> Vec<JobId> {
        self.jobs
            .iter()
            .filter(|&(id, j)| f(j, *id))
            .map(|(id, _)| *id)
            .collect()
    }

    pub(crate) fn is_lent_lend(&self, id: JobId) -> bool {
        self.jobs
            .get(&id)
            .is_some_and(|j| j.kind == Kind::Lend && matches!(j.st, JobSt::Lent { .. }))
    }

    pub(crate) fn is_running_run(&self, id: JobId) -> bool {
        self.jobs
            .get(&id)
            .is_some_and(|j| j.kind == Kind::Run && matches!(j.st, JobSt::Lent { .. }))
    }

    pub(crate) fn is_waiting(&self, id: JobId) -> bool {
        self.jobs.get(&id).is_some_and(|j| j.st == JobSt::Waiting)
    }

    pub(crate) fn is_starting(&self, i: usize) -> bool {
        self.slots
            .get(i)
            .is_some_and(|s| matches!(s.st, St::Starting { .. }))
    }
}
