//! `AppState`: the pools the service lends from, and what its routes share.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use kennel::{Event, Pool, Registry};
use kennel_process::Coprocess;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::{broadcast, watch};

use crate::config::{Config, DEFAULT_BODY_LIMIT};
use crate::ops::live::LivePolicies;
use crate::pools::build_watched_pool;
use crate::rundir::RunDir;
use crate::watch::Watch;

/// How many pool events a `/events` subscriber may fall behind before it
/// misses some.
pub const EVENT_BUFFER: usize = 1024;

/// One event of one pool, as `/events` sends it.
#[derive(Debug, Clone)]
pub struct PoolEvent {
    /// The pool's name.
    pub pool: Arc<str>,
    /// The event.
    pub event: Event,
}

/// What the routes of [`app`](crate::app) share: the registry of pools, the
/// bearer token, the body limit, the metrics handle and the event bus.
/// Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry<Coprocess>,
    token: Option<String>,
    body_limit: usize,
    metrics: Option<PrometheusHandle>,
    events: broadcast::Sender<PoolEvent>,
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
            .field("body_limit", &self.inner.body_limit)
            .finish_non_exhaustive()
    }
}

/// Builds an [`AppState`].
#[derive(Debug, Default)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct AppStateBuilder {
    token: Option<String>,
    body_limit: Option<usize>,
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

    /// Serves this recorder's rendering at `/metrics` (default: the one
    /// [`metrics::install`](crate::metrics::install) installs).
    pub fn metrics(mut self, handle: PrometheusHandle) -> Self {
        self.metrics = Some(handle);
        self
    }

    /// The state, with no pool yet: add them with [`AppState::add_pool`].
    pub fn build(self) -> AppState {
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let (shutdown, _) = watch::channel(false);
        AppState {
            inner: Arc::new(Inner {
                registry: Registry::new(),
                token: self.token,
                body_limit: self
                    .body_limit
                    .unwrap_or(usize::try_from(DEFAULT_BODY_LIMIT).unwrap_or(usize::MAX)),
                metrics: self.metrics,
                events,
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
            let fail = |error: kennel::Error| StartError {
                pool: pool.name.clone(),
                key: format!("pool[{i}]"),
                error,
            };
            let watch = Watch::new(self.inner.run_dir.clone());
            let built = match build_watched_pool(pool, self_exe, &watch) {
                Ok(p) => p,
                Err(e) => {
                    self.registry().close_all().await;
                    return Err(fail(e.into()));
                }
            };
            let capacity = built.stats().capacity;
            if let Err(e) = self.add_pool(built, pool.group.as_deref()) {
                self.registry().close_all().await;
                return Err(fail(e));
            }
            self.watches().insert(pool.name.clone(), watch);
            self.live()
                .built(&pool.name, pool.sizing, pool.eviction, capacity);
            if let Some(limit) = pool.upload_limit {
                self.set_upload_limit(&pool.name, usize::try_from(limit.0).unwrap_or(usize::MAX));
            }
        }
        Ok(())
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
        tokio::spawn(forward(name, rx, self.inner.events.clone()));
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
        self.inner.body_limit
    }

    /// The largest binary job body of pool `name` (its `upload_limit`, or
    /// the `body_limit`).
    pub fn upload_limit(&self, name: &str) -> usize {
        let uploads = self
            .inner
            .uploads
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        uploads.get(name).copied().unwrap_or(self.inner.body_limit)
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

    /// A stream of every pool's events.
    pub fn subscribe(&self) -> broadcast::Receiver<PoolEvent> {
        self.inner.events.subscribe()
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

async fn forward(
    pool: Arc<str>,
    mut rx: broadcast::Receiver<Event>,
    tx: broadcast::Sender<PoolEvent>,
) {
    loop {
        match rx.recv().await {
            Ok(event) => {
                let closed = matches!(event, Event::Closed);
                // No subscriber is fine: the event is dropped.
                let _ = tx.send(PoolEvent {
                    pool: pool.clone(),
                    event,
                });
                if closed {
                    break;
                }
            }
            Err(broadcast::error::RecvError::Lagged(n)) => {
                tracing::warn!(target: "kennel_server", pool = &*pool, missed = n, "event forwarder fell behind");
            }
            Err(broadcast::error::RecvError::Closed) => break,
        }
    }
}
