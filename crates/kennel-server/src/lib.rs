//! The kennel service: named pools of worker processes behind HTTP, read
//! from a TOML file. The `kennel` binary is built on this
//! library; tests and users call [`app`] to get the router that
//! `kennel serve` answers with.
//!
//! - [`config`]: the TOML configuration (`[server]`, `[[pool]]`), with
//!   humane durations and sizes and errors that name the key.
//! - [`app`]: the axum router over an [`AppState`].
//! - [`ApiError`]: every error answer, as a status code and a JSON body
//!   `{ "error": kind, "message": … }`.
//! - [`embed`]: lend from a pool inside your own axum router.
//! - [`demo`]: the built-in demo worker (`kennel worker demo`).
//! - [`queue`]: pools fed by a NATS JetStream work queue (`[pool.queue]`).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use kennel_server::{AppState, Config, app, metrics};
//!
//! let config = Config::load("kennel.toml".as_ref())?;
//! let state = AppState::builder().metrics(metrics::install()).build();
//! state.start_pools(&config, &std::env::current_exe()?).await?;
//! let listener = tokio::net::TcpListener::bind(config.listen()).await?;
//! kennel_server::http::serve(listener, app(state.clone()), Default::default(), std::future::pending()).await?;
//! state.close().await;
//! # Ok(()) }
//! ```

pub mod config;
pub mod demo;
pub mod embed;
pub mod events;
pub mod http;
pub mod logs;
pub mod metrics;
pub mod ops;
pub mod pools;
pub mod queue;
pub mod reaper;
pub mod reload;
pub mod rundir;
pub mod sse;
pub mod stream;
pub mod watch;

mod app;
mod check;
mod cli;
mod command;
mod error;
mod jobs;
pub mod payload;
mod progress;
mod run;
mod segment;
mod serve;
mod signals;
mod state;
mod status;

pub use crate::app::app;
pub use crate::command::main;
pub use crate::config::{Config, ConfigError, PoolConfig, ServerConfig};
pub use crate::error::{ApiError, MAX_RETRY_AFTER_SECS, RETRY_AFTER_SECS, with_last_words};
pub use crate::state::{AppState, AppStateBuilder, Group, Listed, Pools, StartError};
