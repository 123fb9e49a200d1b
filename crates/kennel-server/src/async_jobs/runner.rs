//! Running stored jobs: per pool at most as many at once as it has workers,
//! the oldest first, each ended in the store with its reply or its error;
//! a cancel drops a running job (the pool cancels it on its worker).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::body::Bytes;
use kennel::Key;
use kennel_process::{Coprocess, JsonBytes, Progress};
use serde_json::json;
use tokio::sync::{Notify, broadcast};
use tokio_util::sync::CancellationToken;

use super::store::{JobRecord, JobState, Store};
use crate::error::ApiError;
use crate::state::AppState;

/// The running side of the store.
pub(crate) struct Runner {
    pub(crate) store: Store,
    /// Woken when a job is accepted or one ends.
    wake: Notify,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Jobs running, per pool.
    busy: HashMap<String, usize>,
    /// What cancels each running job.
    running: HashMap<String, CancellationToken>,
    /// The progress of each job someone watches or that runs; closed when
    /// it ends.
    progress: HashMap<String, broadcast::Sender<Progress>>,
}

/// How many progress items a watcher of an asynchronous job may be behind;
/// a slower one misses items, never the end.
const PROGRESS_BUFFER: usize = 64;

/// An error as the body `GET /jobs/{id}` shows.
pub(crate) fn error_body(error: &ApiError) -> String {
    json!({"error": error.kind(), "message": error.message()}).to_string()
}

