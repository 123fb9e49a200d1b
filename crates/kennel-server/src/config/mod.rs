//! The TOML configuration: `[server]` and `[[pool]]` entries.
//!
//! A `[[pool]]` entry takes kennel's own [`kennel::Options`] at its keys
//! (`job_timeout`, `max_waiting`, …) beside its own; the options are not
//! restated here. Reading a file: each pool's keys and options are read at
//! their key (`keys.rs`); serde refuses unknown keys, values of the wrong
//! type and unknown names (`deny_unknown_fields`, kebab-case enums); a last
//! pass checks ranges (kennel's [`Options::validate`](kennel::Options::validate)
//! for the options) and the links between keys. Every refusal is a
//! [`ConfigError`] that names the file, the key (`pool[1].job_timeout`) and
//! what is allowed. docs/CONFIG.md is the reference, with a complete
//! example.

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

mod error;
mod human;
mod keyed;
mod keys;
mod learning;
mod policy;
mod pool;
pub(crate) mod protocol;
mod reconfig;
mod runtime;
mod server;
mod server_http;
mod table;
pub(crate) mod tenant;
mod threads;

#[cfg(test)]
mod tests;

pub use self::error::ConfigError;
pub(crate) use self::error::Refusal;
pub(crate) use self::human::HumanDuration;
pub(crate) use self::keyed::KeyPattern;
pub(crate) use self::policy::{EvictionConfig, SizingConfig};
pub(crate) use self::pool::{PoolConfig, ReadyKind, SELF_EXE, StartupKind, check_env_name};
pub(crate) use self::reconfig::{LIVE_POLICIES, ReconfigBody, kind_of};
pub(crate) use self::runtime::RuntimeThreads;
pub(crate) use self::server::{
    DEFAULT_BODY_LIMIT, LogFormat, ServerConfig, default_state_dir, parse_listen,
};
pub(crate) use self::threads::ThreadsConfig;

use self::error::{hinted, join, line_col, locate, path_string};

/// The name a config writes for `value`, a unit variant (`"on-demand"`).
pub(crate) fn written_name(value: &impl Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        _ => String::new(),
    }
}

/// The whole configuration: the server and its pools.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Config {
    /// `[server]`.
    #[serde(default, deserialize_with = "table::table")]
    pub(crate) server: ServerConfig,
    /// `[[pool]]` entries, in file order.
    #[serde(default, rename = "pool")]
    pub(crate) pools: Vec<PoolConfig>,
    /// `[[tenant]]` entries: the callers that share the pools.
    #[serde(default, rename = "tenant")]
    pub(crate) tenants: Vec<tenant::TenantConfig>,
}

/// Where a config came from, for error messages and relative paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The name used in messages.
    pub name: String,
    /// The directory that relative `cwd` values start from.
    pub dir: PathBuf,
}

impl Source {
    /// A file on disk.
    pub fn file(path: &Path) -> Self {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        Self {
            name: path.display().to_string(),
            dir,
        }
    }

    /// Text that is not a file (a test, the built-in config), with relative
    /// paths from the current directory.
    pub fn inline(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            dir: PathBuf::from("."),
        }
    }
}

