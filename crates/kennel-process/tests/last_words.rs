//! A worker's last words: the tail of its stderr is kept, bounded in lines
//! and bytes and in order, and a failed warm-up, a crash under a request and
//! a protocol error carry it, their message naming the last line.

#![cfg(target_os = "linux")]

mod common;

use common::within;
use kennel::ExitStatus;
use kennel_process::{
    CoprocessSpec, ProcessError, ReadyMode, STDERR_TAIL_BYTES, STDERR_TAIL_LINES,
};
use serde_json::json;

fn sh(script: &str) -> CoprocessSpec {
    CoprocessSpec::new(["sh", "-c", script])
}

#[tokio::test]
async fn a_failed_warm_up_carries_the_stderr_tail_and_names_its_last_line() {
    let mut worker = sh("echo 'loading the model' >&2; \
         echo 'model file not found: /models/x.bin' >&2; exit 1")
    .spawn()
    .expect("spawn");
    let err = within("ready", worker.ready())
        .await
        .expect_err("warm-up failed");
    assert!(matches!(err, ProcessError::NotReady { .. }), "{err:?}");
    assert_eq!(
        err.stderr(),
        ["loading the model", "model file not found: /models/x.bin"]
    );
    assert_eq!(
        err.to_string(),
        "the worker ended its warm-up: exited with code 1; \
         last stderr line: model file not found: /models/x.bin"
    );
}

#[tokio::test]
async fn the_stderr_tail_keeps_the_last_lines_in_order() {
    let mut worker =
        sh("i=1; while [ $i -le 50 ]; do echo \"line $i\" >&2; i=$((i+1)); done; exit 2")
            .spawn()
            .expect("spawn");
    let err = within("ready", worker.ready())
        .await
        .expect_err("warm-up failed");
    let expected: Vec<String> = (51 - STDERR_TAIL_LINES..=50)
        .map(|i| format!("line {i}"))
        .collect();
    assert_eq!(err.stderr(), expected);
    assert_eq!(worker.stderr_tail().lines(), expected);
}

#[tokio::test]
async fn the_stderr_tail_is_bounded_in_bytes() {
    // Ten lines of 1000 bytes: only the last four fit in 4 KiB.
    let mut worker = sh("for i in 0 1 2 3 4 5 6 7 8 9; do \
           printf \"$i%0999d\\n\" 0 >&2; done; exit 2")
    .spawn()
    .expect("spawn");
    let err = within("ready", worker.ready())
        .await
        .expect_err("warm-up failed");
    let lines = err.stderr();
    assert!(lines.iter().map(String::len).sum::<usize>() <= STDERR_TAIL_BYTES);
    let firsts: String = lines.iter().filter_map(|l| l.chars().next()).collect();
    assert_eq!(firsts, "6789");
    assert!(lines.iter().all(|l| l.len() == 1000), "{lines:?}");
}

#[tokio::test]
async fn a_crash_under_a_request_carries_the_stderr_tail() {
    let mut worker = sh("echo '{\"ready\":true}'; read line; \
         echo 'CUDA error: out of memory' >&2; exit 139")
    .spawn()
    .expect("spawn");
    within("ready", worker.ready()).await.expect("ready");
    let err = within("request", worker.request(&json!({"n": 1})))
        .await
        .expect_err("crashed");
    let ProcessError::Crashed { status, .. } = &err else {
        panic!("expected Crashed, got {err:?}");
    };
    assert_eq!(*status, Some(ExitStatus::Code(139)));
    assert_eq!(err.stderr(), ["CUDA error: out of memory"]);
    assert_eq!(
        err.to_string(),
        "worker failed before responding (exited with code 139); \
         last stderr line: CUDA error: out of memory"
    );
}

