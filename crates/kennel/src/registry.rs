//! Named pools, and groups of them that lend from any member.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use rand::Rng;

use crate::error::Error;
use crate::lease::Lease;
use crate::pool::Pool;
use crate::reconfig::{Action, Reconfig};
use crate::run::{RunOptions, run_seen};
use crate::stats::Stats;
use crate::worker::Worker;

/// A registry of named pools, each optionally tagged with a group.
///
/// Cheap to clone: clones share the registry. Removing a pool closes it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use kennel::{Fixed, Pool, Registry, Worker};
///
/// struct Conn;
/// impl Worker for Conn {}
/// fn conns(name: &str) -> Pool<Conn> {
///     Pool::builder(|_| async { Ok::<_, kennel::BoxError>(Conn) })
///     .name(name)
///     .sizing(Fixed(2))
///     .build()
///     .unwrap()
/// }
///
/// let registry = Registry::new();
/// registry.add_to_group(conns("replica-a"), "replicas")?;
/// registry.add_to_group(conns("replica-b"), "replicas")?;
/// let lease = registry.group("replicas").lend().await?;
/// drop(lease);
/// assert!(registry.get("replica-c").is_err());
/// registry.close_all().await;
/// # Ok(()) }
/// ```
pub struct Registry<W: Worker> {
    inner: Arc<Mutex<BTreeMap<String, Entry<W>>>>,
}

struct Entry<W: Worker> {
    pool: Pool<W>,
    group: Option<String>,
}

/// A pool as the registry lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolEntry {
    /// The pool's name.
    pub name: String,
    /// Its group, if any.
    pub group: Option<String>,
    /// Its stats at the time of the listing.
    pub stats: Stats,
}

impl<W: Worker> Clone for Registry<W> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<W: Worker> Default for Registry<W> {
    fn default() -> Self {
        Self::new()
    }
}

impl<W: Worker> fmt::Debug for Registry<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("pools", &self.lock().keys().collect::<Vec<_>>())
            .finish()
    }
}

impl<W: Worker> Registry<W> {
    /// An empty registry.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Mutex::new(BTreeMap::new())),
        }
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Entry<W>>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a pool under its name, in no group.
    ///
    /// # Errors
    ///
    /// [`Error::DuplicatePool`] when a pool of that name is already there.
    pub fn add(&self, pool: Pool<W>) -> Result<(), Error> {
        self.insert(pool, None)
    }

    /// Adds a pool under its name, in `group`.
    ///
    /// # Errors
    ///
    /// As [`add`](Self::add).
    pub fn add_to_group(&self, pool: Pool<W>, group: &str) -> Result<(), Error> {
        self.insert(pool, Some(group.to_owned()))
    }

    fn insert(&self, pool: Pool<W>, group: Option<String>) -> Result<(), Error> {
        let mut map = self.lock();
        let name = pool.name().to_owned();
        if map.contains_key(&name) {
            return Err(Error::DuplicatePool { name });
        }
        map.insert(name, Entry { pool, group });
        Ok(())
    }

    /// The pool named `name`.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchPool`] when there is none.
    pub fn get(&self, name: &str) -> Result<Pool<W>, Error> {
        self.lock()
            .get(name)
            .map(|e| e.pool.clone())
            .ok_or_else(|| Error::NoSuchPool {
                name: name.to_owned(),
            })
    }

    /// Removes the pool named `name` and closes it.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchPool`] when there is none.
    ///
    /// # Cancel safety
    ///
    /// The pool is out of the registry and closing as soon as the call
    /// starts; dropping the future only stops waiting for its workers to end.
    pub async fn remove(&self, name: &str) -> Result<(), Error> {
        self.take(name)?.close().await;
        Ok(())
    }

    /// Takes the pool named `name` out of the registry without closing it:
    /// the caller closes it (or hands it on). New jobs no longer find it by
    /// name; jobs that hold its workers go on.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchPool`] when there is none.
    pub fn take(&self, name: &str) -> Result<Pool<W>, Error> {
        self.lock()
            .remove(name)
            .map(|e| e.pool)
            .ok_or_else(|| Error::NoSuchPool {
                name: name.to_owned(),
            })
    }

    /// Every pool, by name, with its group and stats.
    pub fn list(&self) -> Vec<PoolEntry> {
        self.lock()
            .iter()
            .map(|(name, e)| PoolEntry {
                name: name.clone(),
                group: e.group.clone(),
                stats: e.pool.stats(),
            })
            .collect()
    }

    /// Every group name that has at least one pool.
    pub fn groups(&self) -> Vec<String> {
        let map = self.lock();
        let groups: BTreeSet<_> = map.values().filter_map(|e| e.group.as_ref()).collect();
        groups.into_iter().cloned().collect()
    }

    /// The group named `name` (it may have no pool yet).
    pub fn group(&self, name: &str) -> Group<W> {
        Group {
            registry: self.clone(),
            name: name.to_owned(),
        }
    }

    /// Reconfigures the pool named `name` (see [`Pool::reconfigure`]); a
    /// group given in `change` moves the pool to that group.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchPool`], or the pool's own errors; nothing changes on
    /// error.
    pub fn reconfigure(&self, name: &str, mut change: Reconfig) -> Result<Vec<Action>, Error> {
        let group = change.group.take();
        let pool = self.get(name)?;
        let mut actions = pool.reconfigure(change)?;
        if let Some(to) = group {
            let mut map = self.lock();
            if let Some(entry) = map.get_mut(name) {
                if entry.group != to {
                    let from = std::mem::replace(&mut entry.group, to.clone());
                    actions.push(Action::GroupChanged { from, to });
                }
            }
        }
        Ok(actions)
    }

    /// Removes and closes every pool.
    ///
    /// # Errors
    ///
    /// None: closing always completes.
    ///
    /// # Cancel safety
    ///
    /// Every pool is out of the registry and closing as soon as the call
    /// starts; dropping the future only stops waiting.
    pub async fn close_all(&self) {
        let pools: Vec<Pool<W>> = std::mem::take(&mut *self.lock())
            .into_values()
            .map(|e| e.pool)
            .collect();
        for pool in &pools {
            // Closing starts for all at once; then wait for each.
            pool.begin_close();
        }
        for pool in pools {
            pool.close().await;
        }
    }
}

