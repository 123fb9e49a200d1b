//! `AppState`: the pools the service lends from (one record per pool, in
//! [`Pools`]), and what its routes share.

mod builder;
mod pools;
mod queues;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use kennel::{Action, Pool};
use kennel_process::Coprocess;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::watch;

use crate::config::{Config, PoolConfig, ReconfigBody, ServerConfig, SizingConfig};
use crate::events::EventHub;
use crate::http::{BodyGate, HostPolicy};
use crate::pools::build_pool;
use crate::queue::Source;
use crate::rundir::RunDir;
use crate::watch::Watch;

pub use self::builder::{AppStateBuilder, StartError};
pub(crate) use self::pools::{Group, Pools};
pub(crate) use self::pools::{Policies, PoolEntry};

/// The file a running server reloads, and the `[server]` part read last.
#[derive(Debug, Clone)]
pub(crate) struct ReloadSource {
    /// The config file.
    pub(crate) path: PathBuf,
    /// What `@kennel` stands for.
    pub(crate) self_exe: PathBuf,
    /// The `[server]` read at start or at the last reload.
    pub(crate) server: ServerConfig,
}

/// What the routes of [`app`](crate::app) share: the pools, the
/// bearer token, the host policy, the body gate, the metrics handle, the
/// event hub and the config to reload. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    pools: Pools,
    token: Option<String>,
    bodies: BodyGate,
    host: HostPolicy,
    access_log: bool,
    metrics: Option<PrometheusHandle>,
    events: EventHub,
    /// The file `SIGHUP` and `POST /reload` read again, and what was read
    /// last; held for a whole reload, one at a time.
    reload: tokio::sync::Mutex<Option<ReloadSource>>,
    shutdown: watch::Sender<bool>,
    /// Taken by `PUT /pools/{name}/config` from reading a pool's options to
    /// handing it the patched ones, so that two changes do not undo each
    /// other.
    reconfig: Mutex<()>,
    /// Where each worker's process group is recorded, if anywhere.
    run_dir: Option<Arc<RunDir>>,
    /// The MCP sessions of `/mcp/{pool}`.
    mcp: crate::mcp::Sessions,
    /// The asynchronous jobs and their store.
    async_jobs: crate::async_jobs::AsyncJobs,
    /// `GET /metrics` asks for no token.
    metrics_public: bool,
    /// The tenants' tokens, read at start and at each reload.
    pub(super) callers: std::sync::RwLock<Arc<crate::tenants::Callers>>,
    /// Each tenant's jobs in flight, for `max_in_flight`.
    pub(super) flights: Arc<crate::tenants::Flights>,
}

impl fmt::Debug for AppState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AppState")
            .field("pools", &self.inner.pools)
            .field("token", &self.inner.token.as_ref().map(|_| "<set>"))
            .field("body_limit", &self.inner.bodies.limit())
            .field("host", &self.inner.host)
            .finish_non_exhaustive()
    }
}

impl AppState {
    /// A builder for the state.
    pub fn builder() -> AppStateBuilder {
        AppStateBuilder::default()
    }

    /// A state with no pool: every job is answered 501.
    pub fn empty() -> Self {
        Self::builder().build()
    }

    /// Builds every pool of `config` (its `[server]` part is not read here)
    /// and adds them. Workers of `@kennel` pools are `self_exe`.
    ///
    /// # Errors
    ///
    /// The first pool that cannot be built; the pools built before it are
    /// closed.
    ///
    /// # Cancel safety
    ///
    /// Building and adding a pool does not wait, so the only await is the
    /// closing after an error, and every pool is closing as soon as that
    /// starts: dropping the future then only stops waiting for their
    /// workers to end.
    ///
    /// # Panics
    ///
    /// When called outside a tokio runtime.
    pub async fn start_pools(&self, config: &Config, self_exe: &Path) -> Result<(), StartError> {
        for (i, pool) in config.pools.iter().enumerate() {
            let added = self
                .build_entry(pool, self_exe)
                .and_then(|entry| self.pools().insert(entry));
            if let Err(error) = added {
                let all = std::mem::take(&mut *self.pools().lock());
                futures_util::future::join_all(all.into_values().map(PoolEntry::close)).await;
                return Err(StartError {
                    pool: pool.name.clone(),
                    key: format!("pool[{i}]"),
                    error,
                });
            }
        }
        Ok(())
    }

