//! Requests to a worker and what comes back: replies, typed calls, error
//! replies, bad output, a crash mid-job, a dropped request, an exit while
//! idle, and every request after the worker broke.

use std::time::Duration;

use kennel::ExitStatus;
use kennel_process::ProcessError;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::common::{assert_process_ends, fixture, within};

#[tokio::test]
async fn a_request_gets_the_reply_on_the_next_line() {
    let mut worker = fixture(&[]).spawn().expect("spawn");
    within("ready", worker.ready()).await.expect("ready");
    for n in 0..5 {
        let request = json!({"n": n, "text": "line\nbreak and \"quotes\""});
        let reply = within("reply", worker.request(&request))
            .await
            .expect("reply");
        assert_eq!(reply, request);
    }
    let served = within("count", worker.request(&json!({"op": "count"})))
        .await
        .expect("count");
    assert_eq!(served, json!(6));
}

#[tokio::test]
async fn typed_calls_go_through_serde() {
    #[derive(Serialize)]
    struct Echo<'a> {
        op: &'a str,
        value: Point,
    }
    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    struct Point {
        x: i32,
        y: i32,
    }

    let mut worker = fixture(&[]).spawn().expect("spawn");
    let point: Point = within(
        "call",
        worker.call(&Echo {
            op: "echo",
            value: Point { x: 3, y: -4 },
        }),
    )
    .await
    .expect("typed reply");
    assert_eq!(point, Point { x: 3, y: -4 });

    // A reply of the wrong shape is a decode error, and the worker goes on.
    let err = within(
        "call",
        worker.call::<_, Point>(&json!({"op": "echo", "value": "not a point"})),
    )
    .await
    .expect_err("wrong shape");
    assert!(matches!(err, ProcessError::Decode { .. }), "{err:?}");
    assert!(err.worker_is_usable());
    let reply = within("echo", worker.request(&json!({"still": "alive"})))
        .await
        .expect("still usable");
    assert_eq!(reply, json!({"still": "alive"}));
}

#[tokio::test]
async fn a_request_that_cannot_be_encoded_sends_nothing() {
    use std::collections::BTreeMap;

    let mut worker = fixture(&[]).spawn().expect("spawn");
    let mut bad = BTreeMap::new();
    bad.insert((1, 2), "keys that are not strings");
    let err = within("call", worker.call::<_, Value>(&bad))
        .await
        .expect_err("cannot encode");
    assert!(matches!(err, ProcessError::Encode { .. }), "{err:?}");
    let served = within("count", worker.request(&json!({"op": "count"})))
        .await
        .expect("count");
    assert_eq!(served, json!(1), "the bad request was never sent");
}

