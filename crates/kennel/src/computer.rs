//! What the computer can give: CPUs and free memory (SPEC S9).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Tells a sizing how many CPUs and how much free memory the pool may use.
///
/// The pool reads it when it is built (capacity) and a learning sizing reads
/// the free memory again after each window. A host that runs several pools can
/// hand each a share, for example by wrapping [`SystemComputer`] and halving
/// its memory.
pub trait Computer: Send + Sync + 'static {
    /// How many CPUs the pool may use (at least 1).
    fn available_parallelism(&self) -> usize;
    /// How many bytes of memory are free now.
    fn available_memory(&self) -> u64;
}

fn _obj_safe(_: &dyn Computer) {}

impl<C: Computer + ?Sized> Computer for Arc<C> {
    fn available_parallelism(&self) -> usize {
        (**self).available_parallelism()
    }
    fn available_memory(&self) -> u64 {
        (**self).available_memory()
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
/// pool's own workers hold; the pool adds that back itself when it checks
/// whether its running workers fit (SPEC S7).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemComputer;

impl Computer for SystemComputer {
    fn available_parallelism(&self) -> usize {
        crate::system_computer::available_parallelism()
    }
    fn available_memory(&self) -> u64 {
        crate::system_computer::available_memory()
    }
}
