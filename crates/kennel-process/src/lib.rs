//! Workers for [`kennel`]: a child process that speaks JSON lines
//! ([`Coprocess`], SPEC S10) and a dedicated OS thread that holds state
//! ([`ThreadWorker`], SPEC S11). Both implement [`kennel::Worker`], so a pool
//! can lend them; both can also be used on their own.
//!
//! # A child process
//!
//! A [`CoprocessSpec`] says how to start the program (an argv, never a
//! shell; environment; working directory; limits). [`CoprocessSpec::spawn`]
//! starts it in a process group of its own; [`Coprocess::request`] and
//! [`Coprocess::call`] send one request and read one reply. The protocol,
//! for the authors of worker programs, is in `docs/PROTOCOL.md`.
//!
//! ```no_run
//! use kennel_process::CoprocessSpec;
//! use serde_json::json;
//!
//! # async fn demo() -> Result<(), kennel_process::ProcessError> {
//! let mut worker = CoprocessSpec::new(["python3", "examples/workers/echo.py"]).spawn()?;
//! worker.ready().await?;
//! assert_eq!(worker.request(&json!([1, 2, 3])).await?, json!([1, 2, 3]));
//! worker.close().await;
//! # Ok(()) }
//! ```
//!
//! # In a pool
//!
//! A pool's factory gets a [`kennel::SlotInfo`]; label the worker with it so
//! that its stderr lines carry the pool and slot:
//!
//! ```no_run
//! use kennel::{Fixed, Parallel, Pool, SlotInfo};
//! use kennel_process::{Coprocess, CoprocessSpec};
//! use serde_json::json;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let spec = CoprocessSpec::new(["python3", "examples/workers/echo.py"]);
//! let pool = Pool::builder(move |info: SlotInfo| {
//!     let spec = spec.clone().label(&*info.pool, info.slot);
//!     async move { spec.spawn() }
//! })
//! .name("echo")
//! .startup(Parallel)
//! .sizing(Fixed(2))
//! .build()?;
//!
//! // The outer `?` is the pool's error (timeout, crash, closed), the inner
//! // one the worker's (an error reply, bad output).
//! let reply = pool
//!     .run(async |w: &mut Coprocess| w.request(&json!({"hello": "world"})).await)
//!     .await??;
//! pool.close().await;
//! # Ok(()) }
//! ```
//!
//! A job that is dropped or runs past the pool's `job_timeout` kills its
//! worker's whole process group; a worker whose output broke the protocol
//! kills itself; either way the pool starts a new one.
//!
//! # A thread
//!
//! [`ThreadWorker::spawn`] starts an OS thread that builds its state, then
//! [`ThreadWorker::run`] sends it jobs. CPU-bound work stays off the async
//! runtime. A thread cannot be killed: see [`ThreadWorker`] for what a kill
//! does instead.
//!
//! # Platform
//!
//! [`Coprocess`] uses Unix process groups and signals; this crate builds on
//! Unix only.

#![cfg(unix)]

mod coprocess;
mod error;
mod group;
mod lines;
mod spec;
mod thread;

pub use crate::coprocess::Coprocess;
pub use crate::error::{ProcessError, ThreadError};
pub use crate::spec::{CoprocessSpec, DEFAULT_CLOSE_GRACE, DEFAULT_MAX_LINE_BYTES, ReadyMode};
pub use crate::thread::ThreadWorker;
