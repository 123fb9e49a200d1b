//! Reloading the config file (`SIGHUP`, `POST /reload`), ADR 0023: the
//! file is read and checked as at start; a file that does not pass is
//! refused with the same error and the running config stays. Otherwise
//! its difference from the file read last is applied to the live pools:
//!
//! - a new `[[pool]]` is started;
//! - a pool no longer in the file is taken out and closed (its jobs get
//!   its `job_grace`);
//! - a pool whose sizing, eviction, group or options changed is
//!   reconfigured live, as `PUT /pools/{name}/config` does;
//! - a pool whose workers start differently (`argv`, `env`, `cwd`,
//!   `startup`, `ready`, …) is replaced: a new pool under the name, the old
//!   one closed;
//! - a changed `[server]` is not applied (the listener, token and limits
//!   are set at start): its keys are named in a warning.

use std::path::PathBuf;

use axum::extract::State;
use serde::Serialize;
use serde_json::Value;

use crate::config::{Config, ConfigError, PoolConfig, ReconfigBody};
use crate::state::AppState;

/// The file a running server reloads, and what it read last.
#[derive(Debug, Clone)]
pub struct ReloadSource {
    /// The config file.
    pub path: PathBuf,
    /// What `@kennel` stands for.
    pub self_exe: PathBuf,
    /// The config read last (at start or at the last reload).
    pub current: Config,
}

/// What a reload did, pool by pool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Reloaded {
    /// Pools started.
    pub added: Vec<String>,
    /// Pools taken out and closed.
    pub removed: Vec<String>,
    /// Pools changed live, with the actions taken.
    pub reconfigured: Vec<(String, Vec<String>)>,
    /// Pools replaced by a new pool of the same name.
    pub replaced: Vec<String>,
    /// `[server]` keys that changed and take effect at the next start.
    pub server_keys_not_applied: Vec<String>,
    /// Pools that could not be changed, with why (the rest was applied).
    pub failed: Vec<(String, String)>,
}

/// Why a reload did nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReloadError {
    /// The server runs the built-in demo config: there is no file.
    NoFile,
    /// The file does not pass the checks of a start.
    Config(ConfigError),
}

