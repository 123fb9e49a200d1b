//! [`Range`]: the values an option takes, and what its floor protects.
//!
//! One value per option in the declaration of [`Options`](super::Options)
//! gives both the check of [`Options::validate`](super::Options::validate)
//! and the row of the docs' table of option ranges
//! (`docs/concepts/abort-and-limits.md`, written from [`Range::table`]).

use std::time::Duration;

use super::MAX_DURATION;

/// The shortest time limit: timers run in whole milliseconds, so a shorter
/// one fires at the same tick.
pub const MIN_TIMER: Duration = Duration::from_millis(1);

/// The values one option takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Range {
    /// A duration from `floor` to [`MAX_DURATION`]; with `zero`, also 0,
    /// which means what it says.
    Time {
        floor: Duration,
        zero: Option<&'static str>,
        why: &'static str,
    },
    /// A whole number from `min` to `max` (`u64::MAX`: no bound).
    Count {
        min: u64,
        max: u64,
        why: &'static str,
    },
}

impl Range {
    /// A time limit of at least `floor`, because of `why`.
    pub(crate) const fn time(floor: Duration, why: &'static str) -> Self {
        Self::Time {
            floor,
            zero: None,
            why,
        }
    }

    /// A grace: 0 (`zero` says what it does) or at least [`MIN_TIMER`].
    pub(crate) const fn grace(zero: &'static str) -> Self {
        Self::Time {
            floor: MIN_TIMER,
            zero: Some(zero),
            why: TIMER_WHY,
        }
    }

    /// A whole number from `min` to `max`, because of `why`.
    pub(crate) const fn count(min: u64, max: u64, why: &'static str) -> Self {
        Self::Count { min, max, why }
    }

    /// What is allowed, as the refusals and the docs say it.
    pub(crate) fn allowed(&self) -> String {
        match *self {
            Self::Time { floor, zero, .. } => {
                let span = format!(
                    "at least {floor:?} and at most {} ms",
                    MAX_DURATION.as_millis()
                );
                match zero {
                    Some(zero) => format!("0 ({zero}), or {span}"),
                    None => span,
                }
            }
            Self::Count {
                min, max: u64::MAX, ..
            } => format!("{min} or more"),
            Self::Count { min, max, .. } => format!("{min} to {max}"),
        }
    }

    /// Why the range is what it is.
    pub(crate) fn why(&self) -> &'static str {
        match *self {
            Self::Time { why, .. } | Self::Count { why, .. } => why,
        }
    }

    fn check_time(&self, d: Duration) -> Result<(), String> {
        let Self::Time { floor, zero, .. } = *self else {
            unreachable!("a duration option is declared with a time range")
        };
        let fits = (d >= floor && d <= MAX_DURATION) || (d.is_zero() && zero.is_some());
        self.verdict(fits, format_args!("{d:?}"))
    }

    fn check_count(&self, n: u64) -> Result<(), String> {
        let Self::Count { min, max, .. } = *self else {
            unreachable!("a count option is declared with a count range")
        };
        self.verdict((min..=max).contains(&n), format_args!("{n}"))
    }

    fn verdict(&self, fits: bool, value: std::fmt::Arguments<'_>) -> Result<(), String> {
        if fits {
            return Ok(());
        }
        Err(format!(
            "{value} is out of range (allowed: {}; {})",
            self.allowed(),
            self.why()
        ))
    }

    /// The docs' table: one row per option with a range, in the order
    /// declared; `also` adds a rule between options to an option's row.
    #[cfg(test)]
    pub(crate) fn table(
        ranges: &[(&'static str, Self)],
        also: &[(&'static str, &'static str)],
    ) -> String {
        use std::fmt::Write as _;
        let mut out = String::from("| option | allowed | why |\n| --- | --- | --- |\n");
        for (name, range) in ranges {
            let mut allowed = range.allowed();
            for (_, rule) in also.iter().filter(|(n, _)| n == name) {
                let _ = write!(allowed, "; {rule}");
            }
            let _ = writeln!(out, "| `{name}` | {allowed} | {} |", range.why());
        }
        out
    }
}

/// Why most time limits stop at [`MIN_TIMER`].
pub(crate) const TIMER_WHY: &str =
    "the timers run in whole milliseconds: a shorter limit fires at the same tick";

/// A value an option's [`Range`] checks: a duration or a count, or either
/// inside an `Option` (none is always allowed).
pub(crate) trait Ranged {
    fn check(&self, range: &Range) -> Result<(), String>;
}

impl<T: Ranged> Ranged for Option<T> {
    fn check(&self, range: &Range) -> Result<(), String> {
        self.as_ref().map_or(Ok(()), |v| v.check(range))
    }
}

impl Ranged for Duration {
    fn check(&self, range: &Range) -> Result<(), String> {
        range.check_time(*self)
    }
}

macro_rules! counts {
    ($($t:ty),*) => {$(
        impl Ranged for $t {
            fn check(&self, range: &Range) -> Result<(), String> {
                range.check_count(u64::try_from(*self).unwrap_or(u64::MAX))
            }
        }
    )*};
}
counts!(usize, u32, u64);
