//! How a `Coprocess` ends: kill, close (stdin EOF, SIGTERM, SIGKILL), drop, and
//! its own exit. After each, no process of its group is left: the worker and a
//! grandchild it started are checked by pid.

#![cfg(target_os = "linux")]

mod common;

use std::time::{Duration, Instant};

use common::{assert_group_ends, assert_process_ends, fixture, group_members, is_running, within};
use kennel::{ExitStatus, Worker};
use kennel_process::{Coprocess, ProcessError};
use serde_json::json;

/// Asks the worker to start `sleep 1000` in its group and returns its pid.
async fn start_grandchild(worker: &mut Coprocess) -> u32 {
    let reply = within("grandchild", worker.request(&json!({"op": "grandchild"})))
        .await
        .expect("grandchild started");
    let pid = reply["pid"].as_u64().expect("a pid") as u32;
    assert!(is_running(pid), "the grandchild runs");
    pid
}

#[tokio::test]
async fn the_worker_runs_in_its_own_process_group() {
    let mut worker = fixture(&[]).spawn().expect("spawn");
    let pid = worker.pid();
    let reported = within("pid", worker.request(&json!({"op": "pid"})))
        .await
        .expect("pid");
    assert_eq!(reported, json!(pid));
    let grandchild = start_grandchild(&mut worker).await;
    let mut members = group_members(pid);
    members.sort_unstable();
    let mut expected = vec![pid, grandchild];
    expected.sort_unstable();
    assert_eq!(
        members, expected,
        "the group holds the worker and its child"
    );
    assert!(
        !group_members(std::process::id()).contains(&pid),
        "not in the test's group"
    );
}

#[tokio::test]
async fn kill_ends_the_whole_process_group_and_exited_reports_killed() {
    let mut worker = fixture(&[]).spawn().expect("spawn");
    let pid = worker.pid();
    let grandchild = start_grandchild(&mut worker).await;
    let exited = Worker::exited(&mut worker);
    let killer = Worker::killer(&worker);

    killer.kill();
    killer.kill(); // a second call does nothing more

    let exit = within("exit", exited).await;
    assert_eq!(exit.status, ExitStatus::Killed);
    assert_process_ends(pid).await;
    assert_process_ends(grandchild).await;
    assert_group_ends(pid).await;

    let err = within("request", worker.request(&json!({"n": 1})))
        .await
        .expect_err("killed");
    assert!(matches!(err, ProcessError::Crashed { .. }), "{err:?}");
}

#[tokio::test]
async fn the_killer_works_while_a_request_holds_the_worker() {
    let mut worker = fixture(&[]).spawn().expect("spawn");
    let pid = worker.pid();
    within("ready", worker.ready()).await.expect("ready");
    let killer = worker.killer();
    let exited = worker.exited();
    let kill_soon = async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        killer.kill();
    };
    let hang = json!({"op": "hang"});
    let (result, ()) = within("hang and kill", async {
        tokio::join!(worker.request(&hang), kill_soon)
    })
    .await;
    let err = result.expect_err("killed mid-request");
    assert!(matches!(err, ProcessError::Crashed { .. }), "{err:?}");
    assert_eq!(within("exit", exited).await.status, ExitStatus::Killed);
    assert_process_ends(pid).await;
}

#[tokio::test]
async fn close_ends_a_worker_that_exits_when_stdin_ends() {
    let worker = fixture(&[])
        .close_grace(Duration::from_secs(30))
        .spawn()
        .expect("spawn");
    let pid = worker.pid();
    let started = Instant::now();
    let exit = within("close", worker.close()).await;
    assert_eq!(exit.status, ExitStatus::Code(0), "it exited by itself");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "no grace was waited"
    );
    assert_process_ends(pid).await;
}

#[tokio::test]
async fn close_sends_sigterm_after_the_grace_to_a_worker_that_ignores_stdin_eof() {
    let worker = fixture(&["--ignore-eof"])
        .close_grace(Duration::from_millis(200))
        .spawn()
        .expect("spawn");
    let pid = worker.pid();
    let started = Instant::now();
    let exit = within("close", worker.close()).await;
    assert_eq!(exit.status, ExitStatus::Signal(15), "ended by SIGTERM");
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "waited the grace first"
    );
    assert_process_ends(pid).await;
}

