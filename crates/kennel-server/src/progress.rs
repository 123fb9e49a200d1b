//! `kennel run`'s progress bar: while no worker is ready it says the pool
//! warms up (a rate would be 0/s and the ETA meaningless); from the first
//! ready worker on it shows the rate and the ETA measured from then, with
//! one decimal.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

/// The bar, and when the first worker was ready.
#[derive(Debug, Clone)]
pub(crate) struct Progress {
    bar: ProgressBar,
    started: Instant,
    ready_at: Arc<OnceLock<(Instant, u64)>>,
    total: Option<u64>,
}

impl Progress {
    /// A bar of `total` jobs (a spinner for stdin), hidden when `quiet`,
    /// in its warm-up form.
    pub(crate) fn new(total: Option<u64>, quiet: bool, workers: usize) -> Self {
        let bar = match total {
            Some(n) => ProgressBar::new(n),
            None => ProgressBar::new_spinner(),
        };
        if quiet {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
        let template = match total {
            Some(_) => "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} jobs, {msg}",
            None => "{spinner} [{elapsed_precise}] {pos} jobs, {msg}",
        };
        bar.set_style(
            ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.set_message(format!("warming up {workers} worker(s)"));
        bar.enable_steady_tick(Duration::from_millis(200));
        Self {
            bar,
            started: Instant::now(),
            ready_at: Arc::new(OnceLock::new()),
            total,
        }
    }

    /// A worker is ready: from now on the bar shows the rate and the ETA.
    pub(crate) fn ready(&self) {
        let now = (Instant::now(), self.bar.position());
        if self.ready_at.set(now).is_err() {
            return;
        }
        let ready_at = self.ready_at.clone();
        let rate = move |s: &ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = write!(w, "{}", rate_text(rate_since(&ready_at, s.pos())));
        };
        let ready_at = self.ready_at.clone();
        let eta = move |s: &ProgressState, w: &mut dyn std::fmt::Write| {
            let left = s.len().map(|len| len.saturating_sub(s.pos()));
            let _ = write!(w, "{}", eta_text(left, rate_since(&ready_at, s.pos())));
        };
        let template = match self.total {
            Some(_) => {
                "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} jobs, {rate}, ETA {eta1}"
            }
            None => "{spinner} [{elapsed_precise}] {pos} jobs, {rate}",
        };
        let style = ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .with_key("rate", rate)
            .with_key("eta1", eta);
        self.bar.set_style(style);
    }

    /// One more job done.
    pub(crate) fn inc(&self) {
        self.bar.inc(1);
    }

    /// Clears the bar.
    pub(crate) fn finish(&self) {
        self.bar.finish_and_clear();
    }

    /// How long the warm-up took, and the jobs per second since, for the
    /// summary (`None` when no worker was ever ready).
    #[allow(clippy::cast_precision_loss)]
    pub(crate) fn measured(&self, done: u64) -> Option<(Duration, f64)> {
        let (at, from) = *self.ready_at.get()?;
        let secs = at.elapsed().as_secs_f64().max(1e-3);
        Some((at - self.started, done.saturating_sub(from) as f64 / secs))
    }
}

/// Jobs per second since the first ready worker, once some time passed.
#[allow(clippy::cast_precision_loss)]
fn rate_since(ready_at: &OnceLock<(Instant, u64)>, pos: u64) -> Option<f64> {
    let (at, from) = *ready_at.get()?;
    let secs = at.elapsed().as_secs_f64();
    (secs >= 0.05).then(|| pos.saturating_sub(from) as f64 / secs)
}

/// `12.3/s`, or `-/s` while there is no measure yet.
pub(crate) fn rate_text(rate: Option<f64>) -> String {
    rate.map_or_else(|| "-/s".to_owned(), |r| format!("{r:.1}/s"))
}

/// The time left for `left` jobs at `rate`, in whole seconds (`1m 5s`),
/// or `-` without a rate.
#[allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]
pub(crate) fn eta_text(left: Option<u64>, rate: Option<f64>) -> String {
    match (left, rate) {
        (Some(left), Some(rate)) if rate > 0.0 => {
            let secs = (left as f64 / rate).ceil().min(1e9) as u64;
            humantime::format_duration(Duration::from_secs(secs)).to_string()
        }
        _ => "-".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_have_one_decimal_and_the_eta_whole_seconds() {
        assert_eq!(rate_text(Some(12.3456)), "12.3/s");
        assert_eq!(rate_text(None), "-/s");
        assert_eq!(eta_text(Some(130), Some(2.0)), "1m 5s");
        assert_eq!(eta_text(Some(130), Some(0.0)), "-");
        assert_eq!(eta_text(Some(0), Some(3.0)), "0s");
    }
}