#[tokio::test]
async fn an_error_reply_is_a_worker_error_with_its_message_and_the_worker_goes_on() {
    let mut worker = fixture(&[]).spawn().expect("spawn");
    let err = within(
        "error reply",
        worker.request(&json!({"op": "error", "message": "model not loaded"})),
    )
    .await
    .expect_err("error reply");
    match &err {
        ProcessError::Worker { message, .. } => assert_eq!(message, "model not loaded"),
        other => panic!("expected a worker error, got {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        "worker reported an error: model not loaded"
    );
    assert!(err.worker_is_usable());

    let reply = within("echo", worker.request(&json!({"op": "echo", "value": 1})))
        .await
        .expect("the worker is still usable");
    assert_eq!(reply, json!(1));
    assert!(worker.try_exited().is_none());
}

#[tokio::test]
async fn an_error_reply_without_a_message_reads_the_default_message() {
    let mut worker = fixture(&[]).spawn().expect("spawn");
    let err = within("error reply", worker.request(&json!({"op": "error"})))
        .await
        .expect_err("error reply");
    match err {
        ProcessError::Worker { message, .. } => {
            assert_eq!(message, "worker returned an error with no message");
        }
        other => panic!("expected a worker error, got {other:?}"),
    }
}

#[tokio::test]
async fn garbage_output_fails_the_job_with_a_protocol_error_and_kills_the_worker() {
    let mut worker = fixture(&[]).spawn().expect("spawn");
    let pid = worker.pid();
    let exited = worker.exited();
    let err = within("garbage", worker.request(&json!({"op": "garbage"})))
        .await
        .expect_err("garbage is an error");
    let ProcessError::Protocol { message, .. } = &err else {
        panic!("expected a protocol error, got {err:?}");
    };
    assert!(message.contains("not JSON"), "{message}");
    assert!(
        message.contains("Traceback"),
        "the message quotes the output: {message}"
    );
    assert!(!err.worker_is_usable());
    assert!(
        worker.try_exited().is_some(),
        "the worker has ended when the error is returned"
    );

    let exit = within("exit", exited).await;
    assert_eq!(
        exit.status,
        ExitStatus::Signal(9),
        "killed by the coprocess itself"
    );
    assert_process_ends(pid).await;
}

#[tokio::test]
async fn an_oversized_reply_fails_the_job_with_a_protocol_error_and_kills_the_worker() {
    let mut worker = fixture(&[]).max_line_bytes(1000).spawn().expect("spawn");
    let pid = worker.pid();
    let exited = worker.exited();

    // Exactly at the limit is fine: a JSON string of 998 bytes plus quotes.
    let reply = within(
        "reply",
        worker.request(&json!({"op": "oversized", "bytes": 998})),
    )
    .await
    .expect("a reply of exactly the limit");
    assert_eq!(reply.as_str().map(str::len), Some(998));

    let err = within(
        "oversized",
        worker.request(&json!({"op": "oversized", "bytes": 100_000})),
    )
    .await
    .expect_err("over the limit");
    let ProcessError::Protocol { message, .. } = &err else {
        panic!("expected a protocol error, got {err:?}");
    };
    assert!(message.contains("1000-byte limit"), "{message}");
    assert!(message.len() < 300, "the excerpt is short: {message}");

    let exit = within("exit", exited).await;
    assert_eq!(exit.status, ExitStatus::Signal(9));
    assert_process_ends(pid).await;
}

#[tokio::test]
async fn an_exit_mid_job_is_crashed_and_exited_reports_the_code() {
    let mut worker = fixture(&[]).spawn().expect("spawn");
    let pid = worker.pid();
    let exited = worker.exited();
    let err = within("crash", worker.request(&json!({"op": "crash", "code": 42})))
        .await
        .expect_err("the worker died");
    assert_eq!(
        err.to_string(),
        format!(
            "worker failed before responding (exited with code 42); \
             last stderr line: fixture worker {pid} warming up"
        )
    );
    let ProcessError::Crashed { status, .. } = err else {
        panic!("expected Crashed, got {err:?}");
    };
    // The status is given when the exit was seen soon after stdout closed.
    if let Some(status) = status {
        assert_eq!(status, ExitStatus::Code(42));
    }
    let exit = within("exit", exited).await;
    assert_eq!(exit.status, ExitStatus::Code(42));
    assert_process_ends(pid).await;
}

#[tokio::test]
async fn once_broken_every_later_request_fails_at_once() {
    let mut worker = fixture(&[]).spawn().expect("spawn");
    let _ = within("garbage", worker.request(&json!({"op": "garbage"})))
        .await
        .expect_err("garbage");
    for _ in 0..3 {
        let err = within("later request", worker.request(&json!({"n": 1})))
            .await
            .expect_err("broken");
        assert!(matches!(err, ProcessError::Crashed { .. }), "{err:?}");
    }
    // `ready` on a broken worker fails too, rather than waiting.
    let err = within("ready", worker.ready()).await.expect_err("broken");
    assert!(matches!(err, ProcessError::Crashed { .. }), "{err:?}");
}

#[tokio::test]
async fn a_request_dropped_before_its_reply_kills_the_worker_and_the_next_request_fails() {
    let mut worker = fixture(&[]).spawn().expect("spawn");
    let pid = worker.pid();
    let exited = worker.exited();
    within("ready", worker.ready()).await.expect("ready");

    let abandoned = tokio::time::timeout(
        Duration::from_millis(200),
        worker.request(&json!({"op": "hang"})),
    )
    .await;
    assert!(abandoned.is_err(), "the hanging request timed out");

    let exit = within("exit", exited).await;
    assert_eq!(
        exit.status,
        ExitStatus::Signal(9),
        "the dropped request killed it"
    );
    assert_process_ends(pid).await;

    let err = within("next request", worker.request(&json!({"n": 1})))
        .await
        .expect_err("out of step");
    let ProcessError::Protocol { message, .. } = &err else {
        panic!("expected a protocol error, got {err:?}");
    };
    assert!(message.contains("dropped before its reply"), "{message}");
    let err = within("third request", worker.request(&json!({"n": 2})))
        .await
        .expect_err("broken");
    assert!(matches!(err, ProcessError::Crashed { .. }), "{err:?}");
}

#[tokio::test]
async fn a_worker_that_exits_while_idle_resolves_exited_and_the_next_request_is_crashed() {
    let mut worker = fixture(&["--exit-after-ms", "100"]).spawn().expect("spawn");
    let pid = worker.pid();
    within("ready", worker.ready()).await.expect("ready");
    let exit = within("exit", worker.exited()).await;
    assert_eq!(exit.status, ExitStatus::Code(7));
    assert!(exit.ran_for >= Duration::from_millis(100), "{exit:?}");
    assert_process_ends(pid).await;

    let err = within("request", worker.request(&json!({"n": 1})))
        .await
        .expect_err("the worker is gone");
    assert!(matches!(err, ProcessError::Crashed { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "worker failed before responding (exited with code 7); \
             last stderr line: fixture worker {pid} warming up"
        )
    );
}
