//! The back-off before an eager startup refills a slot.

use std::time::Duration;

/// A worker that ran this long is not an early exit, and ends the back-off.
pub(crate) const EARLY_EXIT: Duration = Duration::from_secs(600);

/// The longest back-off.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// The wait after `early_exits` early exits in a row: 1 s, 2 s, 4 s … 60 s.
/// Zero early exits means no wait.
pub(crate) fn delay(early_exits: u32) -> Duration {
    if early_exits == 0 {
        return Duration::ZERO;
    }
    let secs = 1u64.checked_shl(early_exits - 1).unwrap_or(u64::MAX);
    Duration::from_secs(secs).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_from_one_second_and_stop_at_sixty() {
        let got: Vec<u64> = (1..=9).map(|n| delay(n).as_secs()).collect();
        assert_eq!(got, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(delay(0), Duration::ZERO);
        assert_eq!(delay(200), MAX_BACKOFF);
    }
}
