//! The pools' JetStream work queues, started with the pools and drained at
//! a stop.

use std::sync::Arc;

use kennel::Pool;
use kennel_process::Coprocess;

use super::AppState;
use crate::config::{Config, PoolConfig};
use crate::queue::{QueueStartError, Source};
use crate::watch::Watch;

impl AppState {
    /// Connects the queue of each pool of `config` that has one, started by
    /// [`start_pools`](Self::start_pools), as [`Source::start`] does.
    ///
    /// # Errors
    ///
    /// The first queue that cannot start (server unreachable, token
    /// variable unset, stream missing, consumer refused), naming its key.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a queue connected before the drop keeps fetching
    /// until [`drain_queues`](Self::drain_queues).
    pub(crate) async fn start_queues(&self, config: &Config) -> Result<(), QueueStartError> {
        for (i, pool) in config.pools.iter().enumerate() {
            if pool.queue.is_none() {
                continue;
            }
            let fail = |key: String, message: String| QueueStartError {
                pool: pool.name.clone(),
                key: format!("pool[{i}].queue{key}"),
                message,
            };
            let Ok(built) = self.pools().get(&pool.name) else {
                return Err(fail(String::new(), "the pool is not started".into()));
            };
            let watch = self.watch(&pool.name);
            let source = self
                .connect_queue(pool, built, watch)
                .await
                .map_err(|(key, message)| fail(key, message))?;
            self.pools().with(&pool.name, |e| e.queue = source);
        }
        Ok(())
    }

    /// Connects the queue of `config` (none without a `[pool.queue]`) for
    /// `pool`, and starts fetching.
    ///
    /// # Errors
    ///
    /// The key under `queue` (`".nats"`, …) and what went wrong.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: once connected, the queue fetches until drained.
    pub(crate) async fn connect_queue(
        &self,
        config: &PoolConfig,
        pool: Pool<Coprocess>,
        watch: Option<Watch>,
    ) -> Result<Option<Arc<Source>>, (String, String)> {
        let Some(queue) = &config.queue else {
            return Ok(None);
        };
        let keys = crate::job_key::KeyRules::of(config);
        let source = Source::start(
            &config.name,
            queue,
            pool,
            watch,
            self.body_limit(),
            keys,
            self.async_jobs().result_ttl,
        )
        .await?;
        if config.options.job_timeout.is_none() {
            tracing::warn!(target: "kennel_server", pool = %config.name, "a queued pool without job_timeout: a job that hangs keeps its message by in-progress acks until it ends");
        }
        Ok(Some(source))
    }

    /// Every queued pool's source.
    pub(crate) fn queues(&self) -> Vec<Arc<Source>> {
        self.pools()
            .lock()
            .values()
            .filter_map(|e| e.queue.clone())
            .collect()
    }

    /// Drains every queue: stops fetching, hands back at once what arrives,
    /// waits for the jobs started to end and be acked, flushes. Call it
    /// again after the pools closed, for the jobs their closing ended (they
    /// are handed back for another instance). Does nothing without queues.
    ///
    /// # Cancel safety
    ///
    /// Fetching stops as soon as the call starts; dropping the future only
    /// stops the waiting.
    pub(crate) async fn drain_queues(&self) {
        let sources = self.queues();
        futures_util::future::join_all(sources.iter().map(|s| s.drain())).await;
    }
}
