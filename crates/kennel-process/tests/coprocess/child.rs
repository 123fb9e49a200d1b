//! The child process itself: its environment and working directory, an
//! argv never run through a shell, a program that does not exist, and
//! its run time on the tokio clock.

use std::time::Duration;

use kennel::ExitStatus;
use kennel_process::{CoprocessSpec, ProcessError};
use serde_json::{Value, json};

use crate::common::{fixture, within};

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
