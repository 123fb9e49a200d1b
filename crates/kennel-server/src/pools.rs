//! From config to pools: a [`PoolConfig`] becomes a `Pool<Coprocess>`, a
//! [`ReconfigBody`] becomes a [`Reconfig`].

use std::path::Path;
use std::time::Duration;

use kennel::{
    BuildError, Dispatch, Fixed, Gradient, HillClimbing, IdleTimeout, LeaderFirst, NoEviction,
    OnDemand, OrderedReady, Parallel, Pool, PoolBuilder, Reconfig, Resources, SystemComputer,
};
use kennel_process::{Coprocess, CoprocessSpec, ReadyMode};

use crate::config::{
    DispatchKind, EvictionConfig, PoolConfig, ReadyKind, ReconfigBody, SizingConfig, StartupKind,
};

/// The grace of each step of a worker process's close (stdin closed, then
/// SIGTERM, then SIGKILL).
pub const WORKER_CLOSE_GRACE: Duration = Duration::from_secs(5);

/// How to start one worker of `pool`: its argv (with `@kennel` replaced by
/// `self_exe`), environment, directory and protocol limits.
pub fn coprocess_spec(pool: &PoolConfig, self_exe: &Path) -> CoprocessSpec {
    let mut spec = CoprocessSpec::new(pool.resolved_argv(self_exe))
        .close_grace(WORKER_CLOSE_GRACE)
        .ready(match pool.ready {
            ReadyKind::Line => ReadyMode::Line,
            ReadyKind::Immediate => ReadyMode::Immediate,
        });
    for (k, v) in &pool.env {
        spec = spec.env(k, v);
    }
    if let Some(dir) = &pool.cwd {
        spec = spec.current_dir(dir);
    }
    if let Some(max) = pool.max_reply {
        spec = spec.max_line_bytes(usize::try_from(max.0).unwrap_or(usize::MAX));
    }
    spec
}

/// Builds the pool a `[[pool]]` entry describes. Each worker is told its pool
/// and slot in `KENNEL_POOL` and `KENNEL_SLOT`.
///
/// # Errors
///
/// The core's [`BuildError`] for an option out of its range.
///
/// # Panics
///
/// When called outside a tokio runtime.
pub fn build_pool(pool: &PoolConfig, self_exe: &Path) -> Result<Pool<Coprocess>, BuildError> {
    let builder = coprocess_spec(pool, self_exe)
        .pool()
        .name(pool.name.clone());
    configure(builder, pool).build()
}

fn configure<W: kennel::Worker>(mut b: PoolBuilder<W>, pool: &PoolConfig) -> PoolBuilder<W> {
    // The service exports every pool's metrics at /metrics.
    b = b.metrics(true);
    b = match pool.startup {
        StartupKind::OnDemand => b.startup(OnDemand),
        StartupKind::Parallel => b.startup(Parallel),
        StartupKind::OrderedReady => b.startup(OrderedReady),
        StartupKind::LeaderFirst => b.startup(LeaderFirst),
    };
    b = match pool.sizing {
        None => b,
        Some(SizingConfig::Fixed { workers }) => b.sizing(Fixed(workers)),
        Some(SizingConfig::Resources { memory_per_worker }) => {
            b.sizing(Resources::new(memory_per_worker.0, SystemComputer))
        }
        Some(SizingConfig::HillClimbing { memory_per_worker }) => {
            b.sizing(HillClimbing::new(memory_per_worker.0, SystemComputer))
        }
        Some(SizingConfig::Gradient { memory_per_worker }) => {
            b.sizing(Gradient::new(memory_per_worker.0, SystemComputer))
        }
    };
    b = match pool.eviction {
        EvictionConfig::None => b.eviction(NoEviction),
        EvictionConfig::IdleTimeout { after, keep } => match IdleTimeout::new(after.0) {
            Ok(e) => b.eviction(e.keep(keep)),
            // Checked when the config was read; keep the default otherwise.
            Err(_) => b,
        },
    };
    b = b.dispatch(match pool.dispatch {
        DispatchKind::LowestSlot => Dispatch::LowestSlot,
        DispatchKind::RoundRobin => Dispatch::RoundRobin,
    });
    if let Some(d) = pool.job_timeout {
        b = b.job_timeout(d.0);
    }
    if let Some(d) = pool.warmup_timeout {
        b = b.warmup_timeout(d.0);
    }
    if let Some(n) = pool.max_waiting {
        b = b.max_waiting(n);
    }
    if let Some(d) = pool.max_queue_wait {
        b = b.max_queue_wait(d.0);
    }
    if let Some(d) = pool.max_lifetime {
        b = b.max_lifetime(d.0);
    }
    if let Some(d) = pool.max_lifetime_jitter {
        b = b.max_lifetime_jitter(d.0);
    }
    if let Some(n) = pool.auto_grow_threshold {
        b = b.auto_grow_threshold(n);
    }
    if let Some(d) = pool.close_grace {
        b = b.close_grace(d.0);
    }
    b
}

/// The core's [`Reconfig`] for a `PUT /pools/{name}/config` body.
///
/// # Errors
///
/// A [`BuildError`] for an idle timeout out of range (already checked when
/// the body was read).
pub fn reconfig_of(body: &ReconfigBody) -> Result<Reconfig, BuildError> {
    let mut r = Reconfig::new();
    match body.sizing {
        None => {}
        Some(SizingConfig::Fixed { workers }) => r = r.sizing(Fixed(workers)),
        Some(SizingConfig::Resources { memory_per_worker }) => {
            r = r.sizing(Resources::new(memory_per_worker.0, SystemComputer));
        }
        Some(SizingConfig::HillClimbing { memory_per_worker }) => {
            r = r.sizing(HillClimbing::new(memory_per_worker.0, SystemComputer));
        }
        Some(SizingConfig::Gradient { memory_per_worker }) => {
            r = r.sizing(Gradient::new(memory_per_worker.0, SystemComputer));
        }
    }
    match body.eviction {
        None => {}
        Some(EvictionConfig::None) => r = r.eviction(NoEviction),
        Some(EvictionConfig::IdleTimeout { after, keep }) => {
            r = r.eviction(IdleTimeout::new(after.0)?.keep(keep));
        }
    }
    if let Some(d) = body.job_timeout {
        r = r.job_timeout(d.map(|d| d.0));
    }
    if let Some(d) = body.warmup_timeout {
        r = r.warmup_timeout(d.map(|d| d.0));
    }
    if let Some(n) = body.max_waiting {
        r = r.max_waiting(n);
    }
    if let Some(d) = body.max_queue_wait {
        r = r.max_queue_wait(d.map(|d| d.0));
    }
    if let Some(d) = body.max_lifetime {
        r = r.max_lifetime(d.map(|d| d.0));
    }
    if let Some(j) = body.max_lifetime_jitter {
        r = r.max_lifetime_jitter(j.0);
    }
    if let Some(n) = body.auto_grow_threshold {
        r = r.auto_grow_threshold(n);
    }
    if let Some(d) = body.close_grace {
        r = r.close_grace(d.0);
    }
    if let Some(g) = &body.group {
        r = r.group(g.clone());
    }
    Ok(r)
}
