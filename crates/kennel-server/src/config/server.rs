//! `[server]`: how the service listens and stops.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::error::Refusal;
use super::human::{HumanDuration, HumanSize, at_most_longest};
use super::runtime::RuntimeThreads;
pub(crate) use super::server_http::{Buckets, LogFormat};

/// The port the service listens on when none is given.
pub(crate) const DEFAULT_PORT: u16 = 7878;

/// The request body limit when none is given: 1 MiB.
pub(crate) const DEFAULT_BODY_LIMIT: u64 = 1024 * 1024;

/// The largest request body limit a config may set: 1 GiB (also the bound
/// of a pool's `max_reply`).
pub(crate) const MAX_BODY_LIMIT: u64 = 1024 * 1024 * 1024;

/// How long in-flight requests may finish at shutdown when no grace is given.
pub(crate) const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// `[server]`: how the service listens and stops.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub(crate) struct ServerConfig {
    /// `listen`: the address, `"127.0.0.1:7878"` by default. `"IP"` alone
    /// takes port 7878; `"localhost:PORT"` is 127.0.0.1.
    pub listen: String,
    /// `body_limit`: the largest request body (default 1 MiB); a larger one
    /// is answered 413.
    pub body_limit: HumanSize,
    /// `token_env`: the name of an environment variable that holds a bearer
    /// token. When set, every endpoint but the probes (`/livez`, `/readyz`,
    /// `/healthz`) asks for `Authorization: Bearer <token>`.
    pub token_env: Option<String>,
    /// `shutdown_grace`: how long in-flight requests may finish after
    /// SIGINT or SIGTERM before the pools close (default 10 s).
    pub shutdown_grace: HumanDuration,
    /// `allowed_hosts`: the `Host` names (or IP literals) requests may
    /// carry beside the loopback ones and the listen address (any IP
    /// literal when listening on every address); `"*"` allows any.
    pub allowed_hosts: Vec<String>,
    /// `allowed_origins`: the web origins (`"https://dash.example.com"`)
    /// a browser may make cross-site requests from; none by default.
    pub allowed_origins: Vec<String>,
    /// `header_timeout`: from the accept to the end of the first
    /// request's head (default 10 s); past it the connection closes.
    pub header_timeout: HumanDuration,
    /// `idle_timeout`: how long a kept-alive connection may wait for its
    /// next request (default 60 s).
    pub idle_timeout: HumanDuration,
    /// `body_timeout`: how long a request body may take to arrive, whole
    /// (default 30 s); past it the answer is 408.
    pub body_timeout: HumanDuration,
    /// `write_timeout`: how long an answer may wait for the client to read
    /// (default 30 s); past it the connection closes.
    pub write_timeout: HumanDuration,
    /// `max_connections`: connections served at once (default 10,000, and
    /// fewer when the file descriptor limit leaves less beside what the
    /// pools' workers need).
    pub max_connections: usize,
    /// `max_bodies`: request bodies read and parsed at once (default 16).
    pub max_bodies: usize,
    /// `access_log`: one INFO line per request (default off).
    pub access_log: bool,
    /// `log_format`: `"text"` (the default) or `"json"`, one object per
    /// line; `--log-format` overrides it.
    pub log_format: LogFormat,
    /// `histogram_buckets`: the upper bounds, in seconds, of every
    /// histogram's buckets (default: 1 ms to 5 min, finer from 0.5 s to 5 s).
    pub histogram_buckets: Option<Buckets>,
    /// `run_dir`: where `kennel serve` records each live worker process
    /// group (default `$XDG_RUNTIME_DIR/kennel/<port>`; docs/CONFIG.md,
    /// "`[server]`"); a relative path is from the working directory.
    pub run_dir: Option<PathBuf>,
    /// `metrics_public`: `GET /metrics` answers without the bearer token,
    /// so that a scraper (Prometheus, the HPA's metrics adapter) needs
    /// none (default false). The metrics name pools and counts, never a
    /// job's content.
    pub metrics_public: bool,
    /// `state_dir`: where asynchronous jobs are stored (default
    /// `$XDG_STATE_HOME/kennel/<port>`, else `~/.local/state/kennel/<port>`;
    /// a relative path is from the working directory). One server per
    /// directory.
    pub state_dir: Option<PathBuf>,
    /// `result_ttl`: how long an ended asynchronous job is kept (default
    /// 1 h).
    pub result_ttl: HumanDuration,
    /// `runtime_threads`: the threads of the service's own runtime,
    /// `"auto"` (half the CPUs, at least 1) by default.
    pub runtime_threads: RuntimeThreads,
    /// `allow_no_pools`: a reload may apply a file with no `[[pool]]`,
    /// taking every pool out (default off: such a file is refused, as an
    /// empty or half-written one would be).
    pub allow_no_pools: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: format!("127.0.0.1:{DEFAULT_PORT}"),
            body_limit: HumanSize(DEFAULT_BODY_LIMIT),
            token_env: None,
            shutdown_grace: HumanDuration(DEFAULT_SHUTDOWN_GRACE),
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            header_timeout: HumanDuration(crate::http::listen::DEFAULT_HEADER_TIMEOUT),
            idle_timeout: HumanDuration(crate::http::listen::DEFAULT_IDLE_TIMEOUT),
            body_timeout: HumanDuration(crate::http::body::DEFAULT_BODY_TIMEOUT),
            write_timeout: HumanDuration(crate::http::listen::DEFAULT_WRITE_TIMEOUT),
            max_connections: crate::http::limits::DEFAULT_MAX_CONNECTIONS,
            max_bodies: crate::http::body::DEFAULT_MAX_BODIES,
            access_log: false,
            log_format: LogFormat::Text,
            histogram_buckets: None,
            run_dir: None,
            metrics_public: false,
            state_dir: None,
            result_ttl: HumanDuration(std::time::Duration::from_secs(3600)),
            runtime_threads: RuntimeThreads::Auto,
            allow_no_pools: false,
        }
    }
}

