//! What waiting jobs were handed, under a lock of its own.

use super::Grant;

/// What jobs that left the queue were handed and have not taken yet, under
/// a lock of its own: a woken job takes its worker without the pool's lock.
/// Filled only under the pool's lock (pool lock, then this one).
#[derive(Debug)]
pub(crate) struct Mailbox<W>(parking_lot::Mutex<Vec<(u64, Grant<W>)>>);

impl<W> Mailbox<W> {
    pub(crate) fn new() -> Self {
        Self(parking_lot::Mutex::new(Vec::new()))
    }

    pub(super) fn put(&self, granted: &mut Vec<(u64, Grant<W>)>) {
        self.0.lock().append(granted);
    }

    /// Takes what job `id` was handed, if anything.
    pub(crate) fn take(&self, id: u64) -> Option<Grant<W>> {
        let mut granted = self.0.lock();
        let at = granted.iter().position(|(i, _)| *i == id)?;
        Some(granted.swap_remove(at).1)
    }
}
