//! Reloading the config file (`SIGHUP`, `POST /reload`), ADR 0023: the
//! file is read once it has settled ([`read`]) and checked as at start
//! (refused, and the running config kept, when it does not pass or has no
//! `[[pool]]` without `allow_no_pools`); then each pool's entry is compared
//! with the one it runs ([`diff`]) and the pool is added, removed,
//! reconfigured in place or replaced, as the table in docs/SERVICE.md,
//! "Reloading the config", says. A changed `[server]` is not applied.

mod diff;
mod read;

use std::path::{Path, PathBuf};

use axum::extract::State;
use serde_json::Value;

use crate::config::{Config, ConfigError, PoolConfig, ReconfigBody};
use crate::state::{AppState, PoolEntry, ReloadSource};

pub(crate) use self::diff::{PoolChange, Reloaded};

/// Why a reload did nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReloadError {
    /// The server runs the built-in demo config: there is no file.
    NoFile,
    /// The file does not pass the checks of a start, has no pool, or kept
    /// changing while it was read.
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

impl AppState {
    /// Makes `path` the file [`reload`](Self::reload) reads, `current` what
    /// was read from it at start.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits for a reload under way to end.
    pub(crate) async fn reload_from(&self, path: PathBuf, self_exe: PathBuf, current: &Config) {
        *self.reload_source().await = Some(ReloadSource {
            path,
            self_exe,
            server: current.server.clone(),
        });
    }

    /// Reads the config file again once it has settled and applies what
    /// changed (see the module). One reload at a time.
    ///
    /// # Errors
    ///
    /// [`ReloadError::NoFile`] without a file; [`ReloadError::Config`]
    /// for a file that a start would refuse, that has no pool (unless it
    /// allows it), or that kept changing: nothing changes.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a drop while a new pool's queue connects leaves the
    /// pools applied so far, and the `[server]` part of the file read last.
    ///
    /// # Panics
    ///
    /// When called outside a tokio runtime.
    pub(crate) async fn reload(&self) -> Result<Reloaded, ReloadError> {
        let mut source = self.reload_source().await;
        let Some(source) = source.as_mut() else {
            return Err(ReloadError::NoFile);
        };
        let new = read::read_settled(&source.path)
            .await
            .map_err(ReloadError::Config)?;
        if new.pools.is_empty() && !new.server.allow_no_pools {
            return Err(ReloadError::Config(ConfigError::whole(
                source.path.display().to_string(),
                "the file has no [[pool]]: applying it would take every pool out (allowed: at least one [[pool]], or `allow_no_pools = true` under [server])",
            )));
        }
        // The tenants' tokens, read again (weights and limits reach the
        // pools with their options).
        self.set_tenants(&new).map_err(|m| {
            ReloadError::Config(ConfigError::whole(source.path.display().to_string(), m))
        })?;
        let mut done = Reloaded {
            server_keys_not_applied: diff::changed_keys(
                &source.server,
                &new.server,
                &Default::default(),
            )
            .unwrap_or_default()
            .into_iter()
            .map(|k| format!("server.{k}"))
            .collect(),
            ..Reloaded::default()
        };
        // The pools built from a file, with the entry each runs.
        let running: Vec<(String, PoolConfig)> = self
            .pools()
            .lock()
            .iter()
            .filter_map(|(name, e)| Some((name.clone(), e.config.clone()?)))
            .collect();
        for (name, _) in &running {
            if !new.pools.iter().any(|p| &p.name == name) {
                let removed = self.pools().lock().remove(name);
                if let Some(entry) = removed {
                    tokio::spawn(entry.close());
                }
                done.pools.insert(name.clone(), PoolChange::Removed);
            }
        }
        for pool in &new.pools {
            let old = running
                .iter()
                .find(|(n, _)| *n == pool.name)
                .map(|(_, c)| c);
            let change = match old {
                Some(old) if old == pool => continue,
                Some(old) => match diff::replace_keys(old, pool) {
                    keys if keys.is_empty() => self.reconfigure_from(old, pool),
                    keys => self.replace(pool, &source.self_exe, keys).await,
                },
                None if self.pools().get(&pool.name).is_ok() => {
                    // Added by hand, not from a file: replaced by the file's.
                    self.replace(pool, &source.self_exe, Vec::new()).await
                }
                None => self.add(pool, &source.self_exe).await,
            };
            done.pools.insert(pool.name.clone(), change);
        }
        source.server = new.server;
        // The stored jobs of a pool taken out fail; of a new one, run.
        self.async_jobs().wake();
        Ok(done)
    }

