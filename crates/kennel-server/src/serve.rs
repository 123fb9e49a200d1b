//! `kennel serve`: the pools of a config behind HTTP until SIGTERM or
//! SIGINT (a graceful stop; a second one kills every worker at once);
//! SIGHUP reloads the config file.

use std::fmt::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{Config, RuntimeThreads};
use crate::http::{ConnOptions, ConnectionBudget, HostPolicy};
use crate::reaper::Reaper;
use crate::rundir::{Reaped, RunDir, default_run_dir};
use crate::{AppState, metrics};
use anyhow::Context;
use tokio_util::task::AbortOnDropHandle;

use crate::cli::ServeArgs;
use crate::signals::{Asked, Signals};

/// How long the last acks of the queued pools may take once the pools are
/// closed.
const LAST_ACKS: std::time::Duration = std::time::Duration::from_secs(5);

/// How often histograms are drained even when nobody scrapes.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// The log filter of `serve` when `RUST_LOG` is not set.
const SERVE_FILTER: &str = "warn,kennel=info,kennel_server=info,kennel_process=info";

/// After a second stop signal killed every worker, how long the pools may
/// take to see them end.
const AFTER_KILL: Duration = Duration::from_secs(5);

/// `kennel serve` with `config`, read before the runtime started (it sizes
/// the runtime).
pub(crate) async fn serve(args: ServeArgs, config: Config) -> anyhow::Result<ExitCode> {
    let format = args.log_format.unwrap_or(config.server.log_format);
    let _log = crate::logs::init(format, SERVE_FILTER);
    let addr = args.listen.unwrap_or_else(|| config.listen());
    let token = config.server.token().map_err(anyhow::Error::msg)?;
    // The tenants' tokens too: a token that cannot be read stops the start
    // before the port or the run directory is taken.
    let callers =
        crate::tenants::Callers::of(&config, token.as_deref()).map_err(anyhow::Error::msg)?;
    if token.is_none() && !addr.ip().is_loopback() {
        tracing::warn!(target: "kennel_server", %addr, "listening beyond loopback with no bearer token (set server.token_env)");
    }
    // Bind first: a busy port fails before any worker starts.
    let listener = crate::http::bind(addr).with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener.local_addr().context("no local address")?;
    let mut signals = Signals::watch()?;
    // Before any worker starts: kill what a dead predecessor left.
    let run_path = config
        .server
        .run_dir
        .clone()
        .unwrap_or_else(|| default_run_dir(local.port()));
    // The reaper of a server that just ended may hold the lock a moment.
    let opened = tokio::task::block_in_place(|| {
        crate::reaper::open_within(&run_path, std::time::Duration::from_secs(1), RunDir::open)
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
    let reaper = match Reaper::spawn(&crate::command::self_exe()?, run_dir.path()) {
        Ok(reaper) => Some(reaper),
        Err(err) => {
            tracing::warn!(target: "kennel_server", %err, "cannot start the reaper: if the server is killed, its workers' children live until the next server starts");
            None
        }
    };

    let handle = match &config.server.histogram_buckets {
        Some(b) => metrics::install_with(&b.0),
        None => metrics::install(),
    };
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
    let budget = connection_budget(&config);
    let s = &config.server;
    let mut builder = AppState::builder()
        .metrics(handle)
        .body_limit(usize::try_from(s.body_limit.0).unwrap_or(usize::MAX))
        .max_bodies(s.max_bodies)
        .body_timeout(s.body_timeout.0)
        .host_policy(HostPolicy::new(local, &s.allowed_hosts, &s.allowed_origins))
        .access_log(args.access_log || s.access_log)
        .run_dir(run_dir.clone())
        .metrics_public(s.metrics_public)
        .callers(callers)
        .state_dir(
            s.state_dir
                .clone()
                .unwrap_or_else(|| crate::config::default_state_dir(local.port())),
            s.result_ttl.0,
        );
    if let Some(token) = token {
        builder = builder.token(token);
    }
    let state = builder.build();
    let source = args.config.as_ref().map_or_else(
        || "<built-in demo config>".to_owned(),
        |p| p.display().to_string(),
    );
    let self_exe = crate::command::self_exe()?;
    state
        .start_pools(&config, &self_exe)
        .await
        .with_context(|| format!("{source}: cannot start a pool"))?;
    if let Err(e) = state.start_queues(&config).await {
        state.close().await;
        return Err(anyhow::Error::new(e).context(format!("{source}: cannot start a queue")));
    }
    if let Some(path) = &args.config {
        state.reload_from(path.clone(), self_exe, &config).await;
    }
    // Jobs a stopped server left in the store run again.
    state.async_jobs().resume(&state);

    announce(
        &state,
        local,
        args.config.is_none(),
        &run_dir,
        &reaped,
        config.server.runtime_threads,
    );

    let grace = config.server.shutdown_grace.0;
    let options = ConnOptions {
        header_timeout: s.header_timeout.0,
        idle_timeout: s.idle_timeout.0,
        write_timeout: s.write_timeout.0,
        max_connections: budget.connections,
    };
    // The server task ends when dropped, if it has not by itself.
    let mut server = AbortOnDropHandle::new(tokio::spawn(crate::http::serve(
        listener,
        crate::app(state.clone()),
        options,
        state.shutdown_signal(),
    )));
    loop {
        tokio::select! {
            r = &mut server => {
                // The server runs until it is told to stop.
                state.close().await;
                drop(upkeep);
                r.context("the server task failed")?.context("the server failed")?;
                anyhow::bail!("the server stopped by itself");
            }
            asked = signals.next() => match asked {
                // A bad file is logged with the error a start would print;
                // the running config stays.
                Asked::Reload => match state.reload().await {
                    Ok(done) => {
                        tracing::info!(target: "kennel_server", "SIGHUP: config reloaded from {source}: {done}");
                    }
                    Err(e) => {
                        tracing::error!(target: "kennel_server", error = %e, "SIGHUP: reload refused; the running config is kept");
                    }
                },
                Asked::Stop(name) => {
                    tracing::info!(target: "kennel_server", signal = name, "shutting down");
                    break;
                }
            },
        }
    }
    // Stop accepting and fetching, end /events streams, let in-flight
    // requests and queued jobs finish within the grace. A client that
    // stalls is dropped by its own read or write timeout, so it does not
    // hold the stop for the whole grace.
    state.begin_shutdown();
    let drained = async { tokio::join!(&mut server, state.drain_queues()).0 };
    let stopped = tokio::select! {
        r = drained => {
            if let Ok(Err(e)) = r {
                tracing::warn!(target: "kennel_server", error = %e, "the server failed while stopping");
            }
            None
        }
        () = tokio::time::sleep(grace) => {
            tracing::warn!(target: "kennel_server", grace = %humantime::format_duration(grace), "requests still running after the shutdown grace");
            None
        }
        name = signals.next_stop() => Some(name),
    };
    // Requests still running past the grace, or after a second signal, are
    // cut off: dropping the server's task ends it.
    drop(server);
    let second = match stopped {
        Some(name) => Some(name),
        None => {
            tracing::info!(target: "kennel_server", "closing every pool");
            tokio::select! {
                () = state.close() => None,
                name = signals.next_stop() => Some(name),
            }
        }
    };
    if let Some(name) = second {
        tracing::warn!(target: "kennel_server", signal = name, "second signal: killing every worker");
        state.kill_workers();
        let _ = tokio::time::timeout(AFTER_KILL, state.close()).await;
    }
    // The queued jobs the closing ended are handed back, and the acks sent
    // (bounded: a job the closing could not end is delivered again after
    // its ack_wait).
    let _ = tokio::time::timeout(LAST_ACKS, state.drain_queues()).await;
    // Dropping the state kills any worker left; then no group is live.
    drop(state);
    run_dir.clean();
    drop(reaper);
    drop(upkeep);
    tracing::info!(target: "kennel_server", "stopped");
    Ok(ExitCode::SUCCESS)
}

/// The connections to take at once: `server.max_connections`, or fewer
/// when the descriptor limit leaves less beside the pools' workers.
fn connection_budget(config: &Config) -> ConnectionBudget {
    let wanted = config.server.max_connections;
    let workers: usize = config.pools.iter().map(crate::pools::max_workers).sum();
    let budget = ConnectionBudget::settle(wanted, workers);
    if budget.cut_below(wanted) {
        tracing::warn!(
            target: "kennel_server",
            connections = budget.connections,
            fd_limit = budget.fd_limit,
            reserved = budget.reserved,
            "the file descriptor limit allows {} connections at once beside the pools' workers (server.max_connections = {wanted}); raise the limit (LimitNOFILE=, ulimit -n) for more",
            budget.connections
        );
    } else {
        tracing::debug!(target: "kennel_server", connections = budget.connections, fd_limit = budget.fd_limit, reserved = budget.reserved, "connection budget");
    }
    budget
}

/// Prints where the service listens (stdout, first line, so scripts and
/// tests can read the port) and how to try it. Written by a thread of its
/// own: a stdout nobody reads never holds up the server.
fn announce(
    state: &AppState,
    addr: std::net::SocketAddr,
    demo: bool,
    run_dir: &RunDir,
    reaped: &Reaped,
    threads: RuntimeThreads,
) {
    let mut out = String::new();
    let _ = writeln!(out, "kennel listening on http://{addr}");
    let _ = writeln!(out, "  run directory {}", run_dir.path().display());
    // The runtime's own count, not the setting's.
    let workers = tokio::runtime::Handle::current().metrics().num_workers();
    let _ = writeln!(out, "  runtime threads {}", threads.describe(workers));
    if !reaped.groups.is_empty() {
        let _ = writeln!(
            out,
            "  killed {} process group(s) left by a previous run: {:?}",
            reaped.groups.len(),
            reaped.groups
        );
        tracing::warn!(target: "kennel_server", groups = ?reaped.groups, "killed process groups left by a previous run");
    }
    for entry in state.pools().list() {
        let group = crate::status::in_group(entry.group.as_deref());
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
    crate::logs::print_detached(out);
}
