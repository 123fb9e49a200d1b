//! `kennel serve`: the pools of a config behind HTTP, until SIGINT, SIGTERM
//! or SIGHUP (each a graceful stop).

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use kennel_server::reaper::Reaper;
use kennel_server::rundir::{Reaped, RunDir, default_run_dir};
use kennel_server::{AppState, app, metrics};
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::task::AbortOnDropHandle;

use crate::cli::ServeArgs;

/// How often histograms are drained even when nobody scrapes.
const UPKEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

pub(crate) async fn serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let config = crate::load_config(args.config.as_ref())?;
    let addr = args.listen.unwrap_or_else(|| config.listen());
    let token = config.server.token().map_err(anyhow::Error::msg)?;
    if token.is_none() && !addr.ip().is_loopback() {
        tracing::warn!(target: "kennel_server", %addr, "listening beyond loopback with no bearer token (set server.token_env)");
    }
    // Bind first: a busy port fails before any worker starts.
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener.local_addr().context("no local address")?;
    let mut sigterm = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut sigint = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    let mut sighup = signal(SignalKind::hangup()).context("cannot watch SIGHUP")?;
    // Before any worker starts: kill what a dead predecessor left.
    let run_path = config
        .server
        .run_dir
        .clone()
        .unwrap_or_else(|| default_run_dir(local.port()));
    // The reaper of a server that just ended may hold the lock a moment.
    let opened = tokio::task::block_in_place(|| {
        kennel_server::reaper::open_within(&run_path, std::time::Duration::from_secs(1))
    })
    .with_context(|| format!("cannot use the run directory {}", run_path.display()))?;
    let Some((run_dir, reaped)) = opened else {
        anyhow::bail!(
            "cannot use the run directory {}: another kennel server uses it",
            run_path.display()
        );
    };
    let run_dir = Arc::new(run_dir);
    // Kills what the workers' children leave if this process is killed.
    let reaper = match Reaper::spawn(&crate::self_exe()?, &run_path) {
        Ok(reaper) => Some(reaper),
        Err(err) => {
            tracing::warn!(target: "kennel_server", %err, "cannot start the reaper: if the server is killed, its workers' children live until the next server starts");
            None
        }
    };

    let handle = metrics::install();
    // Stopped when dropped: whichever way `serve` returns.
    let upkeep = {
        let handle = handle.clone();
        AbortOnDropHandle::new(tokio::spawn(async move {
            let mut tick = tokio::time::interval(UPKEEP_EVERY);
            loop {
                tick.tick().await;
                handle.run_upkeep();
            }
        }))
    };
    let mut builder = AppState::builder()
        .metrics(handle)
        .body_limit(usize::try_from(config.server.body_limit.0).unwrap_or(usize::MAX))
        .run_dir(run_dir.clone());
    if let Some(token) = token {
        builder = builder.token(token);
    }
    let state = builder.build();
    let source = args.config.as_ref().map_or_else(
        || "<built-in demo config>".to_owned(),
        |p| p.display().to_string(),
    );
    state
        .start_pools(&config, &crate::self_exe()?)
        .await
        .with_context(|| format!("{source}: cannot start a pool"))?;

    announce(&state, local, args.config.is_none(), &run_dir, &reaped);

    let grace = config.server.shutdown_grace.0;
    // The server task ends when dropped, if it has not by itself.
    let mut server = AbortOnDropHandle::new(tokio::spawn(
        axum::serve(listener, app(state.clone()))
            .with_graceful_shutdown(state.shutdown_signal())
            .into_future(),
    ));
    tokio::select! {
        r = &mut server => {
            // axum's server runs until it is told to stop.
            state.close().await;
            drop(upkeep);
            r.context("the server task failed")?.context("the server failed")?;
            anyhow::bail!("the server stopped by itself");
        }
        _ = sigterm.recv() => tracing::info!(target: "kennel_server", "SIGTERM: shutting down"),
        _ = sigint.recv() => tracing::info!(target: "kennel_server", "SIGINT: shutting down"),
        _ = sighup.recv() => tracing::info!(target: "kennel_server", "SIGHUP: shutting down"),
    }
    // Stop accepting, end /events streams, let in-flight requests finish
    // within the grace.
    state.begin_shutdown();
    tokio::select! {
        r = &mut server => {
            if let Ok(Err(e)) = r {
                tracing::warn!(target: "kennel_server", error = %e, "the server failed while stopping");
            }
        }
        () = tokio::time::sleep(grace) => {
            tracing::warn!(target: "kennel_server", grace = %humantime::format_duration(grace), "requests still running after the shutdown grace");
        }
        _ = sigterm.recv() => {}
        _ = sigint.recv() => {}
        _ = sighup.recv() => {}
    }
    // Requests still running past the grace, or after a second signal, are
    // cut off: dropping the server's task ends it.
    drop(server);
    tracing::info!(target: "kennel_server", "closing every pool");
    tokio::select! {
        () = state.close() => {}
        _ = sigterm.recv() => tracing::warn!(target: "kennel_server", "second signal: killing every worker"),
        _ = sigint.recv() => tracing::warn!(target: "kennel_server", "second signal: killing every worker"),
        _ = sighup.recv() => tracing::warn!(target: "kennel_server", "second signal: killing every worker"),
    }
    // Dropping the state kills any worker left; then no group is live.
    drop(state);
    run_dir.clean();
    drop(reaper);
    drop(upkeep);
    tracing::info!(target: "kennel_server", "stopped");
    Ok(ExitCode::SUCCESS)
}

/// Prints where the service listens (stdout, first line, so scripts and
/// tests can read the port) and how to try it.
fn announce(
    state: &AppState,
    addr: std::net::SocketAddr,
    demo: bool,
    run_dir: &RunDir,
    reaped: &Reaped,
) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "kennel listening on http://{addr}");
    let _ = writeln!(out, "  run directory {}", run_dir.path().display());
    if !reaped.groups.is_empty() {
        let _ = writeln!(
            out,
            "  killed {} process group(s) left by a previous run: {:?}",
            reaped.groups.len(),
            reaped.groups
        );
        tracing::warn!(target: "kennel_server", groups = ?reaped.groups, "killed process groups left by a previous run");
    }
    for entry in state.registry().list() {
        let group = entry
            .group
            .map(|g| format!(" (group {g})"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  pool {}{group}: capacity {}",
            entry.name, entry.stats.capacity
        );
    }
    if demo {
        let _ = writeln!(
            out,
            "try: curl -s -X POST http://{addr}/pools/demo/jobs -d '{{\"iterations\": 1000000}}'"
        );
    }
    let _ = out.flush();
}
