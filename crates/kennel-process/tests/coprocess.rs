//! The JSON-lines protocol of a `Coprocess` (docs/PROTOCOL.md), with real child
//! processes: replies, error replies, bad output, crashes and cancellation.

#![cfg(target_os = "linux")]

mod common;

use std::time::Duration;

use common::{assert_process_ends, fixture, within};
use kennel::ExitStatus;
use kennel_process::{CoprocessSpec, ProcessError, ReadyMode};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

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

#[tokio::test]
async fn env_and_working_directory_reach_the_worker() {
    let dir = std::env::temp_dir().canonicalize().expect("temp dir");
    let mut worker = fixture(&[])
        .env("KENNEL_TEST_VALUE", "forty-two")
        .current_dir(&dir)
        .spawn()
        .expect("spawn");
    let value = within(
        "env",
        worker.request(&json!({"op": "env", "name": "KENNEL_TEST_VALUE"})),
    )
    .await
    .expect("env");
    assert_eq!(value, json!("forty-two"));
    let cwd = within("cwd", worker.request(&json!({"op": "cwd"})))
        .await
        .expect("cwd");
    assert_eq!(cwd, json!(dir));
}

#[tokio::test]
async fn a_cleared_environment_keeps_only_the_given_variables() {
    let mut worker = fixture(&[])
        .env_clear()
        .env("ONLY_THIS", "yes")
        .spawn()
        .expect("spawn");
    let path = within("env", worker.request(&json!({"op": "env", "name": "PATH"})))
        .await
        .expect("env");
    assert_eq!(path, Value::Null);
    let only = within(
        "env",
        worker.request(&json!({"op": "env", "name": "ONLY_THIS"})),
    )
    .await
    .expect("env");
    assert_eq!(only, json!("yes"));
}

#[tokio::test]
async fn the_argv_is_never_run_through_a_shell() {
    // Through a shell, `$HOME` would be expanded, `;` would start a second
    // command and the backquotes would run one; as an argv they are text.
    let note = "$HOME; echo pwned | `id` > /dev/null";
    let mut worker = fixture(&["--note", note]).spawn().expect("spawn");
    let argv = within("argv", worker.request(&json!({"op": "argv"})))
        .await
        .expect("argv");
    assert_eq!(argv, json!(["--note", note]));
}

#[tokio::test]
async fn a_program_that_does_not_exist_is_a_spawn_error() {
    let err = CoprocessSpec::new(["/no/such/kennel-worker"])
        .spawn()
        .expect_err("no such program");
    let ProcessError::Spawn { program, .. } = &err else {
        panic!("expected a spawn error, got {err:?}");
    };
    assert_eq!(program, "/no/such/kennel-worker");
    assert!(
        err.to_string()
            .starts_with("cannot run `/no/such/kennel-worker`")
    );

    let empty: [&str; 0] = [];
    let err = CoprocessSpec::new(empty).spawn().expect_err("empty argv");
    assert!(matches!(err, ProcessError::Spawn { .. }), "{err:?}");
}

#[tokio::test(start_paused = true)]
async fn ran_for_is_measured_on_the_tokio_clock() {
    let mut worker = fixture(&[]).spawn().expect("spawn");
    worker.ready().await.expect("ready");
    tokio::time::advance(Duration::from_secs(3600)).await;
    worker.kill();
    let exit = worker.exited().await;
    assert_eq!(exit.status, ExitStatus::Killed);
    assert!(exit.ran_for >= Duration::from_secs(3600), "{exit:?}");
}