    /// Builds the record of one pool of a config, with its watch, its
    /// events forwarded to `/events` from its first worker on. It is not
    /// added yet.
    ///
    /// # Errors
    ///
    /// The pool's build error.
    ///
    /// # Panics
    ///
    /// When called outside a tokio runtime.
    pub(crate) fn build_entry(
        &self,
        config: &PoolConfig,
        self_exe: &Path,
    ) -> Result<PoolEntry, kennel::Error> {
        let watch = Watch::new(self.inner.run_dir.clone());
        let pool = build_pool(config, self_exe, &watch)?;
        let capacity = pool.stats().capacity;
        let mut entry = self.entry(pool, config.group.clone());
        entry.policies = Some(Policies {
            // A pool built without a sizing runs the default,
            // `Fixed(capacity)`: it is recorded as such.
            sizing: config
                .sizing
                .unwrap_or(SizingConfig::Fixed { workers: capacity }),
            eviction: config.eviction,
        });
        entry.upload_limit = config
            .upload_limit
            .map(|l| usize::try_from(l.0).unwrap_or(usize::MAX));
        entry.watch = Some(watch);
        entry.config = Some(config.clone());
        Ok(entry)
    }

    /// The record of `pool`, its events forwarded to `/events`.
    fn entry(&self, pool: Pool<Coprocess>, group: Option<String>) -> PoolEntry {
        let entry = PoolEntry::new(pool, group);
        let rx = entry.pool.events();
        let name: Arc<str> = entry.pool.name().into();
        let forward = self
            .inner
            .events
            .clone()
            .forward(entry.events.clone(), name, rx);
        tokio::spawn(forward);
        entry
    }

    /// Kills every worker of every pool at once, without waiting (a second
    /// stop signal).
    pub(crate) fn kill_workers(&self) {
        let watches: Vec<Watch> = self
            .pools()
            .lock()
            .values()
            .filter_map(|e| e.watch.clone())
            .collect();
        for w in watches {
            w.kill_all();
        }
    }

    /// Adds a pool (in `group`, if given) and forwards its events to
    /// `/events`. Call it right after the pool is built, so that the
    /// events of its first workers are seen.
    ///
    /// # Errors
    ///
    /// [`kennel::Error::DuplicatePool`] when the name is taken.
    ///
    /// # Panics
    ///
    /// When called outside a tokio runtime.
    pub fn add_pool(
        &self,
        pool: Pool<Coprocess>,
        group: Option<&str>,
    ) -> Result<(), kennel::Error> {
        self.pools()
            .insert(self.entry(pool, group.map(str::to_owned)))
    }

    /// The pools.
    pub(crate) fn pools(&self) -> &Pools {
        &self.inner.pools
    }

    /// The pool named `name`, if the service has it.
    pub fn pool(&self, name: &str) -> Option<Pool<Coprocess>> {
        self.pools().get(name).ok()
    }

    /// Changes the live pool `name` as `body` says (its group too) and
    /// records its new sizing and eviction for `GET /pools/{name}/config`.
    ///
    /// # Errors
    ///
    /// [`kennel::Error::Config`] for an eviction kennel refuses,
    /// [`kennel::Error::NoSuchPool`], or the pool's own refusal; nothing
    /// changes on error.
    pub(crate) fn reconfigure_pool(
        &self,
        name: &str,
        body: &ReconfigBody,
    ) -> Result<Vec<Action>, kennel::Error> {
        // A pool alone has no group: the group is the record's.
        let change = ReconfigBody {
            group: None,
            ..body.clone()
        }
        .reconfig()?;
        let mut actions = self.pools().get(name)?.reconfigure(change)?;
        self.pools().with(name, |e| {
            if let Some(p) = &mut e.policies {
                p.sizing = body.sizing.unwrap_or(p.sizing);
                p.eviction = body.eviction.unwrap_or(p.eviction);
            }
            if let Some(to) = &body.group {
                if e.group != *to {
                    let from = std::mem::replace(&mut e.group, to.clone());
                    actions.push(Action::GroupChanged {
                        from,
                        to: to.clone(),
                    });
                }
            }
        });
        Ok(actions)
    }

