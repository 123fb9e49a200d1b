//! The sizing and eviction the service last gave each pool, so that
//! `GET /pools/{name}/config` can say them: a live pool holds its policies
//! as boxed traits and cannot write them back in the shape of a config.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use kennel::Action;

use crate::config::{EvictionConfig, ReconfigBody, SizingConfig};
use crate::error::ApiError;
use crate::state::AppState;

/// A pool's policies as a config writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Policies {
    pub(crate) sizing: SizingConfig,
    pub(crate) eviction: EvictionConfig,
}

/// The policies of each pool the service built or changed, by name.
#[derive(Debug, Default)]
pub(crate) struct LivePolicies(Mutex<HashMap<String, Policies>>);

impl LivePolicies {
    fn map(&self) -> MutexGuard<'_, HashMap<String, Policies>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records the policies a pool was built with. A pool built without a
    /// sizing runs the default, `Fixed(capacity)`: it is recorded as such.
    pub(crate) fn built(
        &self,
        pool: &str,
        sizing: Option<SizingConfig>,
        eviction: EvictionConfig,
        capacity: usize,
    ) {
        let sizing = sizing.unwrap_or(SizingConfig::Fixed { workers: capacity });
        self.map()
            .insert(pool.to_owned(), Policies { sizing, eviction });
    }

    /// Records what a change of a pool gave it (a sizing or eviction left
    /// out keeps the one recorded).
    pub(crate) fn changed(&self, pool: &str, body: &ReconfigBody) {
        if let Some(p) = self.map().get_mut(pool) {
            if let Some(s) = body.sizing {
                p.sizing = s;
            }
            if let Some(e) = body.eviction {
                p.eviction = e;
            }
        }
    }

    /// The policies recorded for `pool`: none for a pool added to the
    /// state by hand ([`AppState::add_pool`]).
    pub(crate) fn get(&self, pool: &str) -> Option<Policies> {
        self.map().get(pool).copied()
    }
}

impl AppState {
    /// Changes the live pool `name` as `body` says and records its new
    /// sizing and eviction for `GET /pools/{name}/config`.
    ///
    /// # Errors
    ///
    /// [`ApiError::BadConfig`] for an eviction kennel refuses, or the
    /// registry's error (no such pool, a closed pool) as an [`ApiError`].
    pub fn reconfigure_pool(
        &self,
        name: &str,
        body: &ReconfigBody,
    ) -> Result<Vec<Action>, ApiError> {
        let change = body.reconfig().map_err(|e| ApiError::BadConfig {
            message: e.to_string(),
        })?;
        let actions = self.registry().reconfigure(name, change)?;
        self.live().changed(name, body);
        Ok(actions)
    }
}
