//! `AppState`: the pools the service lends from, and what its routes share.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use std::time::Duration;

use kennel::{Pool, Registry};
use kennel_process::Coprocess;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::watch;

use crate::config::{Config, DEFAULT_BODY_LIMIT, PoolConfig};
use crate::events::EventHub;
use crate::http::body::{DEFAULT_BODY_TIMEOUT, DEFAULT_MAX_BODIES};
use crate::http::{BodyGate, HostPolicy};
use crate::ops::live::LivePolicies;
use crate::pools::build_watched_pool;
use crate::reload::ReloadSource;
use crate::rundir::RunDir;
use crate::watch::Watch;

/// What the routes of [`app`](crate::app) share: the registry of pools, the
/// bearer token, the host policy, the body gate, the metrics handle, the
/// event hub and the config to reload. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry<Coprocess>,
    token: Option<String>,
    bodies: BodyGate,
    host: HostPolicy,
    access_log: bool,
    metrics: Option<PrometheusHandle>,
    events: EventHub,
    /// The file `SIGHUP` and `POST /reload` read again, and what was read
    /// last.
    reload: Mutex<Option<ReloadSource>>,
    shutdown: watch::Sender<bool>,
    /// Taken by `PUT /pools/{name}/config` from reading a pool's options to
    /// handing it the patched ones, so that two changes do not undo each
    /// other.
    reconfig: Mutex<()>,
    /// Where each worker's process group is recorded, if anywhere.
    run_dir: Option<Arc<RunDir>>,
    /// What is kept of each pool's workers (pools built by `start_pools`).
    watches: Mutex<HashMap<String, Watch>>,
    /// The sizing and eviction each pool was last given.
    live: LivePolicies,
    /// Each pool's `upload_limit`, where it has one.
    uploads: Mutex<HashMap<String, usize>>,
    /// The pools fed by a JetStream work queue.
    queues: crate::queue::Queues,
}

impl fmt::Debug for AppState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AppState")
            .field("registry", &self.inner.registry)
            .field("token", &self.inner.token.as_ref().map(|_| "<set>"))
            .field("body_limit", &self.inner.bodies.limit())
            .field("host", &self.inner.host)
            .finish_non_exhaustive()
    }
}

/// Builds an [`AppState`].
#[derive(Debug, Default)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct AppStateBuilder {
    token: Option<String>,
    body_limit: Option<usize>,
    max_bodies: Option<usize>,
    body_timeout: Option<Duration>,
    host: Option<HostPolicy>,
    access_log: bool,
    metrics: Option<PrometheusHandle>,
    run_dir: Option<Arc<RunDir>>,
}

impl AppStateBuilder {
    /// Records each worker process group of the pools built by
    /// [`AppState::start_pools`] in `dir`, for the next server to reap if
    /// this one dies without closing them.
    pub fn run_dir(mut self, dir: Arc<RunDir>) -> Self {
        self.run_dir = Some(dir);
        self
    }

    /// Asks every route but the probes (`/livez`, `/readyz`, `/healthz`) for
    /// `Authorization: Bearer <token>`.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// The largest request body, in bytes (default 1 MiB).
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = Some(bytes);
        self
    }

    /// At most `n` request bodies read and parsed at once (default 16).
    pub fn max_bodies(mut self, n: usize) -> Self {
        self.max_bodies = Some(n);
        self
    }

    /// How long a request body may take to arrive, whole (default 30 s).
    pub fn body_timeout(mut self, d: Duration) -> Self {
        self.body_timeout = Some(d);
        self
    }

    /// The `Host` and `Origin` values requests may carry (default: the
    /// loopback names, and no cross-site origin).
    pub fn host_policy(mut self, policy: HostPolicy) -> Self {
        self.host = Some(policy);
        self
    }

    /// Logs one INFO line per request (target `kennel_server::access`).
    pub fn access_log(mut self, on: bool) -> Self {
        self.access_log = on;
        self
    }

    /// Serves this recorder's rendering at `/metrics` (default: the one
    /// [`metrics::install`](crate::metrics::install) installs).
    pub fn metrics(mut self, handle: PrometheusHandle) -> Self {
        self.metrics = Some(handle);
        self
    }

    /// The state, with no pool yet: add them with [`AppState::add_pool`].
    pub fn build(self) -> AppState {
        let (shutdown, _) = watch::channel(false);
        let body_limit = self
            .body_limit
            .unwrap_or(usize::try_from(DEFAULT_BODY_LIMIT).unwrap_or(usize::MAX));
        AppState {
            inner: Arc::new(Inner {
                registry: Registry::new(),
                token: self.token,
                bodies: BodyGate::new(
                    body_limit,
                    self.max_bodies.unwrap_or(DEFAULT_MAX_BODIES),
                    self.body_timeout.unwrap_or(DEFAULT_BODY_TIMEOUT),
                ),
                host: self.host.unwrap_or_default(),
                access_log: self.access_log,
                metrics: self.metrics,
                events: EventHub::new(),
                reload: Mutex::new(None),
                shutdown,
                reconfig: Mutex::new(()),
                run_dir: self.run_dir,
                watches: Mutex::new(HashMap::new()),
                live: LivePolicies::default(),
                uploads: Mutex::new(HashMap::new()),
                queues: crate::queue::Queues::default(),
            }),
        }
    }
}

