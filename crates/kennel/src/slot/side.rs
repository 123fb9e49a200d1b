//! What a slot holds beside its worker with `max_surge`: the replacement
//! that warms (or is warm) for it above the capacity, or, once that
//! replacement took the slot, the old worker on its way out.
//!
//! ```text
//!   slot:  old worker (idle, lent) ───────────────────▶ retired ─▶ Closing
//!   side:        Warming ──ready──▶ Warm ──takes the slot──▶ Leaving(old) ─exit─▶ none
//! ```
//!
//! A side carries its own generation: the reports of its worker's tasks
//! (warm-up, exit) name it, so the slot tells them from its main worker's.

use std::sync::Arc;

use super::{Live, WorkerCell};
use crate::event::RetireReason;
use crate::timer::Timer;

/// The other worker of a slot.
#[derive(Debug)]
pub(crate) enum Side<W> {
    /// A replacement warms, on a task of the pool (dropping `warmup`
    /// cancels it); `live` once the factory made it.
    Warming {
        generation: u64,
        live: Option<Live>,
        warmup: Timer,
        /// Why the slot's worker is being replaced.
        reason: RetireReason,
    },
    /// The replacement is ready; it takes the slot as soon as the old
    /// worker is free.
    Warm {
        generation: u64,
        worker: W,
        live: Live,
        reason: RetireReason,
    },
    /// The replacement took the slot; the old worker closes (or a
    /// called-off replacement does), and the side ends with its exit.
    Leaving {
        generation: u64,
        cell: Arc<WorkerCell>,
    },
}

impl<W> Side<W> {
    /// The generation its worker's reports carry.
    pub(crate) fn generation(&self) -> u64 {
        match self {
            Self::Warming { generation, .. }
            | Self::Warm { generation, .. }
            | Self::Leaving { generation, .. } => *generation,
        }
    }

    /// Whether it is a replacement (warming or warm), not a leaving worker.
    pub(crate) fn is_surge(&self) -> bool {
        !matches!(self, Self::Leaving { .. })
    }

    /// Its worker's cell, once made.
    pub(crate) fn cell(&self) -> Option<&Arc<WorkerCell>> {
        match self {
            Self::Warming { live, .. } => live.as_ref().map(|l| &l.cell),
            Self::Warm { live, .. } => Some(&live.cell),
            Self::Leaving { cell, .. } => Some(cell),
        }
    }
}
