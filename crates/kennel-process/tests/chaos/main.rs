//! The chaos soak: thousands of jobs through pools of real worker processes
//! that misbehave at random, under each startup, with an idle-timeout eviction
//! and, in half the scenarios, the learning sizing `HillClimbing`.
//!
//! Faults, drawn from seeded generators:
//!
//! - by the worker (its own seed, in its argv): exit during the warm-up, an
//!   error line instead of the ready line, a warm-up that hangs past the
//!   pool's `warmup_timeout`, noise before the ready line, exit while idle;
//! - by the job (the test's seed): a crash mid-job, a line that is not JSON,
//!   invalid UTF-8, a partial line then exit, a reply over the size limit,
//!   an error reply, a job that overruns the `job_timeout` or hangs, a job
//!   the client abandons half-way (the future is dropped), a grandchild
//!   process left in the worker's group.
//!
//! What must hold:
//!
//! 1. Every job resolves, within a bound, with its result or a typed error
//!    that fits the fault it was given (or a collateral one: the worker
//!    started for it failed its warm-up, the queue was full, or the worker
//!    it got had just exited while idle).
//! 2. At every sampled moment the stats add up (each slot is counted once,
//!    so `starting + idle + lent + kept ≤ capacity`, …), and no more worker
//!    processes are alive than the capacity (checked by pid and start time
//!    in `/proc`).
//! 3. Back-off: per slot, the `worker:backoff` events count early exits one
//!    by one with delays 1, 2, 4 … 60 s; and in a crash loop with no jobs,
//!    each start of a slot comes at least that long after the one before.
//! 4. After `close()` every stat is zero and no process is left: no worker
//!    (by pid), no member of its process group, no grandchild, no
//!    descendant of the test process.
//! 5. No panic anywhere (a panic hook counts them, also in spawned tasks).
//!
//! The CI mode runs a few thousand jobs in about a minute. `KENNEL_SOAK=long`
//! runs twenty times as many; `KENNEL_SOAK_SEED=N` picks another seed (the
//! seed in use is printed). Real processes need real time: every wait here is
//! bounded.

#![cfg(target_os = "linux")]

#[path = "../common/mod.rs"]
mod common;

mod crash_loop;
mod faults;
mod processes;
mod scenario;
mod soak;

use std::time::Duration;

use kennel::{LeaderFirst, OnDemand, OrderedReady, Parallel, PoolBuilder};
use kennel_process::Coprocess;

const JOB_TIMEOUT: Duration = Duration::from_millis(1000);
const WARMUP_TIMEOUT: Duration = Duration::from_millis(500);
const MAX_LINE: usize = 4096;
/// A job that has not resolved after this long is lost.
const JOB_DEADLINE: Duration = Duration::from_secs(30);
/// `close()` must be done within this.
const CLOSE_DEADLINE: Duration = Duration::from_secs(30);

/// The back-off after `n` early exits in a row: 1, 2, 4 … 60 s.
fn backoff(n: u32) -> Duration {
    Duration::from_secs(1u64 << (n.clamp(1, 7) - 1)).min(Duration::from_secs(60))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Startup {
    OnDemand,
    Parallel,
    OrderedReady,
    LeaderFirst,
}

impl Startup {
    const ALL: [Self; 4] = [
        Self::OnDemand,
        Self::Parallel,
        Self::OrderedReady,
        Self::LeaderFirst,
    ];

    fn apply(self, b: PoolBuilder<Coprocess>) -> PoolBuilder<Coprocess> {
        match self {
            Self::OnDemand => b.startup(OnDemand),
            Self::Parallel => b.startup(Parallel),
            Self::OrderedReady => b.startup(OrderedReady),
            Self::LeaderFirst => b.startup(LeaderFirst),
        }
    }

    fn is_eager(self) -> bool {
        self != Self::OnDemand
    }
}
