//! Hand-picked hostile lines: a reply dripped a byte at a time or split
//! across two writes, a line far over the limit (with this process's
//! memory watched), a line no request asked for.

use std::sync::Arc;

use kennel_process::ProcessError;
use serde_json::{Value, json};

use crate::SERIAL;
use crate::common::{assert_process_ends, fixture, within};

#[tokio::test]
async fn a_reply_dripped_a_byte_at_a_time_is_read_whole() {
    let _alone = SERIAL.lock().await;
    let mut w = fixture(&[]).spawn().expect("spawn");
    within("ready", w.ready()).await.expect("ready");
    let reply = br#"{"text":"slow \u00e9 r\u00e9ply","n":[1,2,3]}"#.to_vec();
    let mut out = reply.clone();
    out.extend_from_slice(b"\r\n");
    let req = json!({"op": "raw", "bytes": out, "chunk": 1, "pause_ms": 2, "then": "serve"});
    let got = within("the dripped reply", w.request(&req))
        .await
        .expect("reply");
    assert_eq!(got, serde_json::from_slice::<Value>(&reply).unwrap());
    // The stream is still in step: the next request gets its own reply.
    let next = within("echo", w.request(&json!({"op": "echo", "value": 7}))).await;
    assert_eq!(next.expect("echo"), json!(7));
    w.close().await;
}

#[tokio::test]
async fn a_reply_split_at_every_byte_across_two_writes_is_read_whole() {
    let _alone = SERIAL.lock().await;
    let reply = br#"{"a":"b\u0000c","d":null}"#;
    for split in 1..reply.len() {
        let mut w = fixture(&[]).spawn().expect("spawn");
        within("ready", w.ready()).await.expect("ready");
        let mut out = reply.to_vec();
        out.push(b'\n');
        let req = json!({"op": "raw", "bytes": out, "chunk": split, "pause_ms": 1, "then": "exit"});
        let got = within("the split reply", w.request(&req)).await;
        assert_eq!(
            got.expect("reply"),
            json!({"a": "b\u{0}c", "d": null}),
            "split at {split}"
        );
        assert_process_ends(w.pid()).await;
    }
}

/// Resident memory of this process, in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_far_over_the_default_limit_is_refused_with_bounded_memory() {
    let _alone = SERIAL.lock().await;
    let mut w = fixture(&[]).spawn().expect("spawn");
    within("ready", w.ready()).await.expect("ready");
    // Sample this process's memory while the line is read.
    let before = rss();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = tokio::spawn({
        let done = done.clone();
        async move {
            let mut peak = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(rss());
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            peak
        }
    });
    // 20 MiB on one line, against the default limit of 16 MiB.
    let err = within(
        "the huge reply",
        w.request(&json!({"op": "oversized", "bytes": 20 << 20})),
    )
    .await
    .expect_err("over the limit");
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let grew = sampler.await.expect("sampler").saturating_sub(before);
    assert!(
        matches!(&err, ProcessError::Protocol { message, .. } if message.contains("16777216-byte limit")),
        "{err:?}"
    );
    // The reader holds at most the limit (and its growth), never the line.
    assert!(grew < 48 << 20, "memory grew by {grew} bytes");
    assert_process_ends(w.pid()).await;
}

/// A worker that writes two lines for one request is out of step: the
/// second line is no reply to the next request. Already there as the first
/// is read, it gets the worker killed at once (the first line stands as the
/// reply), so the next request fails, instead of handing that request the
/// line meant for no one.
#[tokio::test]
async fn a_line_no_request_asked_for_is_refused_not_taken_as_the_next_reply() {
    let _alone = SERIAL.lock().await;
    let mut w = fixture(&[]).spawn().expect("spawn");
    let pid = w.pid();
    within("ready", w.ready()).await.expect("ready");
    // One write, so both lines are there when the first is read.
    let out = b"{\"a\":1}\n{\"b\":2}\n".to_vec();
    let got = within(
        "the first request",
        w.request(&json!({"op": "raw", "bytes": out, "then": "serve"})),
    )
    .await;
    assert_eq!(got.expect("the first line is its reply"), json!({"a": 1}));
    assert_process_ends(pid).await;
    let next = within(
        "the next request",
        w.request(&json!({"op": "echo", "value": 7})),
    )
    .await;
    assert!(
        matches!(&next, Err(ProcessError::Crashed { .. })),
        "{next:?}"
    );

    // Blank lines after a reply are allowed (the protocol skips them).
    let mut w = fixture(&[]).spawn().expect("spawn");
    within("ready", w.ready()).await.expect("ready");
    let out = b"{\"a\":1}\n\r\n \n".to_vec();
    let got = within(
        "a reply and blank lines",
        w.request(&json!({"op": "raw", "bytes": out, "then": "serve"})),
    )
    .await;
    assert_eq!(got.expect("reply"), json!({"a": 1}));
    let next = within(
        "the next request",
        w.request(&json!({"op": "echo", "value": 7})),
    )
    .await;
    assert_eq!(next.expect("its own reply"), json!(7));
    w.close().await;
}
