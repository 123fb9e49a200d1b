//! A CPU budget per worker: each worker of a pool is told how many threads
//! it may use, through the variables the common numeric runtimes read, so
//! that `size` workers on a host do not each start one thread per core (an
//! ONNX or BLAS model server does by default, and `size` of them then fight
//! over the cores).

use std::num::NonZeroUsize;

/// The variables a budget sets: OpenMP, MKL, OpenBLAS, numexpr, Apple's
/// vecLib, rayon, and `KENNEL_THREADS` for the worker's own use (an ONNX
/// Runtime session's `intra_op_num_threads`, a thread pool's size).
pub const THREAD_VARIABLES: [&str; 7] = [
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "RAYON_NUM_THREADS",
    "KENNEL_THREADS",
];

/// How many threads each worker of a pool may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadBudget {
    /// The host's cores shared out among the pool's running workers:
    /// `cores / size`, at least 1, with `cores` as
    /// [`std::thread::available_parallelism`] counts them (the CPU affinity
    /// and a cgroup's quota taken into account). The size is the pool's as
    /// each worker starts: after a resize, workers started afterwards get
    /// the new share; those already running keep theirs.
    Share,
    /// This many threads for each worker.
    PerWorker(NonZeroUsize),
}

impl ThreadBudget {
    /// The threads one worker of a pool of `size` gets.
    pub fn threads(self, size: usize) -> usize {
        match self {
            Self::Share => {
                let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
                (cores / size.max(1)).max(1)
            }
            Self::PerWorker(n) => n.get(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_is_the_cores_over_the_size_and_at_least_one() {
        let cores = std::thread::available_parallelism().unwrap().get();
        assert_eq!(ThreadBudget::Share.threads(1), cores);
        assert_eq!(ThreadBudget::Share.threads(cores), 1);
        assert_eq!(ThreadBudget::Share.threads(cores * 4), 1);
        assert_eq!(ThreadBudget::Share.threads(0), cores);
        let three = NonZeroUsize::new(3).unwrap();
        assert_eq!(ThreadBudget::PerWorker(three).threads(64), 3);
    }
}
