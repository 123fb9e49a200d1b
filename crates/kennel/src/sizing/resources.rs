use std::fmt;
use std::sync::Arc;

use super::{SizePlan, Sizing, SizingDecision, SizingInput, SizingView};
use crate::computer::Computer;
use crate::error::BuildError;

/// Runs one worker per CPU, while each new worker finds its memory free.
///
/// Capacity = `min(cpus, free memory / memory_per_worker)`, at least 1, read
/// from the computer when the pool is built; a warning event says so when
/// memory would allow none.
#[derive(Clone)]
pub struct Resources {
    memory_per_worker: u64,
    computer: Arc<dyn Computer>,
}

impl Resources {
    /// One worker per CPU of `computer`, each needing `memory_per_worker` bytes.
    pub fn new(memory_per_worker: u64, computer: impl Computer) -> Self {
        Self {
            memory_per_worker,
            computer: Arc::new(computer),
        }
    }
}

impl fmt::Debug for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resources")
            .field("memory_per_worker", &self.memory_per_worker)
            .finish_non_exhaustive()
    }
}

/// Capacity from a computer: `min(cpus, free / per_worker)`, at least 1, and
/// a warning when memory allows none.
pub(crate) fn capacity_of(
    computer: &dyn Computer,
    memory_per_worker: u64,
) -> Result<SizePlan, BuildError> {
    if memory_per_worker == 0 {
        return Err(BuildError::new(
            "memory_per_worker",
            "0 bytes: each worker needs some memory (allowed: 1 byte or more)",
        ));
    }
    let cpus = computer.available_parallelism().max(1);
    let free = computer.available_memory();
    let by_memory = usize::try_from(free / memory_per_worker).unwrap_or(usize::MAX);
    let capacity = cpus.min(by_memory).max(1);
    let mut plan = SizePlan::new(capacity, capacity);
    if by_memory == 0 {
        plan.warning = Some(format!(
            "free memory ({free} bytes) allows no worker of {memory_per_worker} bytes; running 1"
        ));
    }
    Ok(plan)
}

impl Sizing for Resources {
    fn plan(&mut self) -> Result<SizePlan, BuildError> {
        capacity_of(&*self.computer, self.memory_per_worker)
    }

    fn observe(&mut self, _view: &SizingView, _input: SizingInput) -> SizingDecision {
        SizingDecision::default()
    }

    fn may_start(&mut self, view: &SizingView) -> bool {
        // The first worker always starts: a pool runs at least one.
        view.alive == 0 || self.computer.available_memory() >= self.memory_per_worker
    }
}
