//! A worker's stderr lines go to `tracing` with the pool name and slot.

#![cfg(target_os = "linux")]

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};

use common::{fixture, within};
use serde_json::json;
use tracing_subscriber::fmt::MakeWriter;

/// Collects what the `fmt` subscriber writes.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Self;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

// A current-thread runtime: the task that reads stderr runs on this thread,
// under the subscriber set here.
#[tokio::test(flavor = "current_thread")]
async fn stderr_lines_are_logged_with_the_pool_and_slot() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(captured.clone())
        // Plain text: another crate of the workspace may turn on colours.
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    let _default = tracing::subscriber::set_default(subscriber);

    let mut worker = fixture(&[]).label("embeddings", 3).spawn().expect("spawn");
    let pid = worker.pid();
    within(
        "stderr request",
        worker.request(&json!({"op": "stderr", "text": "loading shard 2 of 7"})),
    )
    .await
    .expect("reply");
    common::eventually("the stderr line is logged", || {
        captured.text().contains("loading shard 2 of 7")
    })
    .await;

    let text = captured.text();
    let line = text
        .lines()
        .find(|line| line.contains("loading shard 2 of 7"))
        .expect("the line");
    assert!(line.contains("INFO"), "{line}");
    assert!(line.contains("kennel_process::stderr"), "{line}");
    assert!(line.contains("embeddings"), "{line}");
    assert!(line.contains("slot=3"), "{line}");
    assert!(line.contains(&format!("pid={pid}")), "{line}");
    // The fixture's own warm-up note came through the same way.
    assert!(text.contains("warming up"), "{text}");
}

// A worker that writes 200,000 lines on stderr at once: the first ones
// within the budget are logged, the rest dropped and said to be, and the
// worker is never held up by its pipe (it answers right after).
#[tokio::test(flavor = "current_thread")]
async fn a_worker_flooding_stderr_has_the_excess_dropped_and_counted_never_blocking_it() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(captured.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    let _default = tracing::subscriber::set_default(subscriber);

    let script = "i=0; while [ $i -lt 4 ]; do seq 1 50000 >&2; i=$((i+1)); done; \
                  echo '{\"ready\":true}'; while read -r line; do echo \"$line\"; done";
    let mut worker = kennel_process::CoprocessSpec::new(["sh", "-c", script])
        .label("flood", 0)
        .spawn()
        .expect("spawn");
    within("the flooding warm-up", worker.ready())
        .await
        .expect("ready");
    let reply = within(
        "a request after the flood",
        worker.request(&json!({"n": 1})),
    )
    .await
    .expect("reply");
    assert_eq!(reply, json!({"n": 1}));
    worker.kill();
    common::eventually("the drops are said", || {
        captured.text().contains("line(s) dropped")
    })
    .await;
    let text = captured.text();
    let logged = text
        .lines()
        .filter(|l| l.contains("kennel_process::stderr") && !l.contains("dropped"))
        .count();
    assert!(
        logged <= kennel_process::STDERR_LINES_BURST as usize + 100,
        "{logged} lines logged of 200000"
    );
    assert!(logged >= 100, "the first lines are logged: {logged}");
    assert!(text.contains("faster than 200 lines"), "{text:.2000}");
}