impl Config {
    /// Reads and checks a config file.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the file, the key and what is allowed, for
    /// a file that cannot be read, an unknown key, a value of the wrong type
    /// or out of range.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let source = Source::file(path);
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::whole(&source.name, format!("cannot read the file: {e}")))?;
        Self::parse(&text, &source)
    }

    /// Parses and checks config text. Relative `cwd` values are resolved
    /// against `source.dir`.
    ///
    /// # Errors
    ///
    /// As [`load`](Self::load).
    pub fn parse(text: &str, source: &Source) -> Result<Self, ConfigError> {
        let err = |key: String, message: String, line| ConfigError {
            file: source.name.clone(),
            message: hinted(&key, message),
            key,
            line,
        };
        let de = toml::Deserializer::parse(text).map_err(|e| {
            let line = e.span().map(|s| line_col(text, s.start));
            err(String::new(), e.message().trim().to_owned(), line)
        })?;
        keys::check_pools(text).map_err(|l| {
            let line = Some(line_col(text, l.offset));
            err(l.key, l.message, line)
        })?;
        let mut config: Self = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = path_string(e.path());
            let inner = e.into_inner();
            let line = inner
                .span()
                .map(|s| line_col(text, s.start))
                .or_else(|| locate(text, &path));
            err(path, inner.message().trim().to_owned(), line)
        })?;
        config.validate(source).map_err(|(key, message)| {
            let line = locate(text, &key);
            err(key, message, line)
        })?;
        Ok(config)
    }

    /// The config used with no file: one demo pool whose workers are this
    /// binary in its `worker demo` mode (`kennel worker demo`).
    pub fn demo() -> Self {
        Self {
            server: ServerConfig::default(),
            pools: vec![crate::demo::pool_config()],
            tenants: Vec::new(),
        }
    }

    fn validate(&mut self, source: &Source) -> Result<(), Refusal> {
        self.server.validate()?;
        let shares = self.validate_tenants()?;
        // Variables that hold tokens never reach a worker.
        let secret: Vec<&String> = (self.server.token_env.iter())
            .chain(self.tenants.iter().filter_map(|t| t.token_env.as_ref()))
            .collect();
        for pool in &mut self.pools {
            pool.options.tenants.clone_from(&shares);
            for name in &secret {
                if !pool.env_remove.contains(name) {
                    pool.env_remove.push((*name).clone());
                }
            }
        }
        let mut names = HashSet::new();
        for (i, pool) in self.pools.iter_mut().enumerate() {
            let at = |k: &str| join(&format!("pool[{i}]"), k);
            pool.validate(source).map_err(|(k, m)| (at(&k), m))?;
            if let Some(token) = &self.server.token_env {
                let passed = if pool.env.contains_key(token) {
                    Some(format!("env.{token}"))
                } else if pool.env_keep.as_ref().is_some_and(|k| k.contains(token)) {
                    Some("env_keep".to_owned())
                } else {
                    None
                };
                if let Some(key) = passed {
                    return Err((
                        at(&key),
                        format!(
                            "{token} is the server's `token_env`: the bearer token never goes to a worker (allowed: any other variable)"
                        ),
                    ));
                }
                if !pool.env_remove.contains(token) {
                    pool.env_remove.push(token.clone());
                }
            }
            if !names.insert(pool.name.clone()) {
                return Err((
                    at("name"),
                    format!(
                        "{:?} is already the name of another pool (allowed: a name no other pool has)",
                        pool.name
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Checks the `[[tenant]]` entries; gives each one's share of a pool.
    fn validate_tenants(&self) -> Result<BTreeMap<kennel::Tenant, kennel::TenantShare>, Refusal> {
        if self.tenants.len() > tenant::MAX_TENANTS {
            return Err((
                "tenant".into(),
                format!(
                    "{} tenants (allowed: at most {})",
                    self.tenants.len(),
                    tenant::MAX_TENANTS
                ),
            ));
        }
        let mut shares = BTreeMap::new();
        for (i, t) in self.tenants.iter().enumerate() {
            let at = |k: &str| join(&format!("tenant[{i}]"), k);
            t.validate().map_err(|(k, m)| (at(&k), m))?;
            if shares.insert(t.name.clone(), t.share()).is_some() {
                return Err((
                    at("name"),
                    format!(
                        "{:?} is already the name of another tenant (allowed: a name no other tenant has)",
                        t.name.as_str()
                    ),
                ));
            }
        }
        Ok(shares)
    }

    /// The listen address.
    ///
    /// # Panics
    ///
    /// Never for a config from [`load`](Self::load) or
    /// [`parse`](Self::parse), which checked it.
    pub fn listen(&self) -> SocketAddr {
        parse_listen(&self.server.listen).expect("listen address was checked")
    }
}
