//! kennel lends long-lived, costly-to-start workers to jobs, one job per
//! worker at a time: child processes that load a model, command-line agents
//! that keep a session, threads that hold state.
//!
//! The pool starts workers ([`Startup`]), lends them ([`Pool::run`],
//! [`Pool::lend`]), replaces the ones that exit (with a back-off), lets idle
//! ones go ([`Eviction`]), runs as many as pay ([`Sizing`]), enforces limits
//! (queue, timeouts), reports [`Stats`] and [`Event`]s, and stops every worker
//! when closed.
//!
//! Every wait and measurement uses tokio's clock, so tests run under
//! `#[tokio::test(start_paused = true)]`.
//!
//! # Example
//!
//! A worker that is costly to make (here it sums a table once) is made
//! once per slot and then lent to one job at a time:
//!
//! ```
//! use std::time::Duration;
//! use kennel::{Fixed, IdleTimeout, Parallel, Pool, Worker};
//!
//! struct Model { weights: Vec<u64> }
//!
//! impl Worker for Model {} // no method needed: it lives in this process
//!
//! impl Model {
//!     async fn load() -> Result<Self, kennel::BoxError> {
//!         Ok(Self { weights: (1..=1_000).collect() }) // the costly part
//!     }
//!     fn infer(&self, x: u64) -> u64 { self.weights.iter().map(|w| w * x).sum() }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let pool = Pool::builder(|_slot| Model::load())
//!     .name("model")
//!     .startup(Parallel)
//!     .sizing(Fixed(2))
//!     .eviction(IdleTimeout::new(Duration::from_secs(300))?.keep(1))
//!     .with_options(|o| o.job_timeout = Some(Duration::from_secs(30)))
//!     .build()?;
//!
//! let y = pool.run(async |m: &mut Model| m.infer(2)).await?;
//! assert_eq!(y, 1_001_000);
//!
//! // A job that returns a `Result`: one `?` for the pool's error and its own.
//! let n: u64 = pool.try_run(async |m: &mut Model| "7".parse::<u64>().map(|x| m.infer(x))).await?;
//! assert_eq!(n, 3_503_500);
//!
//! pool.close().await; // every worker ends
//! # Ok(()) }
//! ```

mod backoff;
mod builder;
mod cancel;
mod computer;
mod deadline;
mod dispatch;
mod engine;
mod error;
mod event;
mod eviction;
mod exit;
mod gpu;
mod heartbeat;
mod key;
mod lease;
mod metric_families;
mod metrics;
mod options;
mod pool;
mod reconfig;
mod registry;
mod run;
#[cfg(feature = "serde")]
mod size_serde;
mod sizing;
mod slot;
mod startup;
mod stats;
mod status;
mod tenant;
mod threads;
mod timer;
mod worker;

pub use crate::builder::PoolBuilder;
pub use crate::cancel::CancelOutcome;
pub use crate::computer::{Computer, Gpu, GpuError, GpuProcess, SystemComputer, TestComputer};
pub use crate::dispatch::Dispatch;
pub use crate::error::{BuildError, Error, RejectReason};
pub use crate::event::{Event, RetireReason};
pub use crate::eviction::{
    EvictAfter, Eviction, IdleTimeout, IdleWorker, MAX_IDLE_TIMEOUT, NoEviction,
};
pub use crate::exit::ExitSignal;
pub use crate::gpu::{GpuPlace, GpuUse, GpusPerWorker};
pub use crate::heartbeat::Heartbeat;
pub use crate::key::{Key, KeyBinding, KeyError, MAX_KEY_LEN};
pub use crate::lease::Lease;
pub use crate::metric_families::{METRIC_FAMILIES, MetricFamily, MetricKind, describe_metrics};
pub use crate::options::{
    MAX_DURATION, MAX_KEYS_PER_WORKER, MAX_RETRIES, MAX_SURGE, MAX_WAITING, MIN_LIFETIME,
    MIN_MEMORY_CHECK_EVERY, MIN_PROBE_EVERY, MIN_TIMER, Options,
};
pub use crate::pool::Pool;
pub use crate::reconfig::{Action, Reconfig};
pub use crate::registry::{Group, PoolEntry, Registry};
pub use crate::run::{JobError, RunOptions};
pub use crate::sizing::{
    Fixed, Gradient, HillClimbing, Resources, SizePlan, Sizing, SizingDecision, SizingInput,
    SizingStep, SizingTrial, SizingView, Verdict,
};
pub use crate::startup::{
    LeaderFirst, OnDemand, OrderedReady, Parallel, SlotPhase, Starts, Startup,
};
pub use crate::stats::Stats;
pub use crate::status::{RetireDue, WorkerRow, WorkerState};
pub use crate::tenant::{
    MAX_TENANT_LEN, MAX_WEIGHT, Priority, Tenant, TenantError, TenantLoad, TenantShare,
};
pub use crate::threads::{MEASURE_FOR, ThreadSample, ThreadUse, WORKING_SHARE};
pub use crate::worker::{BoxError, Exit, ExitStatus, Exited, Killer, Meter, SlotInfo, Worker};
