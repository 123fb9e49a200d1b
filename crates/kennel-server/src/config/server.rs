//! `[server]`: how the service listens and stops.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::error::Refusal;
use super::human::{HumanDuration, HumanSize};

/// The port the service listens on when none is given.
pub const DEFAULT_PORT: u16 = 7878;

/// The request body limit when none is given: 1 MiB.
pub const DEFAULT_BODY_LIMIT: u64 = 1024 * 1024;

/// The largest request body limit a config may set: 1 GiB (also the bound
/// of a pool's `max_reply`).
pub const MAX_BODY_LIMIT: u64 = 1024 * 1024 * 1024;

/// How long in-flight requests may finish at shutdown when no grace is given.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// `[server]`: how the service listens and stops.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct ServerConfig {
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
    /// SIGINT, SIGTERM or SIGHUP before the pools close (default 10 s).
    pub shutdown_grace: HumanDuration,
    /// `run_dir`: where `kennel serve` records each live worker process
    /// group, and at start kills the groups a previous run left (default:
    /// `$XDG_RUNTIME_DIR/kennel/<port>`, else `/tmp/kennel-<uid>/<port>`).
    /// A relative path is taken from the server's working directory.
    pub run_dir: Option<PathBuf>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: format!("127.0.0.1:{DEFAULT_PORT}"),
            body_limit: HumanSize(DEFAULT_BODY_LIMIT),
            token_env: None,
            shutdown_grace: HumanDuration(DEFAULT_SHUTDOWN_GRACE),
            run_dir: None,
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
        if self.shutdown_grace.0 > kennel::MAX_DURATION {
            return Err((
                "server.shutdown_grace".into(),
                format!(
                    "{} is out of range (allowed: 0 to {})",
                    self.shutdown_grace,
                    HumanDuration(kennel::MAX_DURATION)
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
    pub fn token(&self) -> Result<Option<String>, String> {
        let Some(name) = &self.token_env else {
            return Ok(None);
        };
        match std::env::var(name) {
            Ok(v) if !v.is_empty() => Ok(Some(v)),
            Ok(_) => Err(format!(
                "`server.token_env`: the variable {name} is empty (allowed: a variable that holds the token)"
            )),
            Err(_) => Err(format!(
                "`server.token_env`: the variable {name} is not set (allowed: a variable that holds the token)"
            )),
        }
    }
}

/// Parses a listen address: `IP:PORT`, `IP` (port 7878), `localhost[:PORT]`.
///
/// # Errors
///
/// A message with the allowed forms.
pub fn parse_listen(s: &str) -> Result<SocketAddr, String> {
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
