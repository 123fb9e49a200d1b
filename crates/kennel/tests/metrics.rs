//! Metrics through the `metrics` facade, labelled by pool.
mod support;

use kennel::{Error, Fixed, Parallel, Pool};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::{CompositeKey, MetricKind};
use support::{Fake, Farm, secs, settle, spawn_run_id};

/// The value of a metric with these labels (besides `pool`), if recorded.
fn find<'a>(
    snapshot: &'a [(CompositeKey, DebugValue)],
    kind: MetricKind,
    name: &str,
    labels: &[(&str, &str)],
) -> Option<&'a DebugValue> {
    snapshot
        .iter()
        .find(|(key, _)| {
            let k = key.key();
            key.kind() == kind
                && k.name() == name
                && k.labels()
                    .any(|l| l.key() == "pool" && l.value() == "models")
                && labels
                    .iter()
                    .all(|(n, v)| k.labels().any(|l| l.key() == *n && l.value() == *v))
        })
        .map(|(_, v)| v)
}

fn snapshot(s: &Snapshotter) -> Vec<(CompositeKey, DebugValue)> {
    s.snapshot()
        .into_vec()
        .into_iter()
        .map(|(k, _, _, v)| (k, v))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn metrics_count_jobs_rejections_retirements_and_times_by_pool() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let farm = Farm::new();
    let pool = metrics::with_local_recorder(&recorder, || {
        Pool::builder(farm.factory())
            .name("models")
            .startup(Parallel)
            .sizing(Fixed(1))
            .with_options(|o| o.max_waiting = Some(1))
            .metrics(true)
            .build()
            .unwrap()
    });
    // Three jobs of 1 s each.
    for _ in 0..3 {
        pool.run(async |w: &mut Fake| w.work(secs(1)).await)
            .await
            .unwrap();
    }
    // One held, one queued, one rejected.
    let held = pool.lend().await.unwrap();
    let queued = spawn_run_id(&pool);
    settle().await;
    assert!(matches!(pool.lend().await, Err(Error::Rejected { .. })));
    held.fail();
    queued.await.unwrap().unwrap();
    settle().await;

    let snap = snapshot(&snapshotter);
    let counter = |name: &str, labels: &[(&str, &str)]| match find(
        &snap,
        MetricKind::Counter,
        name,
        labels,
    ) {
        Some(DebugValue::Counter(n)) => *n,
        other => panic!("{name} {labels:?}: {other:?}"),
    };
    let gauge =
        |name: &str, labels: &[(&str, &str)]| match find(&snap, MetricKind::Gauge, name, labels) {
            Some(DebugValue::Gauge(g)) => g.into_inner(),
            other => panic!("{name} {labels:?}: {other:?}"),
        };
    assert_eq!(counter("kennel_jobs_total", &[]), 5);
    assert_eq!(
        counter("kennel_jobs_rejected_total", &[("reason", "queue-depth")]),
        1
    );
    assert_eq!(
        counter("kennel_jobs_rejected_total", &[("reason", "queue-wait")]),
        0
    );
    assert_eq!(
        counter("kennel_workers_retired_total", &[("reason", "failed")]),
        1
    );
    assert_eq!(
        counter("kennel_workers_retired_total", &[("reason", "timeout")]),
        0
    );
    assert_eq!(counter("kennel_workers_started_total", &[]), 2);
    assert_eq!(gauge("kennel_workers", &[("state", "idle")]), 1.0);
    assert_eq!(gauge("kennel_workers", &[("state", "lent")]), 0.0);
    assert_eq!(gauge("kennel_capacity", &[]), 1.0);
    assert_eq!(gauge("kennel_size", &[]), 1.0);
    assert_eq!(gauge("kennel_waiting", &[]), 0.0);
    assert_eq!(gauge("kennel_queue_high_water", &[]), 1.0);
    match find(&snap, MetricKind::Histogram, "kennel_job_seconds", &[]) {
        // The three 1 s jobs, the held lease (0 s), the queued job (0 s).
        Some(DebugValue::Histogram(values)) => {
            let mut v: Vec<f64> = values.iter().map(|x| x.into_inner()).collect();
            v.sort_by(f64::total_cmp);
            assert_eq!(v, [0.0, 1.0, 1.0, 1.0]);
        }
        other => panic!("job time: {other:?}"),
    }
    match find(&snap, MetricKind::Histogram, "kennel_wait_seconds", &[]) {
        Some(DebugValue::Histogram(values)) => assert_eq!(values.len(), 5),
        other => panic!("wait time: {other:?}"),
    }
}

/// Every family a pool records is one of `METRIC_FAMILIES`, of its kind,
/// and each of those is recorded: an exporter can give each its help.
#[tokio::test(start_paused = true)]
async fn every_family_a_pool_records_is_described_with_its_kind() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let farm = Farm::new();
    let pool = metrics::with_local_recorder(&recorder, || {
        Pool::builder(farm.factory())
            .name("models")
            .startup(Parallel)
            .sizing(Fixed(1))
            .metrics(true)
            .build()
            .unwrap()
    });
    pool.run(async |w: &mut Fake| w.work(secs(1)).await)
        .await
        .unwrap();
    settle().await;
    let recorded: std::collections::BTreeSet<(String, &str)> = snapshot(&snapshotter)
        .iter()
        .map(|(key, _)| {
            let kind = match key.kind() {
                MetricKind::Counter => "counter",
                MetricKind::Gauge => "gauge",
                MetricKind::Histogram => "histogram",
            };
            (key.key().name().to_owned(), kind)
        })
        .collect();
    let described: std::collections::BTreeSet<(String, &str)> = kennel::METRIC_FAMILIES
        .iter()
        .map(|f| (f.name.to_owned(), f.kind.as_str()))
        .collect();
    assert_eq!(recorded, described);
    pool.close().await;
}
