use super::{SlotPhase, Starts, Startup};

/// Starts every running slot when the pool is built, all together.
#[derive(Debug, Clone, Copy, Default)]
pub struct Parallel;

impl Startup for Parallel {
    fn is_eager(&self) -> bool {
        true
    }
    fn next(&self, _slots: &[SlotPhase], _ever_ready: bool) -> Starts {
        Starts::AllWanted
    }
}
