use super::{SlotPhase, Starts, Startup};

/// Starts the running slots one after the other, each once the previous one
/// is ready: at most one worker warms up at a time.
#[derive(Debug, Clone, Copy, Default)]
pub struct OrderedReady;

impl Startup for OrderedReady {
    fn is_eager(&self) -> bool {
        true
    }
    fn next(&self, slots: &[SlotPhase], _ever_ready: bool) -> Starts {
        if slots.contains(&SlotPhase::Starting) {
            return Starts::None;
        }
        slots
            .iter()
            .position(|p| *p == SlotPhase::Wanted)
            .map_or(Starts::None, Starts::One)
    }
}
