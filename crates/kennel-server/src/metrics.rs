//! `GET /metrics`: Prometheus text from the `metrics` facade: the pools'
//! own metrics (labelled `pool`), the service's HTTP metrics and, at each
//! scrape, each pool's `kennel_pool_healthy` (docs/METRICS.md). The
//! recorder is installed once per process; the exporter's listener is unused.

use std::sync::OnceLock;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::state::AppState;

/// Histogram buckets, in seconds: from 1 ms to 5 minutes, finer from
/// 0.5 s to 5 s where costly jobs often take (`server.histogram_buckets`
/// sets others).
pub(crate) const BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 7.5,
    10.0, 30.0, 60.0, 300.0,
];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the Prometheus recorder as the process's `metrics` recorder (once;
/// later calls return the same handle) and returns the handle that renders it.
///
/// When another recorder was installed first, the handle renders only
/// what was recorded through it, which is nothing; a warning is logged.
///
/// # Panics
///
/// Never: the default buckets are not empty.
pub fn install() -> PrometheusHandle {
    install_with(BUCKETS)
}

/// As [`install`], with `buckets` (upper bounds in seconds, checked by the
/// config: not empty, increasing) for every histogram. Only the first
/// call of the process chooses them.
///
/// # Panics
///
/// When `buckets` is empty.
pub(crate) fn install_with(buckets: &[f64]) -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets(buckets)
                .expect("buckets are not empty")
                .build_recorder();
            let handle = recorder.handle();
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!(target: "kennel_server", "a metrics recorder was already installed; /metrics shows only its own");
            }
            crate::ops::families::describe();
            handle
        })
        .clone()
}

/// Prometheus text, families sorted by name, each with `# HELP` and `# TYPE`.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "operators",
    responses((status = 200, description = "Prometheus text (version 0.0.4)", content_type = "text/plain"))
)]
pub(crate) async fn render(State(state): State<AppState>) -> Response {
    // Each pool's health from a fresh snapshot (the pools keep their own
    // count gauges), and the count of log lines dropped.
    metrics::counter!("kennel_log_dropped_lines_total").absolute(crate::logs::dropped_lines());
    for entry in state.pools().list() {
        metrics::gauge!("kennel_pool_healthy", "pool" => entry.name)
            .set(if entry.stats.is_healthy() { 1.0 } else { 0.0 });
    }
    crate::tenants::record_loads(&state);
    let body = match state.metrics() {
        Some(handle) => {
            handle.run_upkeep();
            let live = state.pools().list();
            only_live_pools(&crate::ops::families::stable(&handle.render()), |name| {
                live.iter().any(|p| p.name == name)
            })
        }
        None => String::new(),
    };
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

/// `text` less the series of pools no longer served (the recorder keeps
/// every series it saw): a line labelled `pool="<name>"` stays only when
/// `live(name)`.
fn only_live_pools(text: &str, live: impl Fn(&str) -> bool) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let pool = line
            .split_once('{')
            .and_then(|(_, labels)| labels.split_once("pool=\""))
            .and_then(|(before, rest)| {
                // The label itself, not one whose name ends in `pool`.
                (before.is_empty() || before.ends_with(',')).then_some(rest)
            })
            .and_then(|rest| rest.split_once('"'))
            .map(|(name, _)| name);
        if pool.is_none_or(&live) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// One thing counted in the gauge `name` while it lives (an open
/// connection, an `/events` subscriber).
pub(crate) struct Counted(&'static str);

impl Counted {
    pub(crate) fn new(name: &'static str) -> Self {
        metrics::gauge!(name).increment(1.0);
        Self(name)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        metrics::gauge!(self.0).decrement(1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::only_live_pools;

    #[test]
    fn the_series_of_a_pool_no_longer_served_are_left_out() {
        let text = "# TYPE kennel_jobs_total counter\nkennel_jobs_total{pool=\"a\"} 1\nkennel_jobs_total{pool=\"gone\"} 2\nkennel_x{route=\"/\",pool=\"gone\"} 3\nkennel_y{subpool=\"gone\"} 4\nkennel_log_dropped_lines_total 0\n";
        assert_eq!(
            only_live_pools(text, |p| p == "a"),
            "# TYPE kennel_jobs_total counter\nkennel_jobs_total{pool=\"a\"} 1\nkennel_y{subpool=\"gone\"} 4\nkennel_log_dropped_lines_total 0\n"
        );
    }
}
