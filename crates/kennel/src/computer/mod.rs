//! What the computer can give: CPUs, free memory and GPUs. The trait is here;
//! [`TestComputer`] is a computer a test sets, and [`SystemComputer`] reads
//! the machine (its cgroup and `/proc`).

use std::sync::Arc;

mod cgroup;
mod cgroup_mount;
mod gpu;
mod meminfo;
mod nvml;
mod system;
mod test_computer;

pub use gpu::{Gpu, GpuError, GpuProcess};
pub use system::SystemComputer;
pub use test_computer::TestComputer;

/// Tells a sizing how many CPUs and how much free memory the pool may use.
///
/// The pool reads it when it is built (capacity), a sizing reads the free
/// memory again before a new worker starts, and a learning sizing reads it
/// after each window.
///
/// Memory held by the pool's own workers must not count against the pool
/// (docs/internals.md). A sizing therefore asks
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

    /// Its GPUs now (devices, or the MIG instances of a device in MIG
    /// mode), with their free memory and the processes on each; or why
    /// there are none to use. Read before a worker that wants a GPU starts,
    /// and as often as `memory_check_every` while such workers run.
    ///
    /// The default reports none. [`SystemComputer`] asks NVIDIA's driver.
    ///
    /// # Errors
    ///
    /// Why this computer has no GPUs to give: no driver, or the driver
    /// failed to answer.
    fn gpus(&self) -> Result<Vec<Gpu>, GpuError> {
        Err(GpuError("this computer reports no GPUs".to_owned()))
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
    fn gpus(&self) -> Result<Vec<Gpu>, GpuError> {
        (**self).gpus()
    }
}
