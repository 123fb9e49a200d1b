//! [`TestComputer`]: a computer whose numbers a test sets.

use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::{Computer, Gpu, GpuError, GpuProcess};

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
    gpus: Arc<Mutex<Vec<Gpu>>>,
}

impl TestComputer {
    /// A computer with `cpus` CPUs and `memory` bytes free.
    pub fn new(cpus: usize, memory: u64) -> Self {
        Self {
            cpus: Arc::new(AtomicUsize::new(cpus)),
            memory: Arc::new(AtomicU64::new(memory)),
            gpus: Arc::default(),
        }
    }

    /// Adds a GPU: id `id`, UUID `GPU-test-{id}`, `total` bytes, all free.
    pub fn add_gpu(&self, id: &str, total: u64) -> &Self {
        self.edit_gpus(|gpus| {
            gpus.push(Gpu {
                id: id.to_owned(),
                uuid: format!("GPU-test-{id}"),
                name: "test GPU".to_owned(),
                total,
                free: total,
                processes: Vec::new(),
            });
        });
        self
    }

    /// Process `pid` now holds `bytes` on GPU `id` (0: it let go), and the
    /// GPU's free memory moves by the difference.
    ///
    /// # Panics
    ///
    /// When there is no GPU `id`.
    pub fn set_gpu_process(&self, id: &str, pid: u32, bytes: u64) {
        self.edit_gpus(|gpus| {
            let gpu = gpus
                .iter_mut()
                .find(|g| g.id == id)
                .expect("no such test GPU");
            let before = gpu
                .processes
                .iter()
                .find(|p| p.pid == pid)
                .and_then(|p| p.memory)
                .unwrap_or(0);
            gpu.processes.retain(|p| p.pid != pid);
            if bytes > 0 {
                gpu.processes.push(GpuProcess {
                    pid,
                    group: Some(pid),
                    memory: Some(bytes),
                });
            }
            gpu.free = (gpu.free + before).saturating_sub(bytes);
        });
    }

    /// Sets GPU `id`'s free memory, as another user's process would.
    ///
    /// # Panics
    ///
    /// When there is no GPU `id`.
    pub fn set_gpu_free(&self, id: &str, bytes: u64) {
        self.edit_gpus(|gpus| {
            gpus.iter_mut()
                .find(|g| g.id == id)
                .expect("no such test GPU")
                .free = bytes;
        });
    }

    fn edit_gpus(&self, f: impl FnOnce(&mut Vec<Gpu>)) {
        f(&mut self.gpus.lock().unwrap_or_else(PoisonError::into_inner));
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
    /// The GPUs added; none added: no GPUs, as on a machine without a driver.
    fn gpus(&self) -> Result<Vec<Gpu>, GpuError> {
        let gpus = self
            .gpus
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if gpus.is_empty() {
            return Err(GpuError("the test computer has no GPUs".to_owned()));
        }
        Ok(gpus)
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