impl Runner {
    pub(crate) fn new(store: Store) -> Self {
        Self {
            store,
            wake: Notify::new(),
            inner: Mutex::new(Inner::default()),
        }
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A job was accepted: look again.
    pub(crate) fn wake(&self) {
        self.wake.notify_one();
    }

    /// Cancels the running job `id`, if it runs here; its watchers' streams
    /// end.
    pub(crate) fn cancel(&self, id: &str) {
        let mut inner = self.inner();
        if let Some(token) = inner.running.get(id) {
            token.cancel();
        }
        inner.progress.remove(id);
    }

    /// A watch of job `id` that turned out needless (the job is over, or
    /// none): dropped, unless the job runs.
    pub(crate) fn cancel_watch(&self, id: &str) {
        let mut inner = self.inner();
        if !inner.running.contains_key(id) {
            inner.progress.remove(id);
        }
    }

    /// The progress of job `id` from now on (it closes when the job ends).
    pub(crate) fn watch(&self, id: &str) -> broadcast::Receiver<Progress> {
        let mut inner = self.inner();
        inner
            .progress
            .entry(id.to_owned())
            .or_insert_with(|| broadcast::channel(PROGRESS_BUFFER).0)
            .subscribe()
    }

    fn progress_of(&self, id: &str) -> broadcast::Sender<Progress> {
        let mut inner = self.inner();
        inner
            .progress
            .entry(id.to_owned())
            .or_insert_with(|| broadcast::channel(PROGRESS_BUFFER).0)
            .clone()
    }

    /// Hands each pool's queued jobs to it as its workers allow, until the
    /// service stops.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: what it did not take stays queued in the store.
    pub(crate) async fn run(self: Arc<Self>, state: AppState) {
        loop {
            let woken = self.wake.notified();
            self.dispatch(&state);
            woken.await;
        }
    }

    /// Starts what the pools can take now.
    fn dispatch(self: &Arc<Self>, state: &AppState) {
        let pools = match self.store.pools_with_queued() {
            Ok(pools) => pools,
            Err(e) => {
                tracing::error!(%e, "reading the job store failed");
                return;
            }
        };
        for name in pools {
            let Ok(pool) = state.pools().get(&name) else {
                // Its pool was taken out (a reload): its jobs fail.
                self.fail_all(&name);
                continue;
            };
            loop {
                // As many at once as the pool has workers: the rest wait in
                // the store, not in the pool's queue.
                let room = pool.stats().capacity.max(1);
                if self.inner().busy.get(&name).copied().unwrap_or(0) >= room {
                    break;
                }
                let job = match self.store.take_next(&name) {
                    Ok(Some(job)) => job,
                    Ok(None) => break,
                    Err(e) => {
                        tracing::error!(%e, "reading the job store failed");
                        return;
                    }
                };
                let token = CancellationToken::new();
                {
                    let mut inner = self.inner();
                    *inner.busy.entry(name.clone()).or_default() += 1;
                    inner.running.insert(job.id.clone(), token.clone());
                }
                tokio::spawn(Arc::clone(self).run_one(state.clone(), job, token));
            }
        }
    }

    /// Fails every queued job of pool `name`, which is gone.
    fn fail_all(&self, name: &str) {
        let body = error_body(&ApiError::NoSuchPool {
            name: name.to_owned(),
        });
        while let Ok(Some(job)) = self.store.take_next(name) {
            if let Err(e) = self
                .store
                .finish(&job.id, JobState::Failed, None, Some(&body))
            {
                tracing::error!(%e, job = %job.id, "storing a job's end failed");
                return;
            }
        }
    }

    /// Runs one job and ends it in the store.
    async fn run_one(self: Arc<Self>, state: AppState, job: JobRecord, token: CancellationToken) {
        let progress = self.progress_of(&job.id);
        let outcome = tokio::select! {
            outcome = run_job(&state, &job, progress) => Some(outcome),
            () = token.cancelled_owned() => None,
        };
        let ended = match outcome {
            // Cancelled: the store says so already.
            None => Ok(true),
            Some(Ok(reply)) => self
                .store
                .finish(&job.id, JobState::Done, Some(&reply), None),
            Some(Err(error)) => {
                let body = error_body(&error);
                self.store
                    .finish(&job.id, JobState::Failed, None, Some(&body))
            }
        };
        if let Err(e) = ended {
            tracing::error!(%e, job = %job.id, "storing a job's end failed");
        }
        {
            let mut inner = self.inner();
            inner.running.remove(&job.id);
            // Its watchers' streams end, and read the end from the store.
            inner.progress.remove(&job.id);
            if let Some(n) = inner.busy.get_mut(&job.pool) {
                *n = n.saturating_sub(1);
            }
        }
        self.wake();
    }
}

/// Runs `job` on its pool: the worker's reply as it wrote it, or the error
/// the job route would answer.
async fn run_job(
    state: &AppState,
    job: &JobRecord,
    progress: broadcast::Sender<Progress>,
) -> Result<Vec<u8>, ApiError> {
    let pool = crate::jobs::pool_named(state, &job.pool)?;
    let watch = state.watch(&job.pool);
    // Both were checked when the job was accepted.
    let request =
        JsonBytes::new(Bytes::from(job.body.clone())).map_err(|e| ApiError::BadRequest {
            message: format!("the stored job is not JSON: {e}"),
        })?;
    let key = match &job.key {
        Some(k) => Some(Key::new(k).map_err(|e| ApiError::BadKey {
            message: e.to_string(),
        })?),
        None => None,
    };
    run_owned(pool, key, request, watch, progress).await
}

/// The run itself, on owned values only (a future that holds no borrow
/// across the pool's await).
async fn run_owned(
    pool: kennel::Pool<Coprocess>,
    key: Option<Key>,
    request: JsonBytes<Bytes>,
    watch: Option<crate::watch::Watch>,
    progress: broadcast::Sender<Progress>,
) -> Result<Vec<u8>, ApiError> {
    let job = async move |w: &mut Coprocess| {
        // Nobody watching is no error.
        let mut forward = |p| drop(progress.send(p));
        w.request_bytes(&request, Some(&mut forward)).await
    };
    match crate::jobs::run_on(&pool, crate::jobs::keyed(key), job).await {
        Ok(Ok(reply)) => Ok(reply.as_bytes().to_vec()),
        Ok(Err(e)) => Err(e.into()),
        Err(e) => Err(crate::watch::pool_error(e, None, watch.as_ref()).await),
    }
}