    /// Builds the record of `pool` with its queue connected.
    async fn build_ready(&self, pool: &PoolConfig, self_exe: &Path) -> Result<PoolEntry, String> {
        let mut entry = self
            .build_entry(pool, self_exe)
            .map_err(|e| e.to_string())?;
        match self
            .connect_queue(pool, entry.pool.clone(), entry.watch.clone())
            .await
        {
            Ok(queue) => entry.queue = queue,
            Err((key, message)) => {
                tokio::spawn(entry.close());
                return Err(format!("`queue{key}`: {message}"));
            }
        }
        Ok(entry)
    }

    /// Starts a new pool.
    async fn add(&self, pool: &PoolConfig, self_exe: &Path) -> PoolChange {
        match self.build_ready(pool, self_exe).await {
            Ok(entry) => match self.pools().insert(entry) {
                Ok(()) => PoolChange::Added,
                Err(e) => PoolChange::Refused { why: e.to_string() },
            },
            Err(why) => PoolChange::Refused { why },
        }
    }

    /// Builds the new pool, puts it under the name in one step, and closes
    /// the old one on a task of its own.
    async fn replace(&self, pool: &PoolConfig, self_exe: &Path, keys: Vec<String>) -> PoolChange {
        match self.build_ready(pool, self_exe).await {
            Ok(entry) => {
                let old = self.pools().lock().insert(pool.name.clone(), entry);
                if let Some(old) = old {
                    tokio::spawn(old.close());
                }
                PoolChange::Replaced { keys }
            }
            Err(why) => PoolChange::Refused { why },
        }
    }

    /// Changes a live pool from `old` to `new` (only live keys changed), as
    /// `PUT /pools/{name}/config` would, and records `new` as applied.
    fn reconfigure_from(&self, old: &PoolConfig, new: &PoolConfig) -> PoolChange {
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
        match self.reconfigure_pool(&new.name, &body) {
            Ok(actions) => {
                self.pools().with(&new.name, |e| {
                    if let Some(queue) = &e.queue {
                        queue.set_key_rules(crate::job_key::KeyRules::of(new));
                    }
                    e.config = Some(new.clone());
                });
                PoolChange::Reconfigured {
                    actions: actions.iter().map(ToString::to_string).collect(),
                }
            }
            Err(e) => PoolChange::Refused { why: e.to_string() },
        }
    }
}

/// `POST /reload`: reads the config file again and applies what changed:
/// 200 with what was done to each pool, 400 `bad-config` (the running
/// config is kept) with the error a start would give.
#[utoipa::path(
    post,
    path = "/reload",
    tag = "operators",
    responses(
        (status = 200, description = "what was done, by pool: `{\"pools\": {\"<name>\": {\"done\": \"added\" | \"removed\" | \"replaced\" (with `keys`) | \"reconfigured\" (with `actions`) | \"refused\" (with `why`)}}, \"server_keys_not_applied\": [...]}`; pools that did not change are not named", content_type = "application/json"),
        (status = 400, description = "the file does not pass the checks of a start, has no pool, kept changing, or there is no file (`bad-config`, with the error a start prints); nothing changed", body = crate::ops::openapi::ErrorBody),
    )
)]
pub(crate) async fn route(
    State(state): State<AppState>,
) -> Result<axum::Json<Value>, crate::ApiError> {
    match state.reload().await {
        Ok(done) => {
            tracing::info!(target: "kennel_server", "config reloaded (POST /reload): {done}");
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
