//! The Python worker of docs/PROTOCOL.md (`examples/workers/echo.py`), run
//! by a `Coprocess`: the protocol works with a worker written outside Rust.

#![cfg(target_os = "linux")]

mod common;

use std::time::Duration;

use common::{assert_process_ends, within};
use kennel::ExitStatus;
use kennel_process::{CoprocessSpec, ProcessError};
use serde_json::json;

fn echo_py() -> CoprocessSpec {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/workers/echo.py"
    );
    CoprocessSpec::new(["python3", script]).close_grace(Duration::from_secs(5))
}

#[tokio::test]
async fn the_python_echo_worker_speaks_the_protocol() {
    let mut worker = echo_py()
        .label("python", 0)
        .spawn()
        .expect("python3 starts");
    let pid = worker.pid();
    within("ready", worker.ready()).await.expect("ready line");

    let request = json!({"text": "héllo", "n": [1, 2.5, null, true]});
    let reply = within("echo", worker.request(&request))
        .await
        .expect("echo");
    assert_eq!(reply, request);

    let err = within(
        "error",
        worker.request(&json!({"op": "error", "message": "no GPU"})),
    )
    .await
    .expect_err("error reply");
    assert!(
        matches!(&err, ProcessError::Worker { message, .. } if message == "no GPU"),
        "{err:?}"
    );

    // It exits by itself when stdin closes: no signal needed.
    let exit = within("close", worker.close()).await;
    assert_eq!(exit.status, ExitStatus::Code(0));
    assert_process_ends(pid).await;
}
