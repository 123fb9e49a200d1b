//! How much of a worker's stderr is kept: a token bucket of lines and one
//! of bytes, per worker. Within both, a line is logged and kept in the
//! tail; past either, it is read, dropped unlogged and counted, so that a
//! flood costs the server little and never blocks the worker.

use std::time::Duration;

use tokio::time::Instant;

/// Lines a worker may write on stderr per second, sustained, before lines
/// are dropped: 200.
pub const STDERR_LINES_PER_SEC: u32 = 200;

/// Lines a worker may write at once above the sustained rate: 1,000.
pub const STDERR_LINES_BURST: u32 = 1_000;

/// Bytes a worker may write on stderr per second, sustained: 1 MiB.
pub const STDERR_BYTES_PER_SEC: u32 = 1024 * 1024;

/// Bytes a worker may write at once above the sustained rate: 4 MiB.
pub const STDERR_BYTES_BURST: u32 = 4 * 1024 * 1024;

/// How often, at most, a worker that keeps flooding gets a log line saying
/// how many of its lines were dropped.
const DROP_NOTE_EVERY: Duration = Duration::from_secs(10);

/// A token bucket: `rate` tokens a second, at most `burst` held.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    rate: f64,
    burst: f64,
    at: Instant,
}

impl Bucket {
    fn new(rate: u32, burst: u32, now: Instant) -> Self {
        Self {
            tokens: f64::from(burst),
            rate: f64::from(rate),
            burst: f64::from(burst),
            at: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.at = now;
    }
}

/// The stderr budget of one worker, and the lines it dropped.
#[derive(Debug)]
pub(crate) struct StderrBudget {
    lines: Bucket,
    bytes: Bucket,
    /// Lines dropped over the budget since the last note.
    pub(crate) dropped: u64,
    last_note: Option<Instant>,
}

impl StderrBudget {
    pub(crate) fn new() -> Self {
        let now = Instant::now();
        Self {
            lines: Bucket::new(STDERR_LINES_PER_SEC, STDERR_LINES_BURST, now),
            bytes: Bucket::new(STDERR_BYTES_PER_SEC, STDERR_BYTES_BURST, now),
            dropped: 0,
            last_note: None,
        }
    }

    /// Whether the next line may be kept: one line and at least one byte
    /// are left. The line's bytes are paid after it was read
    /// ([`spend`](Self::spend)), so one line may overdraw the bytes.
    pub(crate) fn allows_line(&mut self) -> bool {
        let now = Instant::now();
        self.lines.refill(now);
        self.bytes.refill(now);
        self.lines.tokens >= 1.0 && self.bytes.tokens >= 1.0
    }

    /// Pays for a kept line of `len` bytes.
    #[allow(clippy::cast_precision_loss)]
    pub(crate) fn spend(&mut self, len: usize) {
        self.lines.tokens -= 1.0;
        self.bytes.tokens -= len as f64;
    }

    /// The lines dropped since the last note, when a note is due: at the
    /// worker's first drop, then at most every [`DROP_NOTE_EVERY`], and at
    /// the `end` of its stderr.
    pub(crate) fn note_due(&mut self, end: bool) -> Option<u64> {
        let due = end
            || self
                .last_note
                .is_none_or(|t| t.elapsed() >= DROP_NOTE_EVERY);
        if self.dropped == 0 || !due {
            return None;
        }
        self.last_note = Some(Instant::now());
        Some(std::mem::take(&mut self.dropped))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_burst_passes_then_the_sustained_rate() {
        let mut budget = StderrBudget::new();
        let mut kept = 0;
        for _ in 0..5_000 {
            if budget.allows_line() {
                budget.spend(10);
                kept += 1;
            }
        }
        assert_eq!(kept, STDERR_LINES_BURST);
        tokio::time::advance(Duration::from_secs(1)).await;
        let mut kept = 0;
        for _ in 0..5_000 {
            if budget.allows_line() {
                budget.spend(10);
                kept += 1;
            }
        }
        assert_eq!(kept, STDERR_LINES_PER_SEC);
    }

    #[tokio::test(start_paused = true)]
    async fn long_lines_run_out_of_bytes_first() {
        let mut budget = StderrBudget::new();
        let mut kept = 0;
        while budget.allows_line() {
            budget.spend(64 * 1024);
            kept += 1;
        }
        assert_eq!(kept, STDERR_BYTES_BURST / (64 * 1024));
    }
}
