//! The farm that makes fake workers: their warm-ups planned ahead, a
//! factory that fails when told, and each worker reachable by its id.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kennel::{BoxError, ExitSignal, ExitStatus, SlotInfo};
use tokio::time::Instant;

use super::fake::{Fake, Health, Probes, Warmup};

#[derive(Debug)]
struct Made {
    id: usize,
    slot: usize,
    /// The pool's running size it was started at.
    size: usize,
    signal: ExitSignal,
    started: Instant,
    memory: Arc<AtomicU64>,
    probes: Arc<Mutex<Probes>>,
}

#[derive(Debug, Default)]
struct FarmState {
    made: Vec<Made>,
    warmup: Option<Duration>,
    plan: VecDeque<Warmup>,
    factory_fails: usize,
}

/// Makes fake workers and lets the test reach each of them.
#[derive(Debug, Clone, Default)]
pub struct Farm {
    state: Arc<Mutex<FarmState>>,
}

impl Farm {
    pub fn new() -> Self {
        Self::default()
    }

    /// Every worker warms up in `d` (default: ready at once).
    pub fn with_warmup(d: Duration) -> Self {
        let farm = Self::new();
        farm.state.lock().unwrap().warmup = Some(d);
        farm
    }

    /// The next workers warm up as planned, in order; then as by default.
    pub fn plan(&self, warmups: impl IntoIterator<Item = Warmup>) {
        self.state.lock().unwrap().plan.extend(warmups);
    }

    /// The next `n` factory calls fail.
    pub fn fail_factory(&self, n: usize) {
        self.state.lock().unwrap().factory_fails += n;
    }

    /// A factory for `Pool::builder`.
    pub fn factory(
        &self,
    ) -> impl Fn(SlotInfo) -> std::future::Ready<Result<Fake, BoxError>> + Send + Sync + 'static
    {
        let farm = self.clone();
        move |info: SlotInfo| std::future::ready(farm.make(&info))
    }

    pub(super) fn make(&self, info: &SlotInfo) -> Result<Fake, BoxError> {
        let slot = info.slot;
        let mut st = self.state.lock().unwrap();
        if st.factory_fails > 0 {
            st.factory_fails -= 1;
            return Err("factory refused".into());
        }
        let warmup = st
            .plan
            .pop_front()
            .unwrap_or(Warmup::Takes(st.warmup.unwrap_or(Duration::ZERO)));
        let (signal, exited) = ExitSignal::new();
        let id = st.made.len();
        let memory = Arc::new(AtomicU64::new(0));
        let probes = Arc::new(Mutex::new(Probes::default()));
        st.made.push(Made {
            id,
            slot,
            size: info.size,
            signal: signal.clone(),
            started: Instant::now(),
            memory: memory.clone(),
            probes: probes.clone(),
        });
        Ok(Fake {
            id,
            slot,
            jobs: 0,
            warmup,
            signal,
            exited: Some(exited),
            memory,
            probes,
        })
    }

    /// Slots of the workers made so far, in the order they were made.
    pub fn started_slots(&self) -> Vec<usize> {
        self.state
            .lock()
            .unwrap()
            .made
            .iter()
            .map(|m| m.slot)
            .collect()
    }

    /// The running size of the pool as each worker was made, in the order
    /// they were made.
    pub fn started_sizes(&self) -> Vec<usize> {
        self.state
            .lock()
            .unwrap()
            .made
            .iter()
            .map(|m| m.size)
            .collect()
    }

    /// How many workers were made.
    pub fn made(&self) -> usize {
        self.state.lock().unwrap().made.len()
    }

    /// How many workers have not exited.
    pub fn alive(&self) -> usize {
        self.state
            .lock()
            .unwrap()
            .made
            .iter()
            .filter(|m| !m.signal.has_exited())
            .count()
    }

    /// Whether worker `id` has exited (killed, closed or on its own).
    pub fn has_exited(&self, id: usize) -> bool {
        self.state.lock().unwrap().made[id].signal.has_exited()
    }

    /// Makes worker `id` exit on its own.
    pub fn exit(&self, id: usize) {
        self.state.lock().unwrap().made[id]
            .signal
            .exit(ExitStatus::Code(1));
    }

    /// The id of the newest live worker in `slot`.
    pub fn in_slot(&self, slot: usize) -> Option<usize> {
        self.state
            .lock()
            .unwrap()
            .made
            .iter()
            .rev()
            .find(|m| m.slot == slot && !m.signal.has_exited())
            .map(|m| m.id)
    }

    /// Sets the memory worker `id`'s meter reads, in bytes.
    pub fn set_memory(&self, id: usize, bytes: u64) {
        self.state.lock().unwrap().made[id]
            .memory
            .store(bytes, Ordering::SeqCst);
    }

    /// How worker `id` answers its probes from now.
    pub fn set_health(&self, id: usize, health: Health) {
        self.state.lock().unwrap().made[id]
            .probes
            .lock()
            .unwrap()
            .health = health;
    }

    /// How many probes worker `id` has been asked.
    pub fn probes(&self, id: usize) -> usize {
        self.state.lock().unwrap().made[id]
            .probes
            .lock()
            .unwrap()
            .count
    }

    /// When worker `id` was made.
    pub fn started_at(&self, id: usize) -> Instant {
        self.state.lock().unwrap().made[id].started
    }
}
