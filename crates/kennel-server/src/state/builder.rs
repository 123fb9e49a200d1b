//! [`AppStateBuilder`] and [`StartError`]: how an [`AppState`] is made,
//! and how starting its pools fails.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::watch;

use super::{AppState, Inner, Pools};
use crate::config::DEFAULT_BODY_LIMIT;
use crate::events::EventHub;
use crate::http::body::{DEFAULT_BODY_TIMEOUT, DEFAULT_MAX_BODIES};
use crate::http::{BodyGate, HostPolicy};
use crate::rundir::RunDir;

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
    state_dir: Option<(std::path::PathBuf, Duration)>,
    metrics_public: bool,
    callers: crate::tenants::Callers,
}

impl AppStateBuilder {
    /// Lets `GET /metrics` answer without the bearer token (for scrapers).
    pub fn metrics_public(mut self, public: bool) -> Self {
        self.metrics_public = public;
        self
    }

    /// Takes asynchronous jobs (`Prefer: respond-async`), stored in `dir`
    /// (made on the first one), each kept `result_ttl` after it ends.
    /// Without it such a job is answered 500 `internal`.
    pub fn state_dir(mut self, dir: impl Into<std::path::PathBuf>, result_ttl: Duration) -> Self {
        self.state_dir = Some((dir.into(), result_ttl));
        self
    }

    /// Records each worker process group of the pools built by
    /// [`AppState::start_pools`] in `dir`, for the next server to reap if
    /// this one dies without closing them.
    pub(crate) fn run_dir(mut self, dir: Arc<RunDir>) -> Self {
        self.run_dir = Some(dir);
        self
    }

    /// The tenants' callers, read from a config with
    /// [`Callers::of`](crate::tenants::Callers::of); without them, the
    /// operator's token alone.
    pub(crate) fn callers(mut self, callers: crate::tenants::Callers) -> Self {
        self.callers = callers;
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
                pools: Pools::default(),
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
                reload: tokio::sync::Mutex::new(None),
                shutdown,
                reconfig: Mutex::new(()),
                run_dir: self.run_dir,
                async_jobs: match self.state_dir {
                    Some((dir, ttl)) => crate::async_jobs::AsyncJobs::new(Some(dir), ttl),
                    None => crate::async_jobs::AsyncJobs::new(None, Duration::from_secs(3600)),
                },
                mcp: crate::mcp::Sessions::default(),
                metrics_public: self.metrics_public,
                callers: std::sync::RwLock::new(Arc::new(self.callers)),
                flights: Arc::default(),
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