#[tokio::test]
async fn a_protocol_error_carries_the_stderr_tail() {
    let mut worker = sh("echo '{\"ready\":true}'; read line; \
         echo 'printing a debug dump' >&2; echo 'this is not JSON'; exec sleep 1000")
    .spawn()
    .expect("spawn");
    within("ready", worker.ready()).await.expect("ready");
    let err = within("request", worker.request(&json!({"n": 1})))
        .await
        .expect_err("bad output");
    assert!(matches!(err, ProcessError::Protocol { .. }), "{err:?}");
    assert_eq!(err.stderr(), ["printing a debug dump"]);
    assert!(
        err.to_string()
            .ends_with("; last stderr line: printing a debug dump"),
        "{err}"
    );
}

#[tokio::test]
async fn an_error_with_no_stderr_names_no_line() {
    let mut worker = sh("exit 4").spawn().expect("spawn");
    let err = within("ready", worker.ready())
        .await
        .expect_err("warm-up failed");
    assert!(err.stderr().is_empty());
    assert_eq!(
        err.to_string(),
        "the worker ended its warm-up: exited with code 4"
    );
}

#[tokio::test]
async fn the_stderr_tail_stays_readable_after_the_worker_ended() {
    let worker = sh("echo 'bye' >&2; exit 0")
        .ready(ReadyMode::Immediate)
        .spawn()
        .expect("spawn");
    let tail = worker.stderr_tail();
    within("exit", worker.exited()).await;
    within("stderr closed", tail.closed()).await;
    drop(worker);
    assert!(tail.is_closed());
    assert_eq!(tail.lines(), ["bye"]);
    assert_eq!(tail.last_line().as_deref(), Some("bye"));
}

/// The next event of `events` that `pick` takes.
async fn next_event<T>(
    events: &mut tokio::sync::broadcast::Receiver<kennel::Event>,
    mut pick: impl FnMut(kennel::Event) -> Option<T>,
) -> T {
    within("the event", async {
        loop {
            if let Some(found) = pick(events.recv().await.expect("the pool's events")) {
                return found;
            }
        }
    })
    .await
}

#[tokio::test]
async fn a_worker_that_crashes_under_a_job_says_its_last_words_in_the_event_and_the_error() {
    let pool = sh("echo '{\"ready\":true}'; read line; \
         echo 'loading weights' >&2; echo 'CUDA error: out of memory' >&2; exit 139")
    .pool()
    .sizing(kennel::Fixed(1))
    .build()
    .expect("pool");
    let mut events = pool.events();
    let err = within(
        "the job",
        pool.run(async |w: &mut kennel_process::Coprocess| w.request(&json!({"n": 1})).await),
    )
    .await;
    // A crash is the pool's error, with the exit and its last words.
    let Err(kennel::Error::Crashed {
        exit: Some(seen), ..
    }) = &err
    else {
        panic!("expected the pool's Crashed, got {err:?}");
    };
    let exit = next_event(&mut events, |e| match e {
        kennel::Event::Crashed { exit, .. } => Some(exit),
        _ => None,
    })
    .await;
    assert_eq!(exit.status, ExitStatus::Code(139));
    assert_eq!(
        exit.last_words,
        ["loading weights", "CUDA error: out of memory"]
    );
    assert_eq!(seen.last_words, exit.last_words);
    let message = err.expect_err("crashed").to_string();
    assert!(message.ends_with("CUDA error: out of memory"), "{message}");
    pool.close().await;
}

#[tokio::test]
async fn a_worker_that_exits_while_idle_says_its_last_words_in_the_event() {
    let pool = sh("echo '{\"ready\":true}'; echo 'lost the GPU' >&2; exit 3")
        .pool()
        .startup(kennel::Parallel)
        .sizing(kennel::Fixed(1))
        .build()
        .expect("pool");
    let mut events = pool.events();
    let exit = next_event(&mut events, |e| match e {
        kennel::Event::Exited { exit, .. } => Some(exit),
        _ => None,
    })
    .await;
    assert_eq!(exit.status, ExitStatus::Code(3));
    assert_eq!(exit.last_words, ["lost the GPU"]);
    pool.close().await;
}
