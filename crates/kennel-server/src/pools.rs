//! From config to pools: a [`PoolConfig`] becomes a `Pool<Coprocess>`.

use std::ffi::OsString;
use std::path::Path;

use kennel::{
    BuildError, LeaderFirst, OnDemand, OrderedReady, Parallel, Pool, PoolBuilder, SlotInfo,
};
use kennel_process::{Coprocess, CoprocessSpec, ReadyMode};

use crate::config::{PoolConfig, ReadyKind, SELF_EXE, SizingConfig, StartupKind};
use crate::watch::Watch;

/// How many workers a pool runs when its entry gives no `sizing`: a small
/// fixed number, since a worker may hold gigabytes. More, or
/// one per CPU, is asked for with `sizing`.
pub(crate) const DEFAULT_WORKERS: usize = 2;

/// The most workers `pool` may run by its sizing at start: a fixed
/// number, or one per CPU for the kinds that read the machine.
pub(crate) fn max_workers(pool: &PoolConfig) -> usize {
    match pool.sizing {
        None => DEFAULT_WORKERS,
        Some(SizingConfig::Fixed { workers }) => workers,
        Some(_) => std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
    }
}

/// How to start one worker of `pool`: its argv (with `@kennel` replaced by
/// `self_exe`), environment (less `env_remove`, and only `env_keep` of
/// the server's own under `env_clear`), directory and protocol limits.
pub(crate) fn coprocess_spec(pool: &PoolConfig, self_exe: &Path) -> CoprocessSpec {
    let mut argv: Vec<OsString> = pool.argv.iter().map(Into::into).collect();
    if pool.argv.first().is_some_and(|a| a == SELF_EXE) {
        argv[0] = self_exe.as_os_str().to_owned();
    }
    let mut spec = CoprocessSpec::new(argv)
        .close_grace(pool.worker_close_grace.0)
        .ready(match pool.ready {
            ReadyKind::Line => ReadyMode::Line,
            ReadyKind::Immediate => ReadyMode::Immediate,
        });
    if pool.env_clear {
        spec = spec.env_clear();
        for k in pool.kept_env() {
            if let Some(v) = std::env::var_os(k) {
                spec = spec.env(k, v);
            }
        }
    }
    for k in &pool.env_remove {
        spec = spec.env_remove(k);
    }
    for (k, v) in &pool.env {
        spec = spec.env(k, v);
    }
    if let Some(dir) = &pool.cwd {
        spec = spec.current_dir(dir);
    }
    if let Some(max) = pool.max_reply {
        spec = spec.max_line_bytes(usize::try_from(max.0).unwrap_or(usize::MAX));
    }
    if let Some(request) = &pool.probe_request {
        spec = spec.probe(request.clone());
    }
    if let Some(settings) = &pool.settings {
        spec = spec.settings(settings.clone());
    }
    for (method, result) in &pool.answers {
        spec = spec.answer(method, result.clone());
    }
    if let Some(method) = &pool.load_method {
        spec = spec.load_method(method);
    }
    if let Some(method) = &pool.unload_method {
        spec = spec.unload_method(method);
    }
    if let Some(budget) = pool.threads.budget() {
        spec = spec.threads(budget);
    }
    spec = spec.pin(pool.pin).job_ids(pool.job_ids);
    crate::config::protocol::apply(
        spec,
        pool.protocol,
        pool.cancel_lines,
        pool.method.as_deref(),
        pool.handshake().as_ref(),
        pool.mcp.as_ref().map_or(&[][..], |m| &m.prime[..]),
    )
}

/// Builds the pool a `[[pool]]` entry describes, each worker it starts
/// shown to `watch` (its stderr tail kept, its group recorded in the run
/// directory). Each worker is told its pool and slot in `KENNEL_POOL` and
/// `KENNEL_SLOT`, and its thread budget (`threads`) in `OMP_NUM_THREADS`,
/// `KENNEL_THREADS` and the like.
///
/// # Errors
///
/// The core's [`BuildError`] for an option out of its range.
///
/// # Panics
///
/// When called outside a tokio runtime.
pub(crate) fn build_pool(
    pool: &PoolConfig,
    self_exe: &Path,
    watch: &Watch,
) -> Result<Pool<Coprocess>, BuildError> {
    let spec = coprocess_spec(pool, self_exe);
    let watch = watch.clone();
    let builder = Pool::builder(move |info: SlotInfo| {
        // As `CoprocessSpec::pool` does: labelled, told its pool and slot
        // and its thread budget.
        let spec = spec.for_slot(&info);
        let watch = watch.clone();
        let slot = info.slot;
        async move {
            let worker = spec.spawn()?;
            watch.started(slot, &worker);
            Ok::<_, kennel_process::ProcessError>(worker)
        }
    })
    .name(pool.name.clone());
    configure(builder, pool)?.build()
}

fn configure<W: kennel::Worker>(
    mut b: PoolBuilder<W>,
    pool: &PoolConfig,
) -> Result<PoolBuilder<W>, BuildError> {
    // The service exports every pool's metrics at /metrics.
    b = b.metrics(true);
    b = match pool.startup {
        StartupKind::OnDemand => b.startup(OnDemand),
        StartupKind::Parallel => b.startup(Parallel),
        StartupKind::OrderedReady => b.startup(OrderedReady),
        StartupKind::LeaderFirst => b.startup(LeaderFirst),
    };
    b = pool
        .sizing
        .unwrap_or(SizingConfig::Fixed {
            workers: DEFAULT_WORKERS,
        })
        .apply(b);
    b = pool.eviction.apply(b)?;
    Ok(b.options(pool.options.clone()))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::{EvictionConfig, HumanDuration};

    #[test]
    fn a_bad_eviction_is_an_error_naming_it_never_the_default() {
        let mut pool = PoolConfig::new("p", ["cat"]);
        pool.eviction = EvictionConfig::IdleTimeout {
            after: HumanDuration(Duration::ZERO),
            keep: 0,
        };
        let err = build_pool(&pool, Path::new("kennel"), &Watch::default()).unwrap_err();
        assert_eq!(err.option, "eviction.after");
    }
}