#[tokio::test]
async fn close_sends_sigkill_to_a_worker_that_ignores_sigterm() {
    let mut worker = fixture(&["--ignore-eof", "--ignore-sigterm"])
        .close_grace(Duration::from_millis(200))
        .spawn()
        .expect("spawn");
    let pid = worker.pid();
    let grandchild = start_grandchild(&mut worker).await;
    let started = Instant::now();
    let exit = within("close", worker.close()).await;
    assert_eq!(exit.status, ExitStatus::Signal(9), "ended by SIGKILL");
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "waited two graces"
    );
    assert_process_ends(pid).await;
    assert_process_ends(grandchild).await;
    assert_group_ends(pid).await;
}

#[tokio::test]
async fn close_through_the_worker_trait_leaves_no_grandchild() {
    let mut worker = fixture(&[]).spawn().expect("spawn");
    let pid = worker.pid();
    let grandchild = start_grandchild(&mut worker).await;
    let exited = Worker::exited(&mut worker);
    within("close", Worker::close(worker)).await;
    assert_eq!(within("exit", exited).await.status, ExitStatus::Code(0));
    // The worker exited by itself; what was left of its group was killed.
    assert_process_ends(grandchild).await;
    assert_group_ends(pid).await;
}

#[tokio::test]
async fn a_dropped_coprocess_leaves_no_process() {
    let mut worker = fixture(&["--ignore-sigterm"]).spawn().expect("spawn");
    let pid = worker.pid();
    let grandchild = start_grandchild(&mut worker).await;
    let exited = worker.exited();
    drop(worker);
    assert_eq!(within("exit", exited).await.status, ExitStatus::Signal(9));
    assert_process_ends(pid).await;
    assert_process_ends(grandchild).await;
    assert_group_ends(pid).await;
}

#[tokio::test]
async fn a_dropped_warming_coprocess_leaves_no_process() {
    let worker = fixture(&["--warmup-ms", "60000"]).spawn().expect("spawn");
    let pid = worker.pid();
    drop(worker);
    assert_process_ends(pid).await;
}

#[tokio::test]
async fn a_worker_that_exits_by_itself_takes_its_grandchildren_with_it() {
    let mut worker = fixture(&[]).spawn().expect("spawn");
    let pid = worker.pid();
    let grandchild = start_grandchild(&mut worker).await;
    let err = within("crash", worker.request(&json!({"op": "crash", "code": 5})))
        .await
        .expect_err("crashed");
    assert!(matches!(err, ProcessError::Crashed { .. }), "{err:?}");
    assert_eq!(
        within("exit", worker.exited()).await.status,
        ExitStatus::Code(5)
    );
    assert_process_ends(grandchild).await;
    assert_group_ends(pid).await;
}

#[tokio::test]
async fn a_bad_reply_kills_the_grandchildren_too() {
    let mut worker = fixture(&[]).spawn().expect("spawn");
    let pid = worker.pid();
    let grandchild = start_grandchild(&mut worker).await;
    let err = within("garbage", worker.request(&json!({"op": "garbage"})))
        .await
        .expect_err("garbage");
    assert!(matches!(err, ProcessError::Protocol { .. }), "{err:?}");
    assert_process_ends(pid).await;
    assert_process_ends(grandchild).await;
    assert_group_ends(pid).await;
}

#[tokio::test]
async fn close_after_exit_returns_the_exit_at_once() {
    let mut worker = fixture(&[])
        .close_grace(Duration::from_secs(30))
        .spawn()
        .expect("spawn");
    let _ = within("crash", worker.request(&json!({"op": "crash", "code": 4})))
        .await
        .expect_err("crashed");
    let exit = within("close", worker.close()).await;
    assert!(
        matches!(exit.status, ExitStatus::Code(4) | ExitStatus::Signal(9)),
        "{exit:?}"
    );
}
