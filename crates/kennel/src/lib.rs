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

mod backoff;
mod builder;
mod computer;
mod dispatch;
mod error;
mod event;
mod eviction;
mod exit;
mod lease;
mod metrics;
mod pool;
mod reconfig;
mod registry;
mod shared;
mod sizing;
mod slot;
mod startup;
mod stats;
mod worker;

pub use crate::builder::PoolBuilder;
pub use crate::computer::{Computer, SystemComputer, TestComputer};
pub use crate::dispatch::Dispatch;
pub use crate::error::{BuildError, Error, RejectReason};
pub use crate::event::{Event, RetireReason};
pub use crate::eviction::{
    EvictAfter, Eviction, IdleTimeout, IdleWorker, MAX_IDLE_TIMEOUT, NoEviction,
};
pub use crate::exit::ExitSignal;
pub use crate::lease::Lease;
pub use crate::pool::{Pool, RunOptions};
pub use crate::reconfig::{Action, Reconfig};
pub use crate::registry::{Group, PoolEntry, Registry};
pub use crate::shared::SlotInfo;
pub use crate::sizing::{
    Fixed, Gradient, HillClimbing, Resources, SizePlan, Sizing, SizingDecision, SizingInput,
    SizingStep, SizingView, Verdict,
};
pub use crate::startup::{
    LeaderFirst, OnDemand, OrderedReady, Parallel, SlotPhase, Starts, Startup,
};
pub use crate::stats::Stats;
pub use crate::worker::{BoxError, Exit, ExitStatus, Exited, Killer, Worker};
