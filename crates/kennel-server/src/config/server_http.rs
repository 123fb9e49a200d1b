//! The `[server]` keys of the HTTP layer's defences and of logging, and
//! their checks.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::error::Refusal;
use super::human::HumanDuration;
use super::server::ServerConfig;

/// The most connections `max_connections` may allow.
pub(crate) const MAX_CONNECTIONS: usize = 1_000_000;

/// The most bodies `max_bodies` may allow at once.
pub(crate) const MAX_BODIES: usize = 10_000;

/// The most buckets a histogram may have.
pub(crate) const MAX_BUCKETS: usize = 64;

/// How log lines are written (`log_format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum LogFormat {
    /// `"text"`: one human line per event (the default).
    #[default]
    Text,
    /// `"json"`: one JSON object per line, fields at the top level.
    Json,
}

/// Histogram bucket bounds, in seconds (`histogram_buckets`): 1 to 64
/// finite values above 0, each above the one before.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(transparent)]
pub(crate) struct Buckets(pub Vec<f64>);

// The values are checked finite: equality is total on them.
impl Eq for Buckets {}

impl Buckets {
    fn check(&self) -> Result<(), String> {
        let b = &self.0;
        if b.is_empty() || b.len() > MAX_BUCKETS {
            return Err(format!(
                "{} bound(s) (allowed: 1 to {MAX_BUCKETS} bounds in seconds, such as [0.5, 1, 2, 5])",
                b.len()
            ));
        }
        if let Some(v) = b.iter().find(|v| !v.is_finite() || **v <= 0.0) {
            return Err(format!(
                "{v} is not a bound (allowed: seconds above 0, such as 0.25)"
            ));
        }
        if let Some(w) = b.windows(2).find(|w| w[1] <= w[0]) {
            return Err(format!(
                "{} comes after {} (allowed: bounds in increasing order)",
                w[1], w[0]
            ));
        }
        Ok(())
    }
}

impl ServerConfig {
    pub(crate) fn validate_http(&self) -> Result<(), Refusal> {
        for (key, d) in [
            ("header_timeout", self.header_timeout),
            ("idle_timeout", self.idle_timeout),
            ("body_timeout", self.body_timeout),
            ("write_timeout", self.write_timeout),
        ] {
            check_timeout(d).map_err(|m| (format!("server.{key}"), m))?;
        }
        check_count(self.max_connections, MAX_CONNECTIONS)
            .map_err(|m| ("server.max_connections".to_owned(), m))?;
        check_count(self.max_bodies, MAX_BODIES)
            .map_err(|m| ("server.max_bodies".to_owned(), m))?;
        for (i, host) in self.allowed_hosts.iter().enumerate() {
            if host.is_empty() || host.contains(['/', ' ', ',']) || host.contains("://") {
                return Err((
                    format!("server.allowed_hosts[{i}]"),
                    format!(
                        "{host:?} is not a host (allowed: a name such as \"kennel.internal\", an IP literal, or \"*\" for any)"
                    ),
                ));
            }
        }
        for (i, origin) in self.allowed_origins.iter().enumerate() {
            let rest = origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"));
            if rest.is_none_or(|r| r.is_empty() || r.trim_end_matches('/').contains('/')) {
                return Err((
                    format!("server.allowed_origins[{i}]"),
                    format!(
                        "{origin:?} is not an origin (allowed: \"http://HOST[:PORT]\" or \"https://HOST[:PORT]\", without a path)"
                    ),
                ));
            }
        }
        if let Some(b) = &self.histogram_buckets {
            b.check()
                .map_err(|m| ("server.histogram_buckets".to_owned(), m))?;
        }
        Ok(())
    }
}

fn check_timeout(d: HumanDuration) -> Result<(), String> {
    if d.0 < Duration::from_millis(1) || d.0 > kennel::MAX_DURATION {
        return Err(format!(
            "{d} is out of range (allowed: 1ms to {})",
            HumanDuration(kennel::MAX_DURATION)
        ));
    }
    Ok(())
}

fn check_count(n: usize, max: usize) -> Result<(), String> {
    if n == 0 || n > max {
        return Err(format!("{n} is out of range (allowed: 1 to {max})"));
    }
    Ok(())
}
