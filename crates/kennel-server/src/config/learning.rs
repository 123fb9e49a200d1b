//! The settings of the learning sizings (`hill-climbing`, `gradient`) beside
//! `memory_per_worker` in a `sizing` table: the window, the pause bounds, the
//! seed.

use std::time::Duration;

use serde::Serialize;

use super::error::Refusal;
use super::human::HumanDuration;

/// The most jobs a window may be asked to count.
pub(crate) const MAX_WINDOW_JOBS: u32 = 10_000;
/// The shortest and the longest time a window may be asked to last.
pub(crate) const WINDOW_TIME_RANGE: (Duration, Duration) =
    (Duration::from_millis(10), Duration::from_secs(600));
/// The most windows a pause bound may be.
pub(crate) const MAX_PAUSE_WINDOWS: u32 = 1024;

/// The keys a learning sizing takes besides `memory_per_worker`, each
/// optional (kennel's default when left out).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub(crate) struct LearningConfig {
    /// `window_jobs`: jobs a window counts at least (default 20; fewer with
    /// quick windows once the spread of job times is known).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_jobs: Option<i64>,
    /// `window_time`: how long a window lasts at least (default `"2s"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_time: Option<HumanDuration>,
    /// `quick_windows`: windows of the jobs that measure ±5% once the
    /// spread is known, and trials that end once their jobs settle them
    /// (default true).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quick_windows: Option<bool>,
    /// `min_pause`: the first pause after a step that changes nothing, in
    /// windows (default 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_pause: Option<i64>,
    /// `max_pause`: the longest pause, in windows (default 16).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_pause: Option<i64>,
    /// `seed`: the seed of the random pause lengths, so that runs repeat
    /// (default: a random one at each start).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
}

/// A learning sizing (`HillClimbing`, `Gradient`: the same settings on two
/// types) with the settings of a [`LearningConfig`], kennel's defaults for
/// those left out.
macro_rules! tuned {
    ($config:expr, $sizing:expr) => {{
        let (jobs, time) = $config.window();
        let (shortest, longest) = $config.pause();
        let sizing = $sizing
            .window(jobs, time)
            .pause(shortest, longest)
            .quick_windows($config.quick_windows.unwrap_or(true));
        match $config.seed.and_then(|s| u64::try_from(s).ok()) {
            Some(seed) => sizing.seed(seed),
            None => sizing,
        }
    }};
}
pub(crate) use tuned;

impl LearningConfig {
    /// The keys set, as written (for a refusal of a kind they do not apply
    /// to).
    pub(crate) fn keys(&self) -> Vec<&'static str> {
        [
            ("window_jobs", self.window_jobs.is_some()),
            ("window_time", self.window_time.is_some()),
            ("quick_windows", self.quick_windows.is_some()),
            ("min_pause", self.min_pause.is_some()),
            ("max_pause", self.max_pause.is_some()),
            ("seed", self.seed.is_some()),
        ]
        .into_iter()
        .filter_map(|(key, set)| set.then_some(key))
        .collect()
    }

    /// Checks each value's range, naming its key (`sizing.window_jobs`).
    pub(crate) fn check(&self) -> Result<(), Refusal> {
        let field = |k: &str| format!("sizing.{k}");
        if let Some(n) = self.window_jobs
            && !(1..=i64::from(MAX_WINDOW_JOBS)).contains(&n)
        {
            return Err((
                field("window_jobs"),
                format!("{n} is out of range (allowed: 1 to {MAX_WINDOW_JOBS} jobs)"),
            ));
        }
        let (lo, hi) = WINDOW_TIME_RANGE;
        if let Some(t) = self.window_time
            && (t.0 < lo || t.0 > hi)
        {
            return Err((
                field("window_time"),
                format!("{t} is out of range (allowed: 10ms to 10m)"),
            ));
        }
        for (key, value) in [("min_pause", self.min_pause), ("max_pause", self.max_pause)] {
            if let Some(n) = value
                && !(1..=i64::from(MAX_PAUSE_WINDOWS)).contains(&n)
            {
                return Err((
                    field(key),
                    format!("{n} is out of range (allowed: 1 to {MAX_PAUSE_WINDOWS} windows)"),
                ));
            }
        }
        let (shortest, longest) = self.pause();
        if shortest > longest {
            let default = self.max_pause.map_or(" (the default)", |_| "");
            return Err((
                field("min_pause"),
                format!(
                    "{shortest} windows is longer than max_pause, {longest}{default} (allowed: at most max_pause)"
                ),
            ));
        }
        if let Some(seed) = self.seed
            && seed < 0
        {
            return Err((
                field("seed"),
                format!("{seed} is out of range (allowed: 0 to {})", i64::MAX),
            ));
        }
        Ok(())
    }

    /// The pause bounds, with kennel's defaults for those left out.
    pub(super) fn pause(&self) -> (u32, u32) {
        let get =
            |v: Option<i64>, default: u32| v.and_then(|n| u32::try_from(n).ok()).unwrap_or(default);
        (get(self.min_pause, 1), get(self.max_pause, 16))
    }

    /// The window, with kennel's defaults for what is left out.
    pub(super) fn window(&self) -> (u32, Duration) {
        (
            self.window_jobs
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(20),
            self.window_time.map_or(Duration::from_secs(2), |t| t.0),
        )
    }
}
