//! The service's one map of pools: each pool's record ([`PoolEntry`]) under
//! one lock, so that adding, replacing and taking out a pool is one step
//! and nothing of a pool taken out is left behind.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use kennel::{Error, Lease, Pool, RunOptions, Stats};
use kennel_process::Coprocess;
use rand::Rng;

use crate::config::{EvictionConfig, PoolConfig, SizingConfig};
use crate::events::Ring;
use crate::queue::Source;
use crate::watch::Watch;

/// A pool's sizing and eviction as a config writes them: what it was last
/// given (a live pool holds its policies as boxed traits and cannot write
/// them back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Policies {
    pub(crate) sizing: SizingConfig,
    pub(crate) eviction: EvictionConfig,
}

/// Everything the service keeps of one pool.
pub(crate) struct PoolEntry {
    pub(crate) pool: Pool<Coprocess>,
    pub(crate) group: Option<String>,
    /// The `[[pool]]` entry it was built from, as last applied by a start
    /// or a reload (none for a pool added by hand).
    pub(crate) config: Option<PoolConfig>,
    /// Its sizing and eviction as last given (none for a pool added by
    /// hand).
    pub(crate) policies: Option<Policies>,
    /// The largest binary job body, where it has its own.
    pub(crate) upload_limit: Option<usize>,
    /// Its JetStream work queue, if it has one.
    pub(crate) queue: Option<Arc<Source>>,
    /// Its recent events, for late subscribers of `/events`.
    pub(crate) events: Ring,
    /// What is kept of its workers (a pool built from a config).
    pub(crate) watch: Option<Watch>,
}

impl PoolEntry {
    /// The record of a pool with nothing but its group.
    pub(crate) fn new(pool: Pool<Coprocess>, group: Option<String>) -> Self {
        Self {
            pool,
            group,
            config: None,
            policies: None,
            upload_limit: None,
            queue: None,
            events: Ring::default(),
            watch: None,
        }
    }

    /// Drains its queue (if any), closes the pool (its jobs get its
    /// `job_grace`), then hands back what the closing ended: for a pool
    /// taken out.
    pub(crate) async fn close(self) {
        if let Some(queue) = &self.queue {
            queue.drain().await;
        }
        self.pool.close().await;
        if let Some(queue) = &self.queue {
            queue.drain().await;
        }
    }
}

/// A pool as [`Pools::list`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Listed {
    /// The pool's name.
    pub name: String,
    /// Its group, if any.
    pub group: Option<String>,
    /// Its stats at the time of the listing.
    pub stats: Stats,
}

/// The pools of the service, by name. One per state.
#[derive(Default)]
pub(crate) struct Pools {
    map: Mutex<BTreeMap<String, PoolEntry>>,
}

impl fmt::Debug for Pools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pools")
            .field("names", &self.lock().keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Pools {
    pub(crate) fn lock(&self) -> MutexGuard<'_, BTreeMap<String, PoolEntry>> {
        crate::lock(&self.map)
    }

    /// The pool named `name`.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchPool`] when there is none.
    pub(crate) fn get(&self, name: &str) -> Result<Pool<Coprocess>, Error> {
        self.with(name, |e| e.pool.clone())
            .ok_or_else(|| Error::NoSuchPool {
                name: name.to_owned(),
            })
    }

    /// Whether there is no pool.
    pub(crate) fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Every pool, by name, with its group and stats.
    pub(crate) fn list(&self) -> Vec<Listed> {
        self.lock()
            .iter()
            .map(|(name, e)| Listed {
                name: name.clone(),
                group: e.group.clone(),
                stats: e.pool.stats(),
            })
            .collect()
    }

    /// The pools of group `name` now.
    pub(crate) fn group(&self, name: &str) -> Group {
        let pools = self
            .lock()
            .values()
            .filter(|e| e.group.as_deref() == Some(name))
            .map(|e| e.pool.clone())
            .collect();
        Group {
            name: name.to_owned(),
            pools,
        }
    }

    /// Runs `f` on the record of pool `name`, under the lock.
    pub(crate) fn with<R>(&self, name: &str, f: impl FnOnce(&mut PoolEntry) -> R) -> Option<R> {
        self.lock().get_mut(name).map(f)
    }

    /// Adds a record under its pool's name.
    ///
    /// # Errors
    ///
    /// [`Error::DuplicatePool`] when the name is taken (the record is
    /// dropped, and its pool with it).
    pub(crate) fn insert(&self, entry: PoolEntry) -> Result<(), Error> {
        let mut map = self.lock();
        let name = entry.pool.name().to_owned();
        if map.contains_key(&name) {
            return Err(Error::DuplicatePool { name });
        }
        map.insert(name, entry);
        Ok(())
    }
}

/// The pools of one group, as they were when asked for: a job goes to a
/// random one that can lend at once.
#[derive(Debug)]
pub(crate) struct Group {
    /// The group's name.
    pub(crate) name: String,
    /// Its pools.
    pub(crate) pools: Vec<Pool<Coprocess>>,
}

impl Group {
    /// Lends a worker from a random pool of the group; when that pool
    /// cannot lend without queueing, tries each other pool in turn.
    ///
    /// # Errors
    ///
    /// [`Error::NoMembers`] when no pool of the group can lend now (or the
    /// group has none).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`Pool::try_lend`].
    pub(crate) async fn lend(&self, options: &RunOptions) -> Result<Lease<Coprocess>, Error> {
        let n = self.pools.len();
        if n > 0 {
            let first = rand::rng().random_range(0..n);
            for k in 0..n {
                // A pool that is closed, full, or whose fresh worker failed
                // its warm-up cannot lend now: try the next.
                let pool = &self.pools[(first + k) % n];
                if let Ok(Some(lease)) = pool.try_lend_with(options).await {
                    return Ok(lease);
                }
            }
        }
        Err(Error::NoMembers {
            group: self.name.clone(),
        })
    }

    /// Runs `job` on a worker lent as [`lend`](Self::lend) does (with
    /// `options`' tenant and priority), with the chosen pool's
    /// `job_timeout`.
    ///
    /// # Errors
    ///
    /// As [`lend`](Self::lend), and as [`Pool::run`] once the job runs.
    ///
    /// # Cancel safety
    ///
    /// As [`Pool::run`].
    pub(crate) async fn run<R>(
        &self,
        options: &RunOptions,
        job: impl AsyncFnOnce(&mut Coprocess) -> R,
    ) -> Result<R, Error> {
        self.lend(options).await?.run(job).await
    }
}
