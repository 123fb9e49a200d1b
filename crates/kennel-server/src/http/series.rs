//! The handles of the HTTP metrics' series, kept once per set of labels.
//!
//! The `metrics` macros find a series by its name and labels on every call
//! (a key built and hashed, the recorder's registry searched): for the two
//! series each request records, about 3,900 instructions a request, more
//! than the Host guard and the token check together (ADR 0052). The labels
//! come from closed sets ([`crate::http::labels`]), so the handles kept
//! are as many as the series, and each is found with one read lock. A
//! series is registered at its first request, with the `metrics` recorder
//! installed then.

use metrics::{Counter, Histogram};

use super::read_mostly::{ReadMostly, with_entry};

/// `kennel_http_requests_total` by method, route and status.
type RequestKey = (&'static str, &'static str, &'static str);

/// `kennel_http_request_duration_seconds` by method and route.
type DurationKey = (&'static str, &'static str);

/// The HTTP series of one service, by their labels.
#[derive(Debug, Default)]
pub(crate) struct HttpSeries {
    requests: ReadMostly<RequestKey, Counter>,
    durations: ReadMostly<DurationKey, Histogram>,
}

impl HttpSeries {
    /// Counts one request and records its time, in seconds.
    pub(crate) fn record(
        &self,
        method: &'static str,
        route: &'static str,
        status: &'static str,
        seconds: f64,
    ) {
        with_entry(
            &self.requests,
            &(method, route, status),
            || {
                let counter = metrics::counter!(
                    "kennel_http_requests_total",
                    "method" => method,
                    "route" => route,
                    "status" => status
                );
                ((method, route, status), counter)
            },
            |c| c.increment(1),
        );
        with_entry(
            &self.durations,
            &(method, route),
            || {
                let histogram = metrics::histogram!(
                    "kennel_http_request_duration_seconds",
                    "method" => method,
                    "route" => route
                );
                ((method, route), histogram)
            },
            |h| h.record(seconds),
        );
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    use super::*;

    #[test]
    fn each_request_counts_on_the_series_of_its_labels() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let series = HttpSeries::default();
        metrics::with_local_recorder(&recorder, || {
            series.record("POST", "/pools/{name}/jobs", "200", 0.001);
            series.record("POST", "/pools/{name}/jobs", "200", 0.002);
            series.record("POST", "/pools/{name}/jobs", "503", 0.003);
        });
        let mut counts = HashMap::new();
        let mut samples = 0;
        for (key, _, _, value) in snapshotter.snapshot().into_vec() {
            let labels: Vec<String> = key
                .key()
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            match value {
                DebugValue::Counter(n) => {
                    counts.insert(labels.join(","), n);
                }
                DebugValue::Histogram(v) => samples += v.len(),
                DebugValue::Gauge(_) => {}
            }
        }
        assert_eq!(
            counts.get("method=POST,route=/pools/{name}/jobs,status=200"),
            Some(&2)
        );
        assert_eq!(
            counts.get("method=POST,route=/pools/{name}/jobs,status=503"),
            Some(&1)
        );
        assert_eq!(samples, 3, "one duration per request");
    }
}
