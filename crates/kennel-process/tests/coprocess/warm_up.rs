//! The warm-up: `ready()` waits for the ready line (or not, with
//! `ReadyMode::Immediate`), is remembered, may be dropped and awaited
//! again, skips lines before it, and fails on an exit or an error line.

use std::time::Duration;

use kennel::ExitStatus;
use kennel_process::{ProcessError, ReadyMode};
use serde_json::json;

use crate::common::{assert_process_ends, fixture, within};

#[tokio::test]
async fn the_warm_up_waits_for_the_ready_line() {
    let started = std::time::Instant::now();
    let mut worker = fixture(&["--warmup-ms", "300"]).spawn().expect("spawn");
    within("ready", worker.ready()).await.expect("ready");
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "ready came before the line"
    );
    // Ready is remembered: a second call resolves at once.
    within("ready again", worker.ready())
        .await
        .expect("ready again");
    let reply = within("echo", worker.request(&json!({"after": "warm-up"})))
        .await
        .expect("reply");
    assert_eq!(reply, json!({"after": "warm-up"}));
}

#[tokio::test]
async fn a_request_before_ready_waits_for_the_warm_up() {
    let mut worker = fixture(&["--warmup-ms", "100"]).spawn().expect("spawn");
    let reply = within("echo", worker.request(&json!({"early": true})))
        .await
        .expect("reply");
    assert_eq!(reply, json!({"early": true}));
}

#[tokio::test]
async fn a_dropped_warm_up_can_be_awaited_again() {
    let mut worker = fixture(&["--warmup-ms", "300"]).spawn().expect("spawn");
    let first = tokio::time::timeout(Duration::from_millis(50), worker.ready()).await;
    assert!(first.is_err(), "still warming up");
    within("ready", worker.ready())
        .await
        .expect("ready after all");
    let reply = within("echo", worker.request(&json!(1)))
        .await
        .expect("reply");
    assert_eq!(reply, json!(1));
}

#[tokio::test]
async fn a_failed_warm_up_is_an_error_with_the_exit_code() {
    let mut worker = fixture(&["--fail-warmup"]).spawn().expect("spawn");
    let pid = worker.pid();
    let err = within("ready", worker.ready())
        .await
        .expect_err("warm-up failed");
    let ProcessError::NotReady { reason, status, .. } = &err else {
        panic!("expected NotReady, got {err:?}");
    };
    assert_eq!(*status, Some(ExitStatus::Code(3)));
    assert_eq!(reason, "exited with code 3");
    assert_eq!(
        err.to_string(),
        "the worker ended its warm-up: exited with code 3; \
         last stderr line: fixture worker: warm-up failed"
    );
    assert_eq!(
        within("exit", worker.exited()).await.status,
        ExitStatus::Code(3)
    );
    assert_process_ends(pid).await;
}

#[tokio::test]
async fn an_error_line_instead_of_the_ready_line_fails_the_warm_up_with_its_message() {
    let mut worker = fixture(&["--error-before-ready", "--ignore-eof"])
        .spawn()
        .expect("spawn");
    let pid = worker.pid();
    let err = within("ready", worker.ready())
        .await
        .expect_err("warm-up failed");
    let ProcessError::NotReady { reason, .. } = &err else {
        panic!("expected NotReady, got {err:?}");
    };
    assert_eq!(reason, "cannot load the model");
    within("exit", worker.exited()).await;
    assert_process_ends(pid).await;
}

#[tokio::test]
async fn lines_before_the_ready_line_are_skipped() {
    let mut worker = fixture(&["--noise-before-ready"]).spawn().expect("spawn");
    within("ready", worker.ready())
        .await
        .expect("noise is skipped");
    let reply = within("echo", worker.request(&json!({"n": 1})))
        .await
        .expect("reply");
    assert_eq!(reply, json!({"n": 1}), "the noise was not taken as a reply");
}

#[tokio::test]
async fn an_immediate_worker_is_ready_without_a_line() {
    let mut worker = fixture(&["--no-ready", "--warmup-ms", "60000"])
        .ready(ReadyMode::Immediate)
        .spawn()
        .expect("spawn");
    // The fixture would wait a minute before reading: ready must not.
    within("ready", worker.ready())
        .await
        .expect("ready at once");
    assert!(worker.try_exited().is_none());
}
