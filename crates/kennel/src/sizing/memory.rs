//! The memory rules that the sizings with a computer share (docs/internals.md): capacity when the pool is built, whether a new worker may start,
//! and how many running workers fit now.

use std::fmt;
use std::sync::Arc;

use super::SizePlan;
use crate::computer::Computer;
use crate::error::BuildError;

/// A computer and the memory each worker needs.
#[derive(Clone)]
pub(crate) struct Memory {
    per_worker: u64,
    computer: Arc<dyn Computer>,
}

impl Memory {
    pub(crate) fn new(per_worker: u64, computer: impl Computer) -> Self {
        Self {
            per_worker,
            computer: Arc::new(computer),
        }
    }

    pub(crate) fn per_worker(&self) -> u64 {
        self.per_worker
    }

    /// Bytes the pool's workers may hold in all, with `alive` of them alive.
    pub(crate) fn free_for_pool(&self, alive: usize) -> u64 {
        self.computer.free_for_pool(alive, self.per_worker)
    }

    /// Capacity = `min(cpus, free memory / memory_per_worker)`, at least 1,
    /// and a warning when memory allows no worker. The plan's size is the
    /// capacity.
    pub(crate) fn plan(&self) -> Result<SizePlan, BuildError> {
        if self.per_worker == 0 {
            return Err(BuildError::new(
                "memory_per_worker",
                "0 bytes: each worker needs some memory (allowed: 1 byte or more)",
            ));
        }
        let cpus = self.computer.available_parallelism().max(1);
        // No worker is alive yet.
        let free = self.free_for_pool(0);
        let by_memory = usize::try_from(free / self.per_worker).unwrap_or(usize::MAX);
        let capacity = cpus.min(by_memory).max(1);
        let mut plan = SizePlan::new(capacity, capacity);
        if by_memory == 0 {
            plan.warning = Some(format!(
                "free memory ({free} bytes) allows no worker of {} bytes; running 1",
                self.per_worker
            ));
        }
        Ok(plan)
    }

    /// How many workers of this pool fit in memory now, with `alive` alive.
    pub(crate) fn fit(&self, alive: usize) -> usize {
        usize::try_from(self.free_for_pool(alive) / self.per_worker.max(1)).unwrap_or(usize::MAX)
    }

    /// Whether one more worker fits beside the `alive` ones (kept, closing and
    /// starting ones hold memory too). The first worker always starts: a pool
    /// runs at least one.
    pub(crate) fn may_start(&self, alive: usize) -> bool {
        alive == 0 || self.fit(alive) > alive
    }
}

impl fmt::Debug for Memory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Memory")
            .field("per_worker", &self.per_worker)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::computer::{SystemComputer, TestComputer};

    const GIB: u64 = 1 << 30;

    #[test]
    fn the_plain_test_computer_is_a_budget_for_all_the_pools_workers() {
        let computer = TestComputer::new(4, 8 * GIB);
        let memory = Memory::new(2 * GIB, computer.clone());
        assert_eq!(memory.plan().unwrap().capacity, 4);
        assert_eq!(memory.fit(4), 4);
        assert!(memory.may_start(3));
        assert!(!memory.may_start(4));
        // Seed Z: free 8 GiB -> 2.5 GiB with 2 GiB per worker runs 1 worker.
        computer.set_memory(5 * GIB / 2);
        assert_eq!(memory.fit(4), 1);
        assert!(!memory.may_start(1));
        assert!(memory.may_start(0), "the first worker always starts");
    }

    #[test]
    fn the_system_computer_counts_the_pools_workers_as_the_pools() {
        let memory = Memory::new(GIB, SystemComputer);
        let alive = 3;
        assert!(
            memory.fit(alive) >= alive,
            "the running workers already fit"
        );
    }
}
