//! The reference model's bookkeeping of slots: which slot a job gets, the
//! eager startups, the queue pump, where a ready worker goes, back-offs.

use crate::reference::{EARLY_MS, JobId, JobM, JobSt, Model, St, StartupKind};

impl Model {
    pub(crate) fn running(&self, i: usize) -> bool {
        i < self.size
    }

    pub(crate) fn job_mut(&mut self, id: JobId) -> &mut JobM {
        self.jobs.get_mut(&id).expect("a job the model knows")
    }

    pub(crate) fn unbound(&self) -> usize {
        self.waiters.iter().filter(|(_, b)| b.is_none()).count()
    }

    pub(crate) fn set_awaited(&mut self, slot: usize, by: Option<JobId>) {
        if let St::Starting { awaited_by, .. } = &mut self.slots[slot].st {
            *awaited_by = by;
        }
    }

    pub(crate) fn bind(&mut self, id: JobId, slot: Option<usize>) {
        if let Some(w) = self.waiters.iter_mut().find(|(j, _)| *j == id) {
            w.1 = slot;
        }
    }

    pub(crate) fn lowest_idle(&self) -> Option<usize> {
        (0..self.size).find(|&i| matches!(self.slots[i].st, St::Idle { .. }))
    }

    pub(crate) fn unawaited_starting(&self) -> Option<usize> {
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

    pub(crate) fn startable(&self) -> Option<usize> {
        (0..self.size).find(|&i| self.slots[i].st == St::Empty)
    }

    pub(crate) fn start_slot(&mut self, i: usize, awaited_by: Option<JobId>) {
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
    pub(crate) fn kick_startup(&mut self) {
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
    pub(crate) fn pump(&mut self) {
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

    pub(crate) fn after_empty(&mut self) {
        self.kick_startup();
        self.pump();
    }

    /// A ready worker is free in slot `i`: to the oldest job, or idle.
    pub(crate) fn place(&mut self, i: usize, started: u64) {
        if !self.waiters.is_empty() && self.running(i) {
            self.grant_oldest(i, started);
        } else {
            self.slots[i].st = St::Idle {
                since: self.now,
                started,
            };
        }
    }

    pub(crate) fn early(&self, started: u64) -> bool {
        self.now - started < EARLY_MS
    }

    /// Eager startups start the slot again after its back-off (none for a
    /// slot above the capacity).
    pub(crate) fn schedule_refill(&mut self, i: usize) {
        if !self.startup.is_eager() {
            return;
        }
        let n = self.slots[i].early_exits;
        self.slots[i].backoff_until = None;
        // A slot above the capacity is never refilled.
        if n == 0 || i >= self.capacity {
            return;
        }
        let delay = (1u64 << (n.min(7) - 1)).min(60) * 1000;
        self.slots[i].backoff_until = Some(self.now + delay);
    }

    /// The pool ended the worker of slot `i` itself (retired, evicted): its
    /// exit was seen; a worker that ran ten minutes ends the back-off.
    pub(crate) fn ended_by_pool(&mut self, i: usize, started: u64) {
        self.slots[i].st = St::Empty;
        if !self.early(started) {
            self.slots[i].early_exits = 0;
        }
    }
}
