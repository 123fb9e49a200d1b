//! How many connections the service takes at once: at most
//! `max_connections`, and never so many that the pools' own workers find
//! no file descriptor left (each worker holds its three pipes in the
//! server, and a warm-up may open more).
//!
//! At start the process raises its soft `RLIMIT_NOFILE` to the hard limit,
//! then keeps [`BASE_FDS`] plus [`FDS_PER_WORKER`] for each worker the
//! pools may run out of the connection budget.

/// Descriptors kept for the process itself: the listener, the log file,
/// the runtime, the run directory, `/proc` reads.
pub(crate) const BASE_FDS: u64 = 64;

/// Descriptors kept for each worker the pools may run: its stdin, stdout
/// and stderr pipes, its pid descriptor, and room for a replacement
/// starting while it closes.
pub(crate) const FDS_PER_WORKER: u64 = 8;

/// The connection limit when none is given.
pub(crate) const DEFAULT_MAX_CONNECTIONS: usize = 10_000;

/// The connection budget the service settled on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConnectionBudget {
    /// Connections taken at once; more wait in the listen backlog.
    pub connections: usize,
    /// The process's soft descriptor limit, after raising it.
    pub fd_limit: u64,
    /// Descriptors kept for the process and the pools' workers.
    pub reserved: u64,
}

impl ConnectionBudget {
    /// Raises the soft descriptor limit to the hard one, then takes
    /// `wanted` connections, or fewer when the limit leaves less beside
    /// what `workers` workers need (at least 1).
    pub(crate) fn settle(wanted: usize, workers: usize) -> Self {
        let fd_limit = rlimit::increase_nofile_limit(u64::MAX).unwrap_or_else(|_| {
            rlimit::getrlimit(rlimit::Resource::NOFILE).map_or(1024, |(soft, _)| soft)
        });
        Self::within(wanted, workers, fd_limit)
    }

    /// The budget for a known descriptor limit.
    pub(crate) fn within(wanted: usize, workers: usize, fd_limit: u64) -> Self {
        let reserved = BASE_FDS + FDS_PER_WORKER * workers as u64;
        let left = usize::try_from(fd_limit.saturating_sub(reserved)).unwrap_or(usize::MAX);
        Self {
            connections: wanted.min(left).max(1),
            fd_limit,
            reserved,
        }
    }

    /// Whether the descriptor limit cut the connections below `wanted`.
    pub(crate) fn cut_below(&self, wanted: usize) -> bool {
        self.connections < wanted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workers_fds_are_kept_out_of_the_connection_budget() {
        let b = ConnectionBudget::within(10_000, 100, 1024);
        assert_eq!(b.reserved, 64 + 800);
        assert_eq!(b.connections, 1024 - 864);
        assert!(b.cut_below(10_000));
        let roomy = ConnectionBudget::within(500, 2, 1_048_576);
        assert_eq!(roomy.connections, 500);
        assert_eq!(ConnectionBudget::within(10, 1000, 1024).connections, 1);
    }
}
