use super::{EvictAfter, Eviction, IdleWorker};

/// Evicts nothing: idle workers stay until the pool closes.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoEviction;

impl Eviction for NoEviction {
    fn idle(&self, _worker: IdleWorker) -> Option<EvictAfter> {
        None
    }

    fn may_evict(&self) -> bool {
        false
    }
}
