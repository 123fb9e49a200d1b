//! [`SystemComputer`]: CPUs and free memory of the machine the pool runs on.
//!
//! CPUs are the affinity count (`std::thread::available_parallelism`), lowered
//! to `ceil(quota / period)` when a cgroup CPU quota is set, and at least 1.
//! Free memory is the smaller of the host's `MemAvailable` (see
//! [`meminfo`](super::meminfo)) and the cgroup's limit minus its usage (see
//! [`cgroup`](super::cgroup)).
//!
//! GPUs are NVIDIA's, read through its management library ([`nvml`](super::nvml)).
//!
//! Files that are missing or unreadable, and contents that do not parse, mean
//! "no limit known": nothing here panics. Off Linux the CPUs are the affinity
//! count and the memory is unknown (`u64::MAX`).

use std::num::NonZeroUsize;
use std::path::Path;

use super::Computer;
use super::cgroup::Cgroup;
use super::meminfo::parse_meminfo_available;

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
/// adds that back.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemComputer;

impl Computer for SystemComputer {
    /// The affinity count, lowered by a cgroup CPU quota, at least 1.
    fn available_parallelism(&self) -> usize {
        let affinity = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
        let quota = if cfg!(target_os = "linux") {
            Cgroup::find(&read_file).cpu_quota(&read_file)
        } else {
            None
        };
        cpus_within(affinity, quota)
    }

    /// The smaller of the host's `MemAvailable` and the cgroup's limit minus
    /// its usage; `u64::MAX` when neither can be read.
    fn available_memory(&self) -> u64 {
        if !cfg!(target_os = "linux") {
            return u64::MAX;
        }
        let host = read_file(Path::new("/proc/meminfo")).and_then(|s| parse_meminfo_available(&s));
        let cgroup = Cgroup::find(&read_file).memory_available(&read_file);
        min_known(host, cgroup).unwrap_or(u64::MAX)
    }

    fn free_for_pool(&self, pool_workers: usize, memory_per_worker: u64) -> u64 {
        with_pool_workers(self.available_memory(), pool_workers, memory_per_worker)
    }

    /// The GPUs NVIDIA's driver reports (`libnvidia-ml.so.1`, loaded on
    /// first use); without the driver, why there are none.
    fn gpus(&self) -> Result<Vec<super::Gpu>, super::GpuError> {
        super::nvml::read()
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

fn read_file(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// The CPUs left by `affinity` and a cgroup `quota` (in CPUs, rounded up),
/// at least 1.
pub(super) fn cpus_within(affinity: usize, quota: Option<f64>) -> usize {
    let cpus = affinity.max(1);
    match quota {
        // The quota is at most a few thousand CPUs; the cast saturates anyway.
        Some(q) if q.is_finite() && q > 1.0 => cpus.min(q.ceil() as usize),
        Some(_) => 1,
        None => cpus,
    }
}

/// The smaller of two numbers where either may be unknown.
fn min_known<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const GIB: u64 = 1 << 30;

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

    #[test]
    fn a_quota_rounds_up_and_caps_the_affinity_count() {
        assert_eq!(cpus_within(8, Some(1.5)), 2);
        assert_eq!(cpus_within(8, Some(2.0)), 2);
        assert_eq!(cpus_within(8, Some(0.1)), 1);
        assert_eq!(cpus_within(2, Some(16.0)), 2);
        assert_eq!(cpus_within(8, None), 8);
        assert_eq!(cpus_within(0, None), 1);
        assert_eq!(cpus_within(4, Some(f64::NAN)), 1);
    }

    #[test]
    fn min_known_takes_the_smaller_known_value() {
        assert_eq!(min_known(Some(3), Some(2)), Some(2));
        assert_eq!(min_known(Some(3), None), Some(3));
        assert_eq!(min_known(None, Some(2)), Some(2));
        assert_eq!(min_known::<u64>(None, None), None);
    }

    #[test]
    fn this_machine_has_a_cpu_and_free_memory() {
        let computer = SystemComputer;
        let cpus = computer.available_parallelism();
        assert!(cpus >= 1);
        let affinity = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
        assert!(cpus <= affinity);
        assert!(computer.available_memory() > 0);
    }
}
