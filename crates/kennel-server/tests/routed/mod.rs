//! The service's router in-process, over real worker processes (the
//! `kennel` binary's demo worker): the pools the router tests start.

#![allow(dead_code, unreachable_pub)]

use std::path::Path;

use kennel_server::config::{PoolConfig, SizingConfig, StartupKind};
use kennel_server::{AppState, Config, metrics};

pub fn kennel_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_kennel"))
}

/// A demo pool of `workers` workers started at once, with a short warm-up.
pub fn demo(name: &str, workers: usize) -> PoolConfig {
    let mut p = PoolConfig::new(name, ["@kennel", "worker", "demo", "--warmup", "10ms"]);
    p.startup = StartupKind::Parallel;
    p.sizing = Some(SizingConfig::Fixed { workers });
    p
}

/// A service with a metrics recorder and `pools` started.
pub async fn state_with(pools: Vec<PoolConfig>) -> AppState {
    let state = AppState::builder().metrics(metrics::install()).build();
    start(&state, pools).await;
    state
}

/// Starts `pools` in `state`.
pub async fn start(state: &AppState, pools: Vec<PoolConfig>) {
    let mut config = Config::default();
    config.pools = pools;
    state.start_pools(&config, kennel_bin()).await.unwrap();
}