impl std::fmt::Display for ReloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoFile => f.write_str(
                "the server runs the built-in demo config: there is no file to reload (start it with --config FILE)",
            ),
            Self::Config(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ReloadError {}

/// The keys of a `[[pool]]` that say how its workers start: a change of
/// one replaces the pool.
fn starts_differently(old: &PoolConfig, new: &PoolConfig) -> bool {
    old.argv != new.argv
        || old.env != new.env
        || old.env_clear != new.env_clear
        || old.env_keep != new.env_keep
        || old.env_remove != new.env_remove
        || old.cwd != new.cwd
        || old.startup != new.startup
        || old.ready != new.ready
        || old.max_reply != new.max_reply
        || old.worker_close_grace != new.worker_close_grace
}

/// The `[server]` keys whose values differ.
fn server_keys_changed(old: &Config, new: &Config) -> Vec<String> {
    let (Ok(Value::Object(a)), Ok(Value::Object(b))) = (
        serde_json::to_value(&old.server),
        serde_json::to_value(&new.server),
    ) else {
        return Vec::new();
    };
    b.iter()
        .filter(|(k, v)| a.get(*k) != Some(v))
        .map(|(k, _)| format!("server.{k}"))
        .collect()
}

impl AppState {
    /// Makes `path` the file [`reload`](Self::reload) reads, `current` what
    /// was read from it at start.
    pub fn reload_from(&self, path: PathBuf, self_exe: PathBuf, current: Config) {
        *self.reload_source() = Some(ReloadSource {
            path,
            self_exe,
            current,
        });
    }

    /// Reads the config file again and applies what changed (see the
    /// module). One reload at a time.
    ///
    /// # Errors
    ///
    /// [`ReloadError::NoFile`] without a file; [`ReloadError::Config`]
    /// for a file that a start would refuse: nothing changes.
    ///
    /// # Panics
    ///
    /// When called outside a tokio runtime.
    pub fn reload(&self) -> Result<Reloaded, ReloadError> {
        let mut source = self.reload_source();
        let Some(source) = source.as_mut() else {
            return Err(ReloadError::NoFile);
        };
        let new = Config::load(&source.path).map_err(ReloadError::Config)?;
        let mut done = Reloaded {
            server_keys_not_applied: server_keys_changed(&source.current, &new),
            ..Reloaded::default()
        };
        for old in &source.current.pools {
            if !new.pools.iter().any(|p| p.name == old.name) {
                self.close_in_background(&old.name);
                done.removed.push(old.name.clone());
            }
        }
        for pool in &new.pools {
            let name = pool.name.clone();
            match source.current.pools.iter().find(|p| p.name == pool.name) {
                None => match self.start_pool(pool, &source.self_exe) {
                    Ok(()) => done.added.push(name),
                    Err(e) => done.failed.push((name, e.to_string())),
                },
                Some(old) if old == pool => {}
                Some(old) if starts_differently(old, pool) => {
                    self.close_in_background(&pool.name);
                    match self.start_pool(pool, &source.self_exe) {
                        Ok(()) => done.replaced.push(name),
                        Err(e) => done.failed.push((name, e.to_string())),
                    }
                }
                Some(old) => match self.reconfigure_from(old, pool) {
                    Ok(actions) => done.reconfigured.push((name, actions)),
                    Err(e) => done.failed.push((name, e)),
                },
            }
        }
        source.current = new;
        Ok(done)
    }

    /// Changes a live pool from `old` to `new` (no key of how it starts
    /// changed), as `PUT /pools/{name}/config` would.
    fn reconfigure_from(&self, old: &PoolConfig, new: &PoolConfig) -> Result<Vec<String>, String> {
        let body = ReconfigBody {
            sizing: (old.sizing != new.sizing).then(|| {
                new.sizing.unwrap_or(crate::config::SizingConfig::Fixed {
                    workers: crate::pools::DEFAULT_WORKERS,
                })
            }),
            eviction: (old.eviction != new.eviction).then_some(new.eviction),
            group: (old.group != new.group).then(|| new.group.clone()),
            options: new.options.clone(),
        };
        let _one_at_a_time = self.reconfig_lock();
        let actions = self
            .reconfigure_pool(&new.name, &body)
            .map_err(|e| e.message())?;
        Ok(actions.iter().map(ToString::to_string).collect())
    }

    /// Takes the pool `name` out now and closes it on a task of its own.
    fn close_in_background(&self, name: &str) {
        if let Ok(pool) = self.registry().take(name) {
            self.forget_pool(name);
            tokio::spawn(async move { pool.close().await });
        }
    }
}

/// `POST /reload`: reads the config file again and applies what changed: 200 with what
/// was done, 400 `bad-config` (the running config is kept) with the error
/// a start would give.
#[utoipa::path(
    post,
    path = "/reload",
    tag = "operators",
    responses(
        (status = 200, description = "what was done: `added`, `removed`, `reconfigured` (with the actions), `replaced`, `server_keys_not_applied`, `failed`", content_type = "application/json"),
        (status = 400, description = "the file does not pass the checks of a start, or there is no file (`bad-config`, with the error a start prints); nothing changed", body = crate::ops::openapi::ErrorBody),
    )
)]
pub(crate) async fn route(
    State(state): State<AppState>,
) -> Result<axum::Json<Value>, crate::ApiError> {
    match state.reload() {
        Ok(done) => {
            tracing::info!(target: "kennel_server", ?done, "config reloaded (POST /reload)");
            Ok(axum::Json(serde_json::to_value(done).unwrap_or_default()))
        }
        Err(e) => {
            tracing::error!(target: "kennel_server", error = %e, "reload refused; the running config is kept");
            Err(crate::ApiError::BadConfig {
                message: e.to_string(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_argv_replaces_a_new_sizing_does_not() {
        let old = PoolConfig::new("p", ["a"]);
        let mut argv = old.clone();
        argv.argv = vec!["b".into()];
        assert!(starts_differently(&old, &argv));
        let mut sized = old.clone();
        sized.sizing = Some(crate::config::SizingConfig::Fixed { workers: 3 });
        sized.options.job_timeout = Some(std::time::Duration::from_secs(1));
        assert!(!starts_differently(&old, &sized));
    }
}
