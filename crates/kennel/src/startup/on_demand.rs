use super::{SlotPhase, Starts, Startup};

/// Starts a worker only when a job needs one.
#[derive(Debug, Clone, Copy, Default)]
pub struct OnDemand;

impl Startup for OnDemand {
    fn is_eager(&self) -> bool {
        false
    }
    fn next(&self, _slots: &[SlotPhase], _ever_ready: bool) -> Starts {
        Starts::None
    }
}