impl ServerConfig {
    pub(crate) fn validate(&self) -> Result<(), Refusal> {
        parse_listen(&self.listen).map_err(|m| ("server.listen".to_owned(), m))?;
        let limit = self.body_limit.0;
        if limit == 0 || limit > MAX_BODY_LIMIT {
            return Err((
                "server.body_limit".into(),
                format!(
                    "{} is out of range (allowed: 1 byte to 1 GiB)",
                    self.body_limit
                ),
            ));
        }
        if let Some(name) = &self.token_env {
            super::pool::check_env_name(name).map_err(|m| ("server.token_env".to_owned(), m))?;
        }
        self.validate_http()?;
        at_most_longest(self.shutdown_grace)
            .map_err(|m| ("server.shutdown_grace".to_owned(), m))?;
        let ttl = self.result_ttl.0;
        if ttl < std::time::Duration::from_secs(1)
            || ttl > std::time::Duration::from_secs(30 * 86_400)
        {
            return Err((
                "server.result_ttl".into(),
                format!(
                    "{} is out of range (allowed: 1s to 30 days)",
                    self.result_ttl
                ),
            ));
        }
        Ok(())
    }

    /// Reads the bearer token from the variable named by `token_env`.
    ///
    /// # Errors
    ///
    /// A message naming `server.token_env` when the variable is not set or
    /// is empty.
    pub(crate) fn token(&self) -> Result<Option<String>, String> {
        let Some(name) = &self.token_env else {
            return Ok(None);
        };
        let state = match std::env::var(name) {
            Ok(v) if !v.is_empty() => return Ok(Some(v)),
            Ok(_) => "empty",
            Err(_) => "not set",
        };
        Err(format!(
            "`server.token_env`: the variable {name} is {state} (allowed: a variable that holds the token)"
        ))
    }
}

/// Where a server on `port` stores its asynchronous jobs when `state_dir`
/// is not set.
pub(crate) fn default_state_dir(port: u16) -> PathBuf {
    let base = match std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
            Some(home) => PathBuf::from(home).join(".local/state"),
            None => std::env::temp_dir(),
        },
    };
    base.join("kennel").join(port.to_string())
}

/// Parses a listen address: `IP:PORT`, `IP` (port 7878), `localhost[:PORT]`.
///
/// # Errors
///
/// A message with the allowed forms.
pub(crate) fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    let s = s.trim();
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, DEFAULT_PORT));
    }
    let localhost = IpAddr::V4(Ipv4Addr::LOCALHOST);
    if s == "localhost" {
        return Ok(SocketAddr::new(localhost, DEFAULT_PORT));
    }
    if let Some(port) = s.strip_prefix("localhost:")
        && let Ok(port) = port.parse::<u16>()
    {
        return Ok(SocketAddr::new(localhost, port));
    }
    Err(format!(
        "{s:?} is not an address (allowed: \"IP:PORT\" such as \"127.0.0.1:{DEFAULT_PORT}\" or \"[::1]:{DEFAULT_PORT}\", an IP alone for port {DEFAULT_PORT}, or \"localhost:PORT\")"
    ))
}
