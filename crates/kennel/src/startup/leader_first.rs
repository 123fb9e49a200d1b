use super::{SlotPhase, Starts, Startup};

/// Starts slot 0 alone, then the others together once it is ready: the first
/// worker fills a cache (compiled models, say) that the others read.
///
/// Once any worker of the pool has been ready, refills start together.
#[derive(Debug, Clone, Copy, Default)]
pub struct LeaderFirst;

impl Startup for LeaderFirst {
    fn is_eager(&self) -> bool {
        true
    }
    fn next(&self, slots: &[SlotPhase], ever_ready: bool) -> Starts {
        if ever_ready {
            return Starts::AllWanted;
        }
        match slots.first() {
            Some(SlotPhase::Wanted) => Starts::One(0),
            _ => Starts::None,
        }
    }
}