/// A failure to start the pools of a config.
#[derive(Debug)]
pub struct StartError {
    /// The pool's name.
    pub pool: String,
    /// The key path of the pool in the config (`pool[1]`).
    pub key: String,
    /// What went wrong.
    pub error: kennel::Error,
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` ({:?}): {}", self.key, self.pool, self.error)
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
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
    /// starts ([`Registry::close_all`](kennel::Registry::close_all)):
    /// dropping the future then only stops waiting for their workers to end.
    ///
    /// # Panics
    ///
    /// When called outside a tokio runtime.
    pub async fn start_pools(&self, config: &Config, self_exe: &Path) -> Result<(), StartError> {
        for (i, pool) in config.pools.iter().enumerate() {
            if let Err(error) = self.start_pool(pool, self_exe) {
                self.registry().close_all().await;
                return Err(StartError {
                    pool: pool.name.clone(),
                    key: format!("pool[{i}]"),
                    error,
                });
            }
        }
        Ok(())
    }

    /// Builds one pool of a config, with its watch, and adds it.
    ///
    /// # Errors
    ///
    /// The pool's build error, or [`kennel::Error::DuplicatePool`].
    pub(crate) fn start_pool(
        &self,
        pool: &PoolConfig,
        self_exe: &Path,
    ) -> Result<(), kennel::Error> {
        let watch = Watch::new(self.inner.run_dir.clone());
        let built = build_watched_pool(pool, self_exe, &watch)?;
        let capacity = built.stats().capacity;
        self.add_pool(built, pool.group.as_deref())?;
        self.watches().insert(pool.name.clone(), watch);
        self.live()
            .built(&pool.name, pool.sizing, pool.eviction, capacity);
        if let Some(limit) = pool.upload_limit {
            self.set_upload_limit(&pool.name, usize::try_from(limit.0).unwrap_or(usize::MAX));
        }
        Ok(())
    }

    /// Forgets what is kept of a pool taken out: its watch, its events.
    pub(crate) fn forget_pool(&self, name: &str) {
        self.watches().remove(name);
        self.inner.events.forget(name);
    }

    /// Kills every worker of every pool at once, without waiting (a second
    /// stop signal).
    pub fn kill_workers(&self) {
        let watches: Vec<Watch> = self.watches().values().cloned().collect();
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
        let rx = pool.events();
        let name: Arc<str> = pool.name().into();
        match group {
            Some(g) => self.inner.registry.add_to_group(pool, g)?,
            None => self.inner.registry.add(pool)?,
        }
        tokio::spawn(self.inner.events.clone().forward(name, rx));
        Ok(())
    }

    /// The pools.
    pub fn registry(&self) -> &Registry<Coprocess> {
        &self.inner.registry
    }

    /// One reconfiguration at a time: a change is a patch of the live
    /// options, read then written back whole.
    pub(crate) fn reconfig_lock(&self) -> MutexGuard<'_, ()> {
        self.inner
            .reconfig
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// What is kept of the workers of the pool `name`, for a pool built by
    /// [`start_pools`](Self::start_pools).
    pub fn watch(&self, name: &str) -> Option<Watch> {
        self.watches().get(name).cloned()
    }

    fn watches(&self) -> MutexGuard<'_, HashMap<String, Watch>> {
        self.inner
            .watches
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The pools fed by a JetStream work queue
    /// ([`start_queues`](Self::start_queues)).
    pub fn queues(&self) -> &crate::queue::Queues {
        &self.inner.queues
    }

    /// The sizing and eviction each pool was last given.
    pub(crate) fn live(&self) -> &LivePolicies {
        &self.inner.live
    }

    /// The run directory, if the state has one.
    pub fn run_dir(&self) -> Option<&RunDir> {
        self.inner.run_dir.as_deref()
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
    pub fn bodies(&self) -> &BodyGate {
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

    pub(crate) fn reload_source(&self) -> MutexGuard<'_, Option<ReloadSource>> {
        self.inner
            .reload
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The largest binary job body of pool `name` (its `upload_limit`, or
    /// the `body_limit`).
    pub fn upload_limit(&self, name: &str) -> usize {
        let uploads = self
            .inner
            .uploads
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        uploads
            .get(name)
            .copied()
            .unwrap_or(self.inner.bodies.limit())
    }

    /// Sets the `upload_limit` of pool `name`.
    pub fn set_upload_limit(&self, name: &str, bytes: usize) {
        self.inner
            .uploads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.to_owned(), bytes);
    }

    pub(crate) fn metrics(&self) -> Option<&PrometheusHandle> {
        self.inner.metrics.as_ref()
    }

    /// The event hub of every pool's events.
    pub fn events(&self) -> &EventHub {
        &self.inner.events
    }

    /// Resolves once [`begin_shutdown`](Self::begin_shutdown) was called.
    pub fn shutdown_signal(&self) -> impl Future<Output = ()> + Send + use<> {
        let mut rx = self.inner.shutdown.subscribe();
        async move {
            let _ = rx.wait_for(|down| *down).await;
        }
    }

    /// Starts the shutdown: `/events` streams end, so that a graceful
    /// server stop is not held open by them.
    pub fn begin_shutdown(&self) {
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
        self.inner.registry.close_all().await;
    }
}
