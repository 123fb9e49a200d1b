//! The pool's tasks: warm-ups, exit watchers and timers. Each holds a
//! `Weak` to the engine and reports through a handler (slot invariant 4).

use std::sync::Weak;

use tokio::time::Instant;

use super::Engine;
use super::effects::{Arm, Warmup, When};
use super::life::Made;
use crate::worker::{BoxError, Exited, SlotInfo, Worker};

/// The warm-up, on a task of the pool (ADR 0003): make the worker, register
/// it, wait for `ready()`. Cancelled when its slot leaves `Starting`.
pub(super) async fn warm_up<W: Worker>(me: Weak<Engine<W>>, w: Warmup, info: SlotInfo) {
    let Some(factory) = me.upgrade().map(|e| e.factory.clone()) else {
        return;
    };
    let Warmup {
        slot,
        generation,
        limit,
        token,
        ..
    } = w;
    let started = Instant::now();
    let size = info.size;
    let key = info.key.clone();
    let work = async {
        let mut worker = factory(info)
            .await
            .map_err(|e| (format!("could not start: {e}"), Some(e)))?;
        let (exited, killer) = crate::exit::watch(&mut worker);
        let pid = worker.pid();
        let meter = worker.meter();
        let threads = worker.threads();
        let registered = me.upgrade().is_some_and(|e| {
            let made = Made {
                killer: killer.clone(),
                exited,
                started,
                pid,
                meter,
                threads,
                size,
                key,
            };
            e.act(|st, fx| st.register(fx, slot, generation, made))
        });
        if !registered {
            killer.kill();
            return Err(("the slot moved on".to_owned(), None));
        }
        worker
            .ready()
            .await
            .map_err(|e| (format!("not ready: {e}"), Some(e)))?;
        Ok(worker)
    };
    let limited = async {
        match limit {
            Some(d) => tokio::time::timeout(d, work)
                .await
                .unwrap_or_else(|_| Err((format!("not ready within {d:?}"), None))),
            None => work.await,
        }
    };
    let result: Result<W, (String, Option<BoxError>)> = tokio::select! {
        biased;
        () = token.cancelled() => return,
        r = limited => r,
    };
    let Some(engine) = me.upgrade() else {
        if let Ok(worker) = result {
            worker.killer().kill();
        }
        return;
    };
    let warmup = started.elapsed();
    match result {
        Ok(worker) => engine.act(|st, fx| st.on_ready(fx, slot, generation, worker, warmup)),
        Err((message, source)) => {
            engine.act(|st, fx| st.on_warmup_failed(fx, slot, generation, message, source));
        }
    }
}

/// Waits for a worker's exit and reports it.
pub(super) async fn watch_exit<W: Worker>(
    me: Weak<Engine<W>>,
    slot: usize,
    generation: u64,
    exited: Exited,
) {
    let exit = exited.await;
    if let Some(engine) = me.upgrade() {
        engine.act(|st, fx| st.on_exit(fx, slot, generation, exit));
    }
}

/// A timer: reports its wake-up when due, unless it was cancelled first
/// (checked again under the lock, where cancelling happens, so a timer
/// whose state moved on never reports).
pub(super) async fn wake<W: Worker>(me: Weak<Engine<W>>, arm: Arm) {
    let Arm { when, wake, token } = arm;
    let due = async {
        match when {
            When::At(at) => tokio::time::sleep_until(at).await,
            When::On(after) => after.await,
        }
    };
    tokio::select! {
        biased;
        () = token.cancelled() => return,
        () = due => {}
    }
    if let Some(engine) = me.upgrade() {
        engine.act(|st, fx| {
            if !token.is_cancelled() {
                st.on_wake(fx, wake);
            }
        });
    }
}

/// A probe, on a task of the pool: the worker's [`Worker::check`] under a
/// lease of the pool's own, within its timeout. A worker that fails it is
/// retired; one that passes goes back idle, its idle time kept.
pub(super) async fn probe<W: Worker>(
    engine: std::sync::Arc<Engine<W>>,
    run: super::probe::ProbeRun<W>,
) {
    let super::probe::ProbeRun { granted, timeout } = run;
    let slot = granted.slot;
    let lease = crate::lease::Lease::new(engine.clone(), granted, None).not_a_job();
    // Dropped midway, the worker is retired as aborted (its state is
    // unknown), as a dropped job's is.
    let mut guard = crate::lease::InFlight::new(lease);
    let checked = tokio::time::timeout(timeout, guard.check()).await;
    let lease = guard.disarm();
    let (message, answered) = match checked {
        Ok(Ok(())) => return,
        Ok(Err(e)) => (format!("the probe failed: {e}"), true),
        Err(_) => (format!("no answer to the probe within {timeout:?}"), false),
    };
    let reason = crate::event::RetireReason::ProbeFailed;
    // A worker that answered, and is alive, keeps serving while its
    // replacement warms (`max_surge`); one that did not is retired.
    let alive = answered && !lease.has_exited();
    let keep = engine.act(|st, fx| {
        fx.emit(crate::event::Event::ProbeFailed { slot, message });
        alive && st.replace_later(fx, slot, reason)
    });
    if keep {
        drop(lease);
    } else {
        lease.retire(reason);
    }
}
