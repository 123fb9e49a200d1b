//! The worker processes of a soak pool: its factory, which notes every
//! process it starts, the count of those alive, and what is left running.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kennel::{Pool, PoolBuilder, SlotInfo};
use kennel_process::{Coprocess, CoprocessSpec, ProcessError};

use crate::MAX_LINE;
use crate::common::{FIXTURE, is_running_since, live_processes, start_time};

/// One process the factory started.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Proc {
    pub(crate) pid: u32,
    pub(crate) started: u64,
    pub(crate) slot: usize,
    pub(crate) at: Instant,
}

/// Every worker process a pool's factory started.
#[derive(Debug, Clone, Default)]
pub(crate) struct Spawned(Arc<Mutex<Vec<Proc>>>);

impl Spawned {
    pub(crate) fn all(&self) -> Vec<Proc> {
        self.0.lock().unwrap().clone()
    }
}

/// A pool of fixture workers started with `flags`, each with a seed of its
/// own drawn from `seed`.
pub(crate) fn pool_of(
    name: &str,
    flags: &[String],
    seed: u64,
    spawned: &Spawned,
) -> PoolBuilder<Coprocess> {
    let flags: Vec<String> = flags.to_vec();
    let spawned = spawned.clone();
    let made = Arc::new(AtomicU64::new(0));
    Pool::builder(move |info: SlotInfo| {
        let n = made.fetch_add(1, Ordering::Relaxed);
        let worker_seed = seed.wrapping_mul(1_000_003).wrapping_add(n).to_string();
        let argv = std::iter::once(FIXTURE.to_owned())
            .chain(flags.iter().cloned())
            .chain(["--seed".to_owned(), worker_seed]);
        let spec = CoprocessSpec::new(argv)
            .max_line_bytes(MAX_LINE)
            .close_grace(Duration::from_millis(300))
            .label(&*info.pool, info.slot);
        let spawned = spawned.clone();
        async move {
            let worker = spec.spawn()?;
            let pid = worker.pid();
            // The child is ours and not reaped yet, so its /proc entry is there.
            let started = start_time(pid).unwrap_or(0);
            spawned.0.lock().unwrap().push(Proc {
                pid,
                started,
                slot: info.slot,
                at: Instant::now(),
            });
            Ok::<_, ProcessError>(worker)
        }
    })
    .name(name)
}

/// The pool's worker processes that may still run, in the order they were
/// started; those seen ended are dropped (an ended process stays ended).
#[derive(Debug, Default)]
pub(crate) struct Alive {
    seen: usize,
    maybe: Vec<Proc>,
}

impl Alive {
    /// Counts the live worker processes, newest first, so that every process
    /// counted alive was alive at the same moment (an older process seen
    /// alive later was alive earlier too).
    pub(crate) fn count(&mut self, spawned: &Spawned) -> usize {
        let all = spawned.all();
        self.maybe.extend_from_slice(&all[self.seen..]);
        self.seen = all.len();
        let mut alive = vec![false; self.maybe.len()];
        for (i, p) in self.maybe.iter().enumerate().rev() {
            alive[i] = is_running_since(p.pid, p.started);
        }
        let mut i = 0;
        self.maybe.retain(|_| {
            i += 1;
            alive[i - 1]
        });
        self.maybe.len()
    }
}

/// What is left running of `procs`: a worker itself (same pid and start
/// time), or a member of its process group. Pids are reused (the kernel
/// hands out at most 32768 here), so a group whose leader is now another
/// process counts only members older than that leader.
pub(crate) fn leftovers(procs: &[Proc]) -> Vec<String> {
    let mut ours: std::collections::HashMap<u32, Vec<u64>> = std::collections::HashMap::new();
    for p in procs {
        ours.entry(p.pid).or_default().push(p.started);
    }
    let mut left = Vec::new();
    for (pid, pgrp) in live_processes() {
        let Some(starts) = ours.get(&pgrp) else {
            continue;
        };
        let Some(started) = start_time(pid) else {
            continue; // ended meanwhile
        };
        let leak = if pid == pgrp {
            starts.contains(&started)
        } else {
            match start_time(pgrp) {
                None => true,
                Some(leader) => starts.contains(&leader) || started < leader,
            }
        };
        if leak {
            left.push(format!("process {pid} of worker group {pgrp}"));
        }
    }
    left
}
