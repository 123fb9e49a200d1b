//! Workers for [kennel](kennel): a child process that speaks JSON lines
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