/// The pools of one group: a job goes to a random one that can lend at once.
pub struct Group<W: Worker> {
    registry: Registry<W>,
    name: String,
}

impl<W: Worker> fmt::Debug for Group<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Group").field("name", &self.name).finish()
    }
}

impl<W: Worker> Group<W> {
    /// The group's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The pools of the group now.
    pub fn pools(&self) -> Vec<Pool<W>> {
        let map = self.registry.lock();
        let members = map
            .values()
            .filter(|e| e.group.as_ref() == Some(&self.name));
        members.map(|e| e.pool.clone()).collect()
    }

    /// Lends a worker from a random pool of the group; when that pool cannot
    /// lend without queueing, tries each other pool in turn.
    ///
    /// # Errors
    ///
    /// [`Error::NoMembers`] when no pool of the group can lend now (or the
    /// group has none).
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe, as [`Pool::lend`].
    pub async fn lend(&self) -> Result<Lease<W>, Error> {
        let pools = self.pools();
        if !pools.is_empty() {
            let first = rand::rng().random_range(0..pools.len());
            for k in 0..pools.len() {
                let pool = &pools[(first + k) % pools.len()];
                // A pool that is closed, full, or whose fresh worker failed
                // its warm-up cannot lend now: try the next.
                if let Ok(Some(lease)) = pool.try_lend().await {
                    return Ok(lease);
                }
            }
        }
        Err(Error::NoMembers {
            group: self.name.clone(),
        })
    }

    /// Runs `job` on a worker lent as [`lend`](Group::lend) does, with the
    /// chosen pool's `job_timeout`.
    ///
    /// # Errors
    ///
    /// As [`lend`](Group::lend), and as [`Pool::run`] once the job runs.
    ///
    /// # Cancel safety
    ///
    /// As [`Pool::run`].
    pub async fn run<R>(&self, job: impl AsyncFnOnce(&mut W) -> R) -> Result<R, Error> {
        self.run_with(RunOptions::new(), job).await
    }

    /// As [`run`](Group::run), with a per-call job timeout (a lend timeout
    /// does not apply: a group never waits in a queue).
    ///
    /// # Errors
    ///
    /// As [`run`](Group::run).
    ///
    /// # Cancel safety
    ///
    /// As [`Pool::run`].
    pub async fn run_with<R>(
        &self,
        options: RunOptions,
        job: impl AsyncFnOnce(&mut W) -> R,
    ) -> Result<R, Error> {
        let lease = self.lend().await?;
        run_seen(lease, options.job_timeout, job).await.0
    }
}
