//! [`TestComputer`]: a computer whose numbers a test sets.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::Computer;

/// A computer whose numbers a test sets and changes.
///
/// Clones share the numbers, so a test keeps one clone and changes what the
/// pool's sizing reads.
///
/// ```
/// use kennel::{Computer, TestComputer};
///
/// let computer = TestComputer::new(4, 8 << 30);
/// let seen_by_pool = computer.clone();
/// computer.set_memory(5 << 29); // 2.5 GiB
/// assert_eq!(seen_by_pool.available_memory(), 5 << 29);
/// ```
#[derive(Clone, Default)]
pub struct TestComputer {
    cpus: Arc<AtomicUsize>,
    memory: Arc<AtomicU64>,
}

impl TestComputer {
    /// A computer with `cpus` CPUs and `memory` bytes free.
    pub fn new(cpus: usize, memory: u64) -> Self {
        Self {
            cpus: Arc::new(AtomicUsize::new(cpus)),
            memory: Arc::new(AtomicU64::new(memory)),
        }
    }

    /// Changes the number of CPUs.
    pub fn set_cpus(&self, cpus: usize) {
        self.cpus.store(cpus, Ordering::Relaxed);
    }

    /// Changes the free memory, in bytes.
    pub fn set_memory(&self, bytes: u64) {
        self.memory.store(bytes, Ordering::Relaxed);
    }
}

impl Computer for TestComputer {
    fn available_parallelism(&self) -> usize {
        self.cpus.load(Ordering::Relaxed)
    }
    fn available_memory(&self) -> u64 {
        self.memory.load(Ordering::Relaxed)
    }
}

impl fmt::Debug for TestComputer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestComputer")
            .field("cpus", &self.available_parallelism())
            .field("memory", &self.available_memory())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn a_test_computer_gives_its_memory_as_given() {
        let computer = TestComputer::new(4, 8 * GIB);
        assert_eq!(computer.free_for_pool(0, 2 * GIB), 8 * GIB);
        computer.set_memory(5 * GIB / 2);
        assert_eq!(computer.free_for_pool(4, 2 * GIB), 5 * GIB / 2);
        let shared: Arc<dyn Computer> = Arc::new(computer);
        assert_eq!(shared.free_for_pool(4, 2 * GIB), 5 * GIB / 2);
    }
}
