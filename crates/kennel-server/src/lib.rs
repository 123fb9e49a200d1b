//! The kennel service: named pools of worker processes behind HTTP, read
//! from a TOML file. The `kennel` binary is [`main`]; what embedding needs
//! is public, the rest stays inside:
//!
//! - [`Config`]: the TOML configuration (`[server]`, `[[pool]]`, see
//!   `docs/CONFIG.md`), read with [`Config::load`] or [`Config::parse`];
//!   a refusal is a [`ConfigError`] that names the key.
//! - [`AppState`] (built by [`AppStateBuilder`]): the pools, one record
//!   each, started from a config by [`AppState::start_pools`] (or added by
//!   hand with [`AppState::add_pool`]).
//! - [`app`]: the axum router over an [`AppState`]; [`serve`] answers with
//!   it under the connection timeouts and budget of [`ConnOptions`].
//! - [`ApiError`]: every error answer, as a status code and a JSON body
//!   `{ "error": kind, "message": … }`.
//! - [`WorkerPool`] and [`PoolHandle`]: lend from a pool inside your own
//!   axum router.
//! - [`install_metrics`]: the Prometheus recorder `/metrics` renders.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use kennel_server::{AppState, Config, ConnOptions, app, install_metrics, serve};
//!
//! let config = Config::load("kennel.toml".as_ref())?;
//! let state = AppState::builder().metrics(install_metrics()).build();
//! state.start_pools(&config, &std::env::current_exe()?).await?;
//! let listener = tokio::net::TcpListener::bind(config.listen()).await?;
//! serve(listener, app(state.clone()), ConnOptions::default(), std::future::pending()).await?;
//! state.close().await;
//! # Ok(()) }
//! ```

mod config;
mod demo;
mod embed;
mod events;
mod http;
mod logs;
mod mcp;
mod metrics;
mod ops;
mod pools;
mod queue;
mod reaper;
mod reload;
mod rundir;
mod sse;
mod stream;
mod watch;

mod app;
mod async_jobs;
mod check;
mod cli;
mod command;
mod error;
mod job_key;
mod jobs;
mod payload;
mod progress;
mod remote;
mod run;
mod run_remote;
mod segment;
mod serve;
mod signals;
mod state;
mod status;
mod tenants;

pub use crate::app::app;
pub use crate::command::main;
pub use crate::config::{Config, ConfigError, Source};
pub use crate::embed::{PoolHandle, WorkerPool};
pub use crate::error::ApiError;
pub use crate::http::{ConnOptions, HostPolicy, serve};
pub use crate::metrics::install as install_metrics;
pub use crate::state::{AppState, AppStateBuilder, StartError};

/// Locks `mutex`, taking its value as it is when a holder panicked: every
/// lock of the service guards data that a panic leaves whole.
fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
