//! `runtime_threads`: the threads of the service's own async runtime.

use std::num::NonZeroUsize;

use super::threads::count_or_words;

/// `runtime_threads`: `"auto"` (the default: half the CPUs kennel may use,
/// at least 1) or a number of threads. The service only moves bytes between
/// sockets and its workers' pipes; the workers do the work, and get the
/// other half. Set at start; a reload does not change it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum RuntimeThreads {
    /// `"auto"`: `cpus / 2`, at least 1.
    #[default]
    Auto,
    /// `n`: this many.
    Fixed(NonZeroUsize),
}

impl RuntimeThreads {
    /// The runtime's threads on a host where kennel may use `cpus` CPUs.
    pub(crate) fn resolve(self, cpus: usize) -> usize {
        match self {
            Self::Auto => (cpus / 2).max(1),
            Self::Fixed(n) => n.get(),
        }
    }

    /// The runtime's threads on this host: [`resolve`](Self::resolve) with
    /// the CPUs [`std::thread::available_parallelism`] counts (the CPU
    /// affinity mask and a cgroup's CPU quota included).
    pub(crate) fn here(self) -> usize {
        self.resolve(cpus_here())
    }

    /// `threads`, with where the number came from: `"1 (auto: half of 2
    /// CPUs)"`, or `"4"` when set.
    pub(crate) fn describe(self, threads: usize) -> String {
        match self {
            Self::Auto => format!("{threads} (auto: half of {} CPUs)", cpus_here()),
            Self::Fixed(_) => threads.to_string(),
        }
    }
}

/// The CPUs kennel may use here, at least 1.
pub(crate) fn cpus_here() -> usize {
    std::thread::available_parallelism().map_or(1, NonZeroUsize::get)
}

count_or_words!(
    RuntimeThreads,
    Fixed,
    "allowed: \"auto\" or a number of threads from 1 to 1024",
    "auto" => Auto
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_takes_half_the_cpus_and_at_least_one() {
        for (cpus, threads) in [(1, 1), (2, 1), (3, 1), (4, 2), (16, 8)] {
            assert_eq!(RuntimeThreads::Auto.resolve(cpus), threads, "{cpus} CPUs");
        }
        let four = RuntimeThreads::Fixed(NonZeroUsize::new(4).unwrap());
        assert_eq!(four.resolve(2), 4);
    }
}
