//! What the computer can give: CPUs and free memory (SPEC S9).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Tells a sizing how many CPUs and how much free memory the pool may use.
///
/// The pool reads it when it is built (capacity), a sizing reads the free
/// memory again before a new worker starts, and a learning sizing reads it
/// after each window.
///
/// Memory held by the pool's own workers must not count against the pool
/// (ADR 0008). A sizing therefore asks
/// [`free_for_pool`](Computer::free_for_pool), not
/// [`available_memory`](Computer::available_memory):
///
/// - By default the number is taken as given: it is the memory the pool's
///   workers may hold in all, theirs included. That is what a test means when
///   it sets `TestComputer::new(4, 8 GiB)` and later `set_memory(2.5 GiB)`
///   with 2 GiB per worker: 1 worker fits.
/// - [`SystemComputer`] reads the machine, whose free memory already lacks
///   what the pool's workers hold, so it adds that back.
///
/// A host that runs several pools can hand each a share. A share of the
/// machine's memory that wraps [`SystemComputer`] forwards `free_for_pool`
/// too, so the workers of its pool are still added back:
///
/// ```
/// use kennel::{Computer, SystemComputer};
///
/// /// Half of the machine's memory for this pool.
/// struct Half;
///
/// impl Computer for Half {
///     fn available_parallelism(&self) -> usize {
///         SystemComputer.available_parallelism()
///     }
///     fn available_memory(&self) -> u64 {
///         SystemComputer.available_memory() / 2
///     }
///     fn free_for_pool(&self, pool_workers: usize, memory_per_worker: u64) -> u64 {
///         SystemComputer.free_for_pool(pool_workers, memory_per_worker) / 2
///     }
/// }
/// ```
pub trait Computer: Send + Sync + 'static {
    /// How many CPUs the pool may use (at least 1).
    fn available_parallelism(&self) -> usize;
    /// How many bytes of memory are free now.
    fn available_memory(&self) -> u64;
    /// How many bytes the pool's workers may hold in all, counting the memory
    /// that its `pool_workers` live workers (of `memory_per_worker` bytes
    /// each) hold now as the pool's.
    ///
    /// The default takes [`available_memory`](Computer::available_memory) as
    /// given: a budget that the pool's own workers already sit in.
    /// [`SystemComputer`] adds back `pool_workers × memory_per_worker`,
    /// because the machine's free memory leaves out what they hold.
    fn free_for_pool(&self, pool_workers: usize, memory_per_worker: u64) -> u64 {
        let _ = (pool_workers, memory_per_worker);
        self.available_memory()
    }
}

fn _obj_safe(_: &dyn Computer) {}

impl<C: Computer + ?Sized> Computer for Arc<C> {
    fn available_parallelism(&self) -> usize {
        (**self).available_parallelism()
    }
    fn available_memory(&self) -> u64 {
        (**self).available_memory()
    }
    fn free_for_pool(&self, pool_workers: usize, memory_per_worker: u64) -> u64 {
        (**self).free_for_pool(pool_workers, memory_per_worker)
    }
}

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

/// The computer the pool runs on: CPUs (respecting a cgroup CPU quota) and
/// available memory (the smaller of the host's and the cgroup limit's).
///
/// It reads Linux's `/proc` and the process's own cgroup (v1 or v2), so it is
/// right in a container. Elsewhere, or when the files cannot be read, it falls
/// back to the CPU affinity count and to `u64::MAX` bytes (memory unknown, so
/// memory limits nothing).
///
/// It reports the machine's free memory, which already leaves out what this
/// pool's own workers hold, so [`free_for_pool`](Computer::free_for_pool)
/// adds that back (SPEC S7, ADR 0008).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemComputer;

impl Computer for SystemComputer {
    fn available_parallelism(&self) -> usize {
        crate::system_computer::available_parallelism()
    }
    fn available_memory(&self) -> u64 {
        crate::system_computer::available_memory()
    }
    fn free_for_pool(&self, pool_workers: usize, memory_per_worker: u64) -> u64 {
        with_pool_workers(self.available_memory(), pool_workers, memory_per_worker)
    }
}

/// `free` plus what `pool_workers` workers of `memory_per_worker` bytes hold,
/// saturating (an unknown `u64::MAX` stays unknown).
fn with_pool_workers(free: u64, pool_workers: usize, memory_per_worker: u64) -> u64 {
    let held = u64::try_from(pool_workers)
        .unwrap_or(u64::MAX)
        .saturating_mul(memory_per_worker);
    free.saturating_add(held)
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

    #[test]
    fn the_system_computer_adds_back_the_pools_own_workers() {
        assert_eq!(with_pool_workers(GIB / 2, 4, 2 * GIB), 8 * GIB + GIB / 2);
        assert_eq!(with_pool_workers(GIB, 0, 2 * GIB), GIB);
        assert_eq!(with_pool_workers(u64::MAX, 3, GIB), u64::MAX);
        assert_eq!(with_pool_workers(GIB, usize::MAX, GIB), u64::MAX);
        // On this machine: never less than what the workers hold.
        let held = 3 * GIB;
        assert!(SystemComputer.free_for_pool(3, GIB) >= held);
        assert!(Arc::new(SystemComputer).free_for_pool(3, GIB) >= held);
    }
}
