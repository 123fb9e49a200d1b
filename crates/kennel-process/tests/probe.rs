//! Probes of real worker processes: `Coprocess::check` sends the spec's
//! probe request and passes on a reply that is not an error. With
//! `probe_on_lend`, a worker that answers its probe with an error is retired
//! before a job gets it, and the job gets a healthy one.

#![cfg(target_os = "linux")]

mod common;

use common::{assert_process_ends, within};
use kennel::{Event, Fixed, Parallel, RetireReason};
use kennel_process::{Coprocess, CoprocessSpec};
use serde_json::json;

/// A worker that answers `{"ping": true}` with `{"pong": true}`, or with an
/// error when it runs in slot 0, and a job with where it ran.
fn spec() -> CoprocessSpec {
    CoprocessSpec::new([
        "sh",
        "-c",
        r#"echo '{"ready":true}'
        while read line; do
          case "$line" in
            *ping*) if [ "$KENNEL_SLOT" = 0 ]; then echo '{"error":true,"message":"the model is not loaded"}'; else echo '{"pong":true}'; fi ;;
            *) echo "{\"slot\":$KENNEL_SLOT,\"pid\":$$}" ;;
          esac
        done"#,
    ])
    .probe(json!({"ping": true}))
}

#[tokio::test]
async fn a_worker_that_answers_its_probe_with_an_error_is_retired_before_a_job_gets_it() {
    let pool = spec()
        .pool()
        .startup(Parallel)
        .sizing(Fixed(2))
        .with_options(|o| o.probe_on_lend = true)
        .build()
        .expect("pool");
    let mut events = pool.events();
    // Both warm.
    within("warm-up", async {
        while pool.stats().idle < 2 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    let sick = pool.workers()[0].pid.expect("a pid");
    let reply = within(
        "the job",
        pool.run(async |w: &mut Coprocess| w.request(&json!({"job": 1})).await),
    )
    .await
    .expect("lent")
    .expect("the reply");
    assert_eq!(reply["slot"], 1, "the healthy worker served: {reply}");
    let (slot, message) = within("the probe's failure", async {
        loop {
            if let Event::ProbeFailed { slot, message } = events.recv().await.expect("events") {
                return (slot, message);
            }
        }
    })
    .await;
    assert_eq!(slot, 0);
    assert!(message.contains("the model is not loaded"), "{message}");
    let retired = within("the retirement", async {
        loop {
            if let Event::Retired {
                slot: 0, reason, ..
            } = events.recv().await.expect("events")
            {
                return reason;
            }
        }
    })
    .await;
    assert_eq!(retired, RetireReason::ProbeFailed);
    assert_process_ends(sick).await;
    pool.close().await;
}

#[tokio::test]
async fn a_healthy_worker_passes_its_probe_and_serves_the_job() {
    let pool = spec()
        .pool()
        .startup(Parallel)
        .sizing(Fixed(2))
        .build()
        .expect("pool");
    within("warm-up", async {
        while pool.stats().idle < 2 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    // Slot 1 answers its probe; slot 0's probe is an error.
    let results = pool
        .for_each_idle(async |w: &mut Coprocess| kennel::Worker::check(w).await.is_ok())
        .await;
    assert_eq!(results, [(0, false), (1, true)]);
    pool.close().await;
}
