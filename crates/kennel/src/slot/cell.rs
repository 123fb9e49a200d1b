//! What the pool and a lease both know of one live worker.

use std::sync::Mutex;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::threads::{ThreadSample, ThreadWatch};
use crate::worker::{Exit, Killer, Meter};

/// The kill switch of a worker and whether it has ended, shared by its slot
/// and the lease that holds it, so that a job learns of its worker's end
/// without the pool's lock.
#[derive(Debug)]
pub(crate) struct WorkerCell {
    pub(crate) killer: Killer,
    /// Reads the worker's memory, for `max_memory`.
    pub(crate) meter: Option<Meter>,
    pub(crate) started: Instant,
    /// Its process id, for workers that are processes.
    pub(crate) pid: Option<u32>,
    /// Reads its threads, for the oversubscription check.
    pub(crate) threads: Option<ThreadWatch>,
    /// `None` until its end is seen.
    exit: Mutex<Option<Exit>>,
    notify: Notify,
}

impl WorkerCell {
    pub(crate) fn new(
        killer: Killer,
        started: Instant,
        meter: Option<Meter>,
        pid: Option<u32>,
        threads: Option<Meter<ThreadSample>>,
    ) -> Self {
        Self {
            killer,
            meter,
            started,
            pid,
            threads: threads.map(ThreadWatch::new),
            exit: Mutex::new(None),
            notify: Notify::new(),
        }
    }

    /// Records that the worker ended (under the pool's lock); the job that
    /// holds it learns it from [`wake_holder`](Self::wake_holder), called
    /// once the lock is released.
    pub(crate) fn set_dead(&self, exit: Exit) {
        *self.exit.lock().unwrap_or_else(|e| e.into_inner()) = Some(exit);
    }

    /// Wakes a job that waits in [`died`](Self::died).
    pub(crate) fn wake_holder(&self) {
        self.notify.notify_waiters();
    }

    pub(crate) fn is_dead(&self) -> bool {
        self.exit
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    pub(crate) fn exit(&self) -> Option<Exit> {
        self.exit.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Resolves once the worker has ended.
    pub(crate) async fn died(&self) {
        loop {
            let notified = self.notify.notified();
            if self.is_dead() {
                return;
            }
            notified.await;
        }
    }
}
