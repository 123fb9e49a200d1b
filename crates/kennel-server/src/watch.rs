//! What the service keeps of a pool's workers after they failed: the stderr
//! tails of the last ones started (for the answer of a broken pool), and the
//! run directory's file of each live worker group.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kennel::{Killer, Pool};
use kennel_process::{Coprocess, StderrTail};
use serde_json::Value;

use crate::error::{ApiError, with_last_words};
use crate::lock;
use crate::rundir::RunDir;

/// How many workers' stderr tails a pool's watch keeps.
const RECENT: usize = 8;

/// How long to wait for a crashed worker's stderr to close before its last
/// words are read.
const LAST_WORDS_WAIT: Duration = Duration::from_millis(200);

/// What the service keeps of one pool's workers. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub(crate) struct Watch {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// The slot and stderr tail of the last workers started, oldest first.
    recent: Mutex<VecDeque<(usize, StderrTail)>>,
    /// The kill switch of each live worker, by pid.
    live: Mutex<HashMap<u32, Killer>>,
    run_dir: Option<Arc<RunDir>>,
}

impl Watch {
    /// A watch that records each worker's group in `run_dir`, if given.
    pub(crate) fn new(run_dir: Option<Arc<RunDir>>) -> Self {
        let inner = Arc::new(Inner {
            run_dir,
            ..Inner::default()
        });
        Self { inner }
    }

    /// Called by the pool's factory for each worker it started: keeps its
    /// stderr tail and its kill switch, and records its group until it
    /// ends.
    ///
    /// # Panics
    ///
    /// When called outside a tokio runtime.
    pub(crate) fn started(&self, slot: usize, worker: &Coprocess) {
        {
            let mut recent = lock(&self.inner.recent);
            recent.push_back((slot, worker.stderr_tail()));
            while recent.len() > RECENT {
                recent.pop_front();
            }
        }
        let pid = worker.pid();
        lock(&self.inner.live).insert(pid, worker.killer());
        let record = self.inner.run_dir.as_ref().and_then(|d| d.record(pid));
        let exited = worker.exited();
        let watch = self.clone();
        tokio::spawn(async move {
            exited.await;
            drop(record);
            lock(&watch.inner.live).remove(&pid);
        });
    }

    /// Kills every live worker of the pool at once (SIGKILL to each
    /// process group), without waiting: for a second stop signal.
    pub(crate) fn kill_all(&self) {
        let killers: Vec<Killer> = lock(&self.inner.live).values().cloned().collect();
        for k in killers {
            k.kill();
        }
    }

    /// The last words of the most recently started worker whose stderr has
    /// closed with something on it: while a pool is broken, the worker
    /// whose start failed last. Empty when there is none.
    pub(crate) fn last_failed_words(&self) -> Vec<String> {
        lock(&self.inner.recent)
            .iter()
            .rev()
            .find(|(_, t)| t.is_closed() && t.last_line().is_some())
            .map(|(_, t)| t.lines())
            .unwrap_or_default()
    }

    /// The stderr tail of the last worker started in `slot`: for a failed
    /// warm-up the pool reported without the worker's own error (it saw the
    /// worker exit first).
    pub(crate) fn tail_of(&self, slot: usize) -> Option<StderrTail> {
        lock(&self.inner.recent)
            .iter()
            .rev()
            .find(|(s, _)| *s == slot)
            .map(|(_, t)| t.clone())
    }
}

/// The last words of a worker that ended under a job: its stderr tail once
/// the stream has closed, or after a short bounded wait (200 ms).
///
/// # Errors
///
/// None: with no tail, or no line, the words are empty.
///
/// # Cancel safety
///
/// Cancel safe: it only waits, then reads.
pub(crate) async fn last_words(tail: Option<&StderrTail>) -> Vec<String> {
    let Some(tail) = tail else {
        return Vec::new();
    };
    let _ = tokio::time::timeout(LAST_WORDS_WAIT, tail.closed()).await;
    tail.lines()
}

/// A pool's error as the service answers it, with the last words of the
/// worker it is about ([`with_last_words`]): for a crash, the worker under
/// the job (`tail`); for a failed warm-up, the worker that failed it; for a
/// broken pool, the worker whose start failed last (both from `watch`).
pub(crate) async fn pool_error(
    error: kennel::Error,
    tail: Option<StderrTail>,
    watch: Option<&Watch>,
) -> ApiError {
    let words = match &error {
        kennel::Error::Crashed { .. } => last_words(tail.as_ref()).await,
        kennel::Error::WarmupFailed { slot, .. } => {
            last_words(watch.and_then(|w| w.tail_of(*slot)).as_ref()).await
        }
        kennel::Error::Unavailable { .. } => {
            watch.map(Watch::last_failed_words).unwrap_or_default()
        }
        _ => Vec::new(),
    };
    with_last_words(error, words)
}

/// Where a job's progress items go, when someone reads them (an item
/// that finds the channel full is dropped).
pub(crate) type OnProgress = tokio::sync::mpsc::Sender<kennel_process::Progress>;

/// Runs `request` on a worker of `pool` (one that holds `key` when given,
/// again after a crash when the pool retries on one);
/// `lent` is called each time a worker takes it, `progress` with each
/// progress item. An error about a worker that ended carries its last
/// words ([`pool_error`]).
///
/// # Errors
///
/// The pool's or the worker's error, as the service answers it.
///
/// # Cancel safety
///
/// As [`Pool::run`].
pub(crate) async fn run_request(
    pool: &Pool<Coprocess>,
    watch: Option<&Watch>,
    request: Value,
    key: Option<kennel::Key>,
    lent: impl Fn() + Send + Sync + 'static,
    progress: Option<OnProgress>,
) -> Result<Value, ApiError> {
    let tail: Arc<Mutex<Option<StderrTail>>> = Arc::default();
    let seen = tail.clone();
    let job = async move |w: &mut Coprocess| {
        lent();
        *lock(&seen) = Some(w.stderr_tail());
        let Some(to) = &progress else {
            return w.request(&request).await;
        };
        let raw = w
            .request_with_progress(&request, |p| drop(to.try_send(p)))
            .await?;
        // JSON the worker wrote, read again as a tree.
        let reply: String = raw.get().to_owned();
        Ok(serde_json::from_str::<Value>(&reply).unwrap_or_default())
    };
    let result = crate::jobs::run_on(pool, crate::jobs::keyed(key), job).await;
    match result {
        Ok(Ok(reply)) => Ok(reply),
        Ok(Err(e)) => Err(e.into()),
        Err(e) => {
            let tail = lock(&tail).take();
            Err(pool_error(e, tail, watch).await)
        }
    }
}
