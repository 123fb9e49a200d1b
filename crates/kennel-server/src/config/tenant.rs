//! `[[tenant]]`: the callers that share the service, each with its own
//! tokens, its weight and limits in every pool, and the routes it may use.

use std::path::PathBuf;

use kennel::{MAX_WEIGHT, Tenant, TenantShare};
use serde::{Deserialize, Serialize};

use super::error::Refusal;

/// The most tenants a config may name (each is a label of the metrics).
pub(crate) const MAX_TENANTS: usize = 256;

/// The routes a tenant may use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Routes {
    /// The job routes (`POST` jobs, asynchronous jobs, `/mcp/{pool}`) and
    /// the reads of pools and their stats.
    #[default]
    Jobs,
    /// Every route, as the service's own token: also configs, reloads and
    /// workers' actions.
    All,
}

/// One `[[tenant]]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub(crate) struct TenantConfig {
    /// `name`: the tenant's name (letters, digits, `.`, `_`, `-`).
    pub(crate) name: Tenant,
    /// `token_env`: a variable that holds the tenant's bearer tokens, one
    /// or more, apart by white space.
    #[serde(default)]
    pub(crate) token_env: Option<String>,
    /// `token_file`: a file that holds them (one per line), read at start
    /// and at each reload.
    #[serde(default)]
    pub(crate) token_file: Option<PathBuf>,
    /// `weight`: its share of each pool's workers while they are scarce
    /// (default 1).
    #[serde(default = "one")]
    pub(crate) weight: u32,
    /// `max_queued`: the most of its jobs waiting in one pool (none: the
    /// pool's own bound).
    #[serde(default)]
    pub(crate) max_queued: Option<usize>,
    /// `max_running`: the most of its jobs holding workers of one pool.
    #[serde(default)]
    pub(crate) max_running: Option<usize>,
    /// `max_in_flight`: the most of its jobs in flight at once across every
    /// pool, waiting or running.
    #[serde(default)]
    pub(crate) max_in_flight: Option<usize>,
    /// `routes`: `"jobs"` (the default) or `"all"`.
    #[serde(default)]
    pub(crate) routes: Routes,
}

fn one() -> u32 {
    1
}

impl TenantConfig {
    /// Its share of a pool.
    pub(crate) fn share(&self) -> TenantShare {
        let mut share = TenantShare::weight(self.weight);
        share.max_queued = self.max_queued;
        share.max_running = self.max_running;
        share
    }

    pub(crate) fn validate(&self) -> Result<(), Refusal> {
        let refuse = |key: &str, m: String| Err((key.to_owned(), m));
        match (&self.token_env, &self.token_file) {
            (None, None) | (Some(_), Some(_)) => {
                return refuse(
                    "token_env",
                    "a tenant has its tokens in `token_env` or in `token_file`, one of them (allowed: exactly one)".into(),
                );
            }
            (Some(name), None) => {
                super::pool::check_env_name(name).or_else(|m| refuse("token_env", m))?;
            }
            (None, Some(_)) => {}
        }
        if !(1..=MAX_WEIGHT).contains(&self.weight) {
            return refuse(
                "weight",
                format!(
                    "{} is out of range (allowed: 1 to {MAX_WEIGHT})",
                    self.weight
                ),
            );
        }
        if self.max_in_flight == Some(0) {
            return refuse(
                "max_in_flight",
                "0 would refuse every job (allowed: 1 or more, or leave it out)".into(),
            );
        }
        if self.max_running == Some(0) {
            return refuse(
                "max_running",
                "0 would run none of its jobs (allowed: 1 or more, or leave it out)".into(),
            );
        }
        Ok(())
    }

    /// Reads its tokens.
    ///
    /// # Errors
    ///
    /// What is wrong: the variable unset or empty, the file unreadable or
    /// empty.
    pub(crate) fn tokens(&self) -> Result<Vec<String>, String> {
        let (text, from) = match (&self.token_env, &self.token_file) {
            (Some(name), _) => (
                std::env::var(name).unwrap_or_default(),
                format!("the variable {name}"),
            ),
            (None, Some(path)) => (
                std::fs::read_to_string(path).map_err(|e| {
                    format!(
                        "tenant {}: cannot read `token_file` {}: {e}",
                        self.name,
                        path.display()
                    )
                })?,
                format!("the file {}", path.display()),
            ),
            (None, None) => (String::new(), "nowhere".to_owned()),
        };
        let tokens: Vec<String> = text.split_whitespace().map(str::to_owned).collect();
        if tokens.is_empty() {
            return Err(format!(
                "tenant {}: {from} holds no token (allowed: one or more tokens, apart by white space)",
                self.name
            ));
        }
        Ok(tokens)
    }
}
