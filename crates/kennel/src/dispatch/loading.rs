//! A lent worker loads the key of the job it was lent to, before the job
//! gets it.

use tokio::time::Instant;

use super::Load;
use crate::error::Error;
use crate::event::RetireReason;
use crate::lease::Lease;
use crate::worker::Worker;

/// Lets go of `load.unload`, then loads `load.key`, on the worker of
/// `lease`, and tells the pool how it went. A failed load gives the worker
/// back with the keys it held and fails the job with its message (and the
/// pool refuses the key for a while); a failed unload retires the worker,
/// since what it holds is no longer known.
/// Dropped midway (the job gave up), the worker is retired as aborted.
pub(super) async fn load<W: Worker>(lease: Lease<W>, load: Load) -> Result<Lease<W>, Error> {
    let (slot, engine, cell) = (lease.slot, lease.engine.clone(), lease.cell.clone());
    let mut guard = Loading(Some(lease));
    let worker = guard.0.as_mut().expect("armed until disarmed");
    let mut failed = None;
    for key in &load.unload {
        if let Err(e) = worker.unload(key.as_str()).await {
            failed = Some(format!("could not unload key {key:?}: {e}"));
            break;
        }
    }
    let started = Instant::now();
    let loaded = match failed {
        Some(message) => Err((message, true)),
        None => worker
            .load(load.key.as_str())
            .await
            .map_err(|e| (e.to_string(), false)),
    };
    let lease = guard.disarm();
    let took = loaded.is_ok().then(|| started.elapsed());
    engine.act(|st, fx| {
        st.key_settled(fx, slot, &cell, &load, took);
        if let Err((message, false)) = &loaded {
            st.key_load_failed(slot, &load.key, message);
        }
    });
    match loaded {
        Ok(()) => Ok(lease),
        Err((message, unload_failed)) => {
            if unload_failed {
                lease.retire(RetireReason::Failed);
            }
            Err(Error::LoadFailed {
                slot,
                key: load.key,
                message,
            })
        }
    }
}

/// Loads a key kept warm (`min_workers_per_key`) on the worker the pool
/// took for it; no job waits for it. A failed load is a warning, and the
/// pool stops loading that key ahead until it is reconfigured.
pub(crate) async fn load_warm<W: Worker>(
    engine: std::sync::Arc<crate::engine::Engine<W>>,
    mut granted: super::Granted<W>,
) {
    let Some(job) = granted.load.take() else {
        return;
    };
    let key = job.key.clone();
    let lease = Lease::new(engine.clone(), granted, None).not_a_job();
    if let Err(e) = load(lease, job).await {
        engine.act(|st, fx| st.warm_key_failed(fx, key, &e));
    }
}

/// Unloads `keys` from the worker the pool took to fit its key memory
/// budget; no job waits for it. A failed unload retires the worker.
pub(crate) async fn unload<W: Worker>(
    engine: std::sync::Arc<crate::engine::Engine<W>>,
    granted: super::Granted<W>,
    keys: Vec<crate::Key>,
) {
    let slot = granted.slot;
    let mut guard = Loading(Some(Lease::new(engine.clone(), granted, None).not_a_job()));
    let worker = guard.0.as_mut().expect("armed until disarmed");
    let mut failed = false;
    for key in &keys {
        failed = worker.unload(key.as_str()).await.is_err();
        if failed {
            break;
        }
    }
    let lease = guard.disarm();
    engine.act(|_, fx| {
        for key in keys {
            fx.emit(crate::event::Event::Unloaded { slot, key });
        }
    });
    if failed {
        lease.retire(RetireReason::Failed);
    }
}

/// A lease whose worker loads a key: dropped before [`disarm`](Self::disarm),
/// it retires the worker as aborted, since what it holds is unknown.
struct Loading<W: Worker>(Option<Lease<W>>);

impl<W: Worker> Loading<W> {
    fn disarm(mut self) -> Lease<W> {
        self.0.take().expect("armed until disarmed")
    }
}

impl<W: Worker> Drop for Loading<W> {
    fn drop(&mut self) {
        if let Some(lease) = self.0.take() {
            lease.retire(RetireReason::Aborted);
        }
    }
}
