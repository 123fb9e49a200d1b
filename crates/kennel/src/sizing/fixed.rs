use super::{SizePlan, Sizing, SizingDecision, SizingInput, SizingView};
use crate::error::BuildError;

/// Runs `n` workers (capacity and size `n`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fixed(pub usize);

impl Sizing for Fixed {
    fn plan(&mut self) -> Result<SizePlan, BuildError> {
        if self.0 == 0 {
            return Err(BuildError::new(
                "sizing",
                "Fixed(0): a pool runs at least 1 worker (allowed: 1 or more)",
            ));
        }
        Ok(SizePlan::new(self.0, self.0).without_jobs())
    }

    fn observe(&mut self, _view: &SizingView, _input: SizingInput) -> SizingDecision {
        SizingDecision::default()
    }
}
