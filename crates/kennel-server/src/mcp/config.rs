//! `[pool.mcp]`: how a JSON-RPC pool serves MCP sessions at `/mcp/{pool}`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::{HumanDuration, Refusal};

/// How a session's requests find a worker (`sessions`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum SessionKind {
    /// `"exclusive"`: a session holds one worker for its whole life (the
    /// default): whatever the server keeps per client stays with it.
    #[default]
    Exclusive,
    /// `"shared"`: each request goes to any free worker (servers that keep
    /// nothing per client).
    Shared,
}

/// `mcp = { … }` of a `[[pool]]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct McpConfig {
    /// `sessions` (default `"exclusive"`).
    #[serde(default)]
    pub sessions: SessionKind,
    /// `reuse_after_session`: an exclusive session's worker goes back to
    /// the pool when the session ends, instead of being replaced (default
    /// false: no state crosses from one client to the next).
    #[serde(default)]
    pub reuse_after_session: bool,
    /// `session_idle`: a session with no request in hand and no stream open
    /// for this long ends (default 60 s).
    #[serde(default = "default_session_idle")]
    pub session_idle: HumanDuration,
    /// `attach_wait`: how long an `initialize` of an exclusive session waits
    /// for a worker before it is answered 503 (default 5 s).
    #[serde(default = "default_attach_wait")]
    pub attach_wait: HumanDuration,
    /// `prime`: requests each worker is sent once at its warm-up, after
    /// the handshake, their answers dropped (default `["tools/list"]`): a
    /// session's first request finds code that has run (a JIT's, node's)
    /// even on a worker that has just replaced another. `[]` for none.
    #[serde(default = "default_prime")]
    pub prime: Vec<String>,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            sessions: SessionKind::default(),
            reuse_after_session: false,
            session_idle: default_session_idle(),
            attach_wait: default_attach_wait(),
            prime: default_prime(),
        }
    }
}

/// The longest `session_idle` and `attach_wait`.
const LONGEST: Duration = Duration::from_secs(24 * 3600);

impl McpConfig {
    /// The ranges of its durations.
    pub(crate) fn check(&self) -> Result<(), Refusal> {
        let (idle, attach) = (self.session_idle.0, self.attach_wait.0);
        if idle < Duration::from_secs(1) || idle > LONGEST {
            return Err((
                "mcp.session_idle".into(),
                format!("{} is out of range (allowed: 1s to 24h)", self.session_idle),
            ));
        }
        if attach > LONGEST {
            return Err((
                "mcp.attach_wait".into(),
                format!("{} is out of range (allowed: 0s to 24h)", self.attach_wait),
            ));
        }
        if let Some(i) = self
            .prime
            .iter()
            .position(|m| m.is_empty() || m.len() > 256)
        {
            return Err((
                format!("mcp.prime[{i}]"),
                "is not a method name (allowed: 1 to 256 bytes, such as \"tools/list\")".into(),
            ));
        }
        Ok(())
    }
}

fn default_session_idle() -> HumanDuration {
    HumanDuration(Duration::from_secs(60))
}

fn default_prime() -> Vec<String> {
    vec!["tools/list".to_owned()]
}

fn default_attach_wait() -> HumanDuration {
    HumanDuration(Duration::from_secs(5))
}