    /// One reconfiguration at a time: a change is a patch of the live
    /// options, read then written back whole.
    pub(crate) fn reconfig_lock(&self) -> MutexGuard<'_, ()> {
        crate::lock(&self.inner.reconfig)
    }

    /// What is kept of the workers of the pool `name`, for a pool built by
    /// [`start_pools`](Self::start_pools).
    pub(crate) fn watch(&self, name: &str) -> Option<Watch> {
        self.pools().with(name, |e| e.watch.clone()).flatten()
    }

    /// The queue of pool `name`, if it has one.
    pub(crate) fn queue(&self, name: &str) -> Option<Arc<Source>> {
        self.pools().with(name, |e| e.queue.clone()).flatten()
    }

    /// The bearer token every route but the probes asks for, if any.
    pub fn token(&self) -> Option<&str> {
        self.inner.token.as_deref()
    }

    /// The largest request body, in bytes.
    pub fn body_limit(&self) -> usize {
        self.inner.bodies.limit()
    }

    /// How request bodies are read.
    pub(crate) fn bodies(&self) -> &BodyGate {
        &self.inner.bodies
    }

    /// The `Host` and `Origin` values requests may carry.
    pub fn host_policy(&self) -> &HostPolicy {
        &self.inner.host
    }

    /// Whether each request is logged.
    pub fn access_log(&self) -> bool {
        self.inner.access_log
    }

    /// The file reloads read, held for a whole reload.
    pub(crate) async fn reload_source(&self) -> tokio::sync::MutexGuard<'_, Option<ReloadSource>> {
        self.inner.reload.lock().await
    }

    pub(crate) fn metrics(&self) -> Option<&PrometheusHandle> {
        self.inner.metrics.as_ref()
    }

    /// Whether `GET /metrics` asks for no token.
    pub(crate) fn metrics_public(&self) -> bool {
        self.inner.metrics_public
    }

    /// Each tenant's jobs in flight across every pool.
    pub(crate) fn flights(&self) -> &Arc<crate::tenants::Flights> {
        &self.inner.flights
    }

    /// The tenants' tokens now.
    pub(crate) fn callers(&self) -> Arc<crate::tenants::Callers> {
        let callers = self.inner.callers.read();
        Arc::clone(&callers.unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Takes the tenants of `config` (`[[tenant]]`), their tokens read now:
    /// a request carrying one of them runs as that tenant. At start and at
    /// each reload.
    ///
    /// # Errors
    ///
    /// A tenant whose tokens cannot be read, or a token two callers share;
    /// the tenants taken before stay.
    pub fn set_tenants(&self, config: &Config) -> Result<(), String> {
        let callers = crate::tenants::Callers::of(config, self.token())?;
        let mut now =
            (self.inner.callers.write()).unwrap_or_else(std::sync::PoisonError::into_inner);
        *now = Arc::new(callers);
        Ok(())
    }

    /// The asynchronous jobs.
    pub(crate) fn async_jobs(&self) -> &crate::async_jobs::AsyncJobs {
        &self.inner.async_jobs
    }

    /// The MCP sessions of `/mcp/{pool}`.
    pub(crate) fn mcp(&self) -> &crate::mcp::Sessions {
        &self.inner.mcp
    }

    /// The event hub of every pool's events.
    pub(crate) fn events(&self) -> &EventHub {
        &self.inner.events
    }

    /// Resolves once [`begin_shutdown`](Self::begin_shutdown) was called.
    pub(crate) fn shutdown_signal(&self) -> impl Future<Output = ()> + Send + use<> {
        let mut rx = self.inner.shutdown.subscribe();
        async move {
            let _ = rx.wait_for(|down| *down).await;
        }
    }

    /// Starts the shutdown: `/events` streams end, so that a graceful
    /// server stop is not held open by them.
    pub(crate) fn begin_shutdown(&self) {
        self.inner.shutdown.send_replace(true);
    }

    /// Ends `/events` streams, then closes every pool: waiting jobs fail
    /// with `closed`, lent jobs get their pool's close grace, and every
    /// worker process ends.
    ///
    /// # Cancel safety
    ///
    /// The pools are closing as soon as the call starts; dropping the future
    /// only stops the waiting.
    pub async fn close(&self) {
        self.begin_shutdown();
        // All at once; their records stay (their workers can still be
        // killed, their queues drained).
        let pools: Vec<Pool<Coprocess>> = self
            .pools()
            .lock()
            .values()
            .map(|e| e.pool.clone())
            .collect();
        futures_util::future::join_all(pools.iter().map(Pool::close)).await;
    }
}
