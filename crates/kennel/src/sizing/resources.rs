use super::memory::Memory;
use super::{SizePlan, Sizing, SizingDecision, SizingInput, SizingView};
use crate::computer::Computer;
use crate::error::BuildError;

/// Runs one worker per CPU, while each new worker finds its memory free.
///
/// Capacity = `min(cpus, free memory / memory_per_worker)`, at least 1, read
/// from the computer when the pool is built; a warning event says so when
/// memory would allow none.
///
/// A new worker starts only while its memory is free beside the pool's live
/// workers, as [`Computer::free_for_pool`] counts them; the first
/// worker always starts.
#[derive(Debug, Clone)]
pub struct Resources {
    memory: Memory,
}

impl Resources {
    /// One worker per CPU of `computer`, each needing `memory_per_worker` bytes.
    pub fn new(memory_per_worker: u64, computer: impl Computer) -> Self {
        Self {
            memory: Memory::new(memory_per_worker, computer),
        }
    }
}

impl Sizing for Resources {
    fn plan(&mut self) -> Result<SizePlan, BuildError> {
        Ok(self.memory.plan()?.without_jobs())
    }

    fn observe(&mut self, _view: &SizingView, _input: SizingInput) -> SizingDecision {
        SizingDecision::default()
    }

    fn may_start(&mut self, view: &SizingView) -> bool {
        self.memory.may_start(view.alive)
    }
}
