//! The Prometheus text of `GET /metrics` in a stable order, each family
//! with its `# HELP` and `# TYPE`.
//!
//! The exporter writes the families in the order of its hash maps, which
//! changes from one scrape to the next; `stable` sorts them by name, and
//! the series of each family by their labels (a histogram's series kept
//! whole: its buckets, `_sum` and `_count` stay together, in their order).
//! The help of every family is handed to the recorder once, when it is
//! installed (`describe`).

use kennel::{METRIC_FAMILIES, MetricFamily, MetricKind, describe_metrics};

/// The families the service records itself, beside the pools' own
/// ([`kennel::METRIC_FAMILIES`]).
pub(crate) const SERVICE_FAMILIES: &[MetricFamily] = &[
    MetricFamily::new(
        "kennel_http_requests_total",
        MetricKind::Counter,
        "HTTP requests answered, by method, matched route and status.",
    ),
    MetricFamily::new(
        "kennel_http_request_duration_seconds",
        MetricKind::Histogram,
        "Seconds from a request's arrival until its answer's head, by method and matched route.",
    ),
    MetricFamily::new(
        "kennel_pool_healthy",
        MetricKind::Gauge,
        "1 when no job of the pool waits without a worker starting, idle or lent, else 0.",
    ),
    MetricFamily::new(
        "kennel_tenant_jobs_waiting",
        MetricKind::Gauge,
        "Jobs of each configured tenant waiting for a worker, by pool and tenant.",
    ),
    MetricFamily::new(
        "kennel_tenant_jobs_running",
        MetricKind::Gauge,
        "Jobs of each configured tenant holding a worker, by pool and tenant.",
    ),
    MetricFamily::new(
        "kennel_tenant_jobs_total",
        MetricKind::Counter,
        "Jobs sent by each configured tenant, by pool, tenant and outcome (done, tenant-limit, failed).",
    ),
    MetricFamily::new(
        "kennel_http_connections",
        MetricKind::Gauge,
        "HTTP connections open now.",
    ),
    MetricFamily::new(
        "kennel_events_subscribers",
        MetricKind::Gauge,
        "/events streams open now.",
    ),
    MetricFamily::new(
        "kennel_events_lagged_total",
        MetricKind::Counter,
        "/events subscribers let go after falling too far behind.",
    ),
    MetricFamily::new(
        "kennel_log_dropped_lines_total",
        MetricKind::Counter,
        "Log lines dropped because stderr did not keep up.",
    ),
    MetricFamily::new(
        "kennel_worker_stderr_dropped_lines_total",
        MetricKind::Counter,
        "Worker stderr lines read past the budget of the worker and not logged, by pool.",
    ),
];

/// Describes every family the pools and the service record to the
/// installed recorder.
pub(crate) fn describe() {
    describe_metrics(METRIC_FAMILIES);
    describe_metrics(SERVICE_FAMILIES);
}

/// One family of the text: its comment lines and its series, each series
/// one or more lines.
struct Family<'a> {
    name: &'a str,
    comments: Vec<&'a str>,
    series: Vec<Vec<&'a str>>,
}

/// The family a `# HELP name …` or `# TYPE name …` line names.
fn comment_name(line: &str) -> Option<&str> {
    let rest = line
        .strip_prefix("# HELP ")
        .or_else(|| line.strip_prefix("# TYPE "))?;
    rest.split_whitespace().next()
}

/// A sample line's labels, without a histogram's `le` (the key a series
/// is sorted by).
fn series_key(line: &str) -> &str {
    let labels = line
        .find('{')
        .and_then(|i| line.rfind('}').map(|j| &line[i..=j]));
    labels.unwrap_or("")
}

/// `text` with its families sorted by name and each family's series by
/// their labels. A histogram's or summary's series is the run of lines up
/// to and including its `_count` line.
pub(crate) fn stable(text: &str) -> String {
    let mut families: Vec<Family<'_>> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if let Some(name) = comment_name(line) {
            if families.last().is_none_or(|f| f.name != name) {
                families.push(Family {
                    name,
                    comments: Vec::new(),
                    series: Vec::new(),
                });
            }
            if let Some(f) = families.last_mut() {
                f.comments.push(line);
            }
            continue;
        }
        let Some(f) = families.last_mut() else {
            // A sample before any comment: a family of its own.
            families.push(Family {
                name: line.split(['{', ' ']).next().unwrap_or(line),
                comments: Vec::new(),
                series: vec![vec![line]],
            });
            continue;
        };
        let grouped = f
            .comments
            .iter()
            .any(|c| c.ends_with(" histogram") || c.ends_with(" summary"));
        let open = grouped
            && f.series.last().is_some_and(|s| {
                !s.last()
                    .is_some_and(|l| l.starts_with(&format!("{}_count", f.name)))
            });
        match f.series.last_mut() {
            Some(s) if open => s.push(line),
            _ => f.series.push(vec![line]),
        }
    }
    families.sort_by(|a, b| a.name.cmp(b.name));
    let mut out = String::with_capacity(text.len());
    for mut f in families {
        // HELP before TYPE, as the exporter writes them.
        f.comments.sort_by_key(|c| !c.starts_with("# HELP"));
        f.series.sort_by(|a, b| {
            let key = |s: &Vec<&str>| s.last().map_or("", |l| series_key(l)).to_owned();
            key(a).cmp(&key(b))
        });
        for line in f.comments.iter().chain(f.series.iter().flatten()) {
            out.push_str(line);
            out.push('\n');
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_sorted_by_name_and_a_histograms_series_stay_whole() {
        let text = "\
# TYPE b_total counter
b_total{pool=\"y\"} 2
b_total{pool=\"x\"} 1

# HELP a_seconds Seconds.
# TYPE a_seconds histogram
a_seconds_bucket{pool=\"y\",le=\"0.5\"} 1
a_seconds_bucket{pool=\"y\",le=\"+Inf\"} 1
a_seconds_sum{pool=\"y\"} 0.1
a_seconds_count{pool=\"y\"} 1
a_seconds_bucket{pool=\"x\",le=\"0.5\"} 0
a_seconds_bucket{pool=\"x\",le=\"+Inf\"} 2
a_seconds_sum{pool=\"x\"} 3
a_seconds_count{pool=\"x\"} 2

";
        let want = "\
# HELP a_seconds Seconds.
# TYPE a_seconds histogram
a_seconds_bucket{pool=\"x\",le=\"0.5\"} 0
a_seconds_bucket{pool=\"x\",le=\"+Inf\"} 2
a_seconds_sum{pool=\"x\"} 3
a_seconds_count{pool=\"x\"} 2
a_seconds_bucket{pool=\"y\",le=\"0.5\"} 1
a_seconds_bucket{pool=\"y\",le=\"+Inf\"} 1
a_seconds_sum{pool=\"y\"} 0.1
a_seconds_count{pool=\"y\"} 1

# TYPE b_total counter
b_total{pool=\"x\"} 1
b_total{pool=\"y\"} 2

";
        assert_eq!(stable(text), want);
        assert_eq!(stable(want), want, "sorting twice changes nothing");
    }

    #[test]
    fn every_family_the_code_describes_is_in_metrics_md() {
        let doc = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/METRICS.md"
        ))
        .unwrap();
        for f in kennel::METRIC_FAMILIES.iter().chain(SERVICE_FAMILIES) {
            assert!(
                doc.contains(&format!("| `{}` | {} |", f.name, f.kind.as_str())),
                "docs/METRICS.md has no row for {} ({})",
                f.name,
                f.kind.as_str()
            );
        }
    }
}
