//! Hostile worker output: whatever bytes a worker writes on stdout — invalid
//! UTF-8, NULs, huge lines, partial lines, lines dripped a byte at a time,
//! error lines with odd messages — a `Coprocess` answers with the reply, a
//! worker error, or a clear `Protocol` / `Crashed` error, never a panic; a
//! broken worker is killed and, in a pool, replaced.
//!
//! The property tests compare each answer with a small reference reading of
//! the protocol (docs/PROTOCOL.md): split on `\n`, drop one `\r`, skip blank
//! lines, refuse a line over the limit, parse the first other line as JSON.
//! `PROPTEST_CASES=N` runs N cases of each (default 128; 32 for the pool).

#![cfg(target_os = "linux")]

mod common;

use std::sync::{Arc, Mutex};

use common::{assert_process_ends, fixture, within};
use kennel::{Error, ExitStatus, Fixed, OnDemand, Pool, SlotInfo};
use kennel_process::{Coprocess, ProcessError};
use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{Value, json};

/// The tests of this file run one at a time, so that the memory measured
/// by one is its own.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The line limit of these workers: small, so that long lines are cheap.
const LIMIT: usize = 256;

/// What the protocol says a worker's output must give.
#[derive(Debug, Clone, PartialEq)]
enum Expect {
    Reply(Value),
    WorkerError(String),
    Protocol,
    Crashed,
}

/// The reference reading of `out`, written by a worker that then exits.
fn expect_reply(out: &[u8], limit: usize) -> Expect {
    let mut rest = out;
    loop {
        let (line, more) = match rest.iter().position(|&b| b == b'\n') {
            Some(at) => (&rest[..at], Some(&rest[at + 1..])),
            None => (rest, None),
        };
        if line.len() > limit {
            return Expect::Protocol;
        }
        // A last line with no newline is never a reply: the stream ended.
        let Some(more) = more else {
            return Expect::Crashed;
        };
        rest = more;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        return match serde_json::from_slice::<Value>(line) {
            Ok(v) if v.get("error") == Some(&Value::Bool(true)) => {
                Expect::WorkerError(error_message(&v))
            }
            // A second ready line is never a reply (ADR 0036).
            Ok(v) if v.get("ready") == Some(&Value::Bool(true)) => Expect::Protocol,
            // A progress line: read on for the reply.
            Ok(v) if is_progress(&v) => continue,
            Ok(v) => Expect::Reply(v),
            Err(_) => Expect::Protocol,
        };
    }
}

/// `{"progress": …}` with at most `total` and a string `message` besides.
fn is_progress(v: &Value) -> bool {
    let Some(map) = v.as_object() else {
        return false;
    };
    map.get("progress").is_some_and(|p| !p.is_null())
        && map
            .keys()
            .all(|k| matches!(k.as_str(), "progress" | "total" | "message"))
        && map
            .get("message")
            .is_none_or(|m| m.is_string() || m.is_null())
}

fn error_message(v: &Value) -> String {
    match v.get("message") {
        Some(Value::String(m)) if !m.is_empty() => m.clone(),
        None | Some(Value::Null) | Some(Value::String(_)) => {
            "worker returned an error with no message".to_owned()
        }
        Some(other) => other.to_string(),
    }
}

/// What the reference says `ready()` gives when the worker writes `pre`
/// and a newline before its own ready line.
#[derive(Debug, Clone, PartialEq)]
enum ExpectReady {
    Ready,
    NotReady(String),
    Protocol,
}

fn expect_ready(pre: &[u8], limit: usize) -> ExpectReady {
    for line in pre.split(|&b| b == b'\n') {
        if line.len() > limit {
            return ExpectReady::Protocol;
        }
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Value>(line) {
            Ok(v) if v.get("ready") == Some(&Value::Bool(true)) => return ExpectReady::Ready,
            Ok(v) if v.get("error") == Some(&Value::Bool(true)) => {
                return ExpectReady::NotReady(error_message(&v));
            }
            // Anything else before the ready line is skipped.
            _ => {}
        }
    }
    ExpectReady::Ready
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        ".{0,12}".prop_map(Value::String),
        Just(json!("nul \u{0} inside")),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("error".to_owned()),
                    Just("message".to_owned()),
                    "[a-z]{1,6}"
                ],
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// One piece of hostile output.
fn atom() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => json_value().prop_map(|v| v.to_string().into_bytes()),
        3 => prop_oneof![
            Just(b"\n".to_vec()),
            Just(b"\r\n".to_vec()),
            Just(b" \t ".to_vec()),
            Just(b"\r".to_vec()),
        ],
        2 => prop_oneof![
            Just(vec![0u8]),
            Just(vec![0xff]),
            Just(vec![0xc3]),
            Just(vec![0xe2, 0x82]),
            Just(vec![0xed, 0xa0, 0x80]),
        ],
        2 => prop_oneof![
            Just(br#"{"error":true}"#.to_vec()),
            Just(br#"{"error":true,"message":"boom"}"#.to_vec()),
            Just(br#"{"error":true,"message":null}"#.to_vec()),
            Just(br#"{"error":true,"message":[1,{"a":2}]}"#.to_vec()),
            Just(br#"{"error":"true"}"#.to_vec()),
            Just(br#"{"ready":true}"#.to_vec()),
            Just(br#"{"partial":"#.to_vec()),
        ],
        2 => "[a-z{}\\[\\]\":, 0-9]{0,24}".prop_map(String::into_bytes),
        2 => prop::collection::vec(any::<u8>(), 0..48),
        1 => (LIMIT - 2..LIMIT + 3).prop_map(|n| vec![b'x'; n]),
        // A JSON line right at the limit, with and without a `\r`.
        1 => (LIMIT - 3..LIMIT + 1, any::<bool>()).prop_map(|(n, cr)| {
            let mut v = b"\"".to_vec();
            v.extend(std::iter::repeat_n(b'z', n - 2));
            v.push(b'"');
            if cr {
                v.push(b'\r');
            }
            v.push(b'\n');
            v
        }),
        1 => (LIMIT..3 * LIMIT).prop_map(|n| {
            let mut v = b"\"".to_vec();
            v.extend(std::iter::repeat_n(b'y', n));
            v.push(b'"');
            v
        }),
    ]
}

fn output() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => prop::collection::vec(atom(), 0..7).prop_map(|v| v.concat()),
        1 => prop::collection::vec(any::<u8>(), 0..700),
    ]
}

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn raw(out: &[u8], chunk: usize) -> Value {
    json!({"op": "raw", "bytes": out, "chunk": chunk, "then": "exit"})
}

/// Checks one answer against the reference; on a broken stream, the worker
/// has ended and later requests fail at once.
async fn check_answer(w: &mut Coprocess, out: &[u8], got: Result<Value, ProcessError>) {
    let want = expect_reply(out, LIMIT);
    match (&want, &got) {
        (Expect::Reply(v), Ok(r)) => assert_eq!(r, v),
        (Expect::WorkerError(m), Err(ProcessError::Worker { message, .. })) => {
            assert_eq!(message, m);
        }
        (Expect::Protocol, Err(e @ ProcessError::Protocol { message, .. })) => {
            assert!(!message.is_empty());
            assert!(
                e.to_string().starts_with("worker broke the protocol"),
                "{e}"
            );
        }
        (Expect::Crashed, Err(e @ ProcessError::Crashed { .. })) => {
            assert!(
                e.to_string().starts_with("worker failed before responding"),
                "{e}"
            );
        }
        _ => panic!("output {out:?}: expected {want:?}, got {got:?}"),
    }
    let exit = within("the worker's end", w.exited()).await;
    match want {
        // The worker exited by itself after its reply.
        Expect::Reply(_) | Expect::WorkerError(_) => assert_eq!(exit.status, ExitStatus::Code(0)),
        Expect::Protocol | Expect::Crashed => {
            assert!(w.try_exited().is_some());
            let again = within("a request to a broken worker", w.request(&json!(1))).await;
            assert!(
                matches!(again, Err(ProcessError::Crashed { .. })),
                "{again:?}"
            );
        }
    }
}

proptest! {
    #![proptest_config(Config { cases: cases(128), .. Config::default() })]

    #[test]
    fn any_output_is_a_reply_a_worker_error_or_a_typed_failure(
        out in output(),
        chunk in prop_oneof![Just(usize::MAX), 1usize..64],
    ) {
        let _alone = SERIAL.blocking_lock();
        runtime().block_on(async {
            let mut w = fixture(&[]).max_line_bytes(LIMIT).spawn().expect("spawn");
            within("ready", w.ready()).await.expect("ready");
            let got = within("the request", w.request(&raw(&out, chunk.min(out.len().max(1))))).await;
            check_answer(&mut w, &out, got).await;
            assert_process_ends(w.pid()).await;
        });
    }

    #[test]
    fn any_output_before_the_ready_line_is_skipped_refused_or_read_as_a_failed_warm_up(
        pre in prop::collection::vec(atom(), 0..6).prop_map(|v| v.concat()),
    ) {
        let hex: String = pre.iter().map(|b| format!("{b:02x}")).collect();
        let _alone = SERIAL.blocking_lock();
        runtime().block_on(async {
            let mut w = if hex.is_empty() {
                fixture(&[])
            } else {
                fixture(&["--before-ready-hex", &hex])
            }
            .max_line_bytes(LIMIT)
            .spawn()
            .expect("spawn");
            let pid = w.pid();
            let got = within("the warm-up", w.ready()).await;
            match (expect_ready(&pre, LIMIT), &got) {
                (ExpectReady::Ready, Ok(())) => {}
                (ExpectReady::NotReady(m), Err(ProcessError::NotReady { reason, .. })) => {
                    assert_eq!(reason, &m);
                }
                (ExpectReady::Protocol, Err(ProcessError::Protocol { .. })) => {}
                (want, got) => panic!("before ready {pre:?}: expected {want:?}, got {got:?}"),
            }
            drop(w);
            assert_process_ends(pid).await;
        });
    }
}

/// The pids a pool's factory started.
#[derive(Clone, Default)]
struct Started(Arc<Mutex<Vec<u32>>>);

proptest! {
    #![proptest_config(Config { cases: cases(32).min(256), .. Config::default() })]

    /// In a pool, the job gets the answer (or, as the worker ends right after
    /// writing, `Crashed`), and the next job gets a new worker.
    #[test]
    fn a_pool_replaces_a_worker_whatever_it_wrote(
        // One write of at most PIPE_BUF bytes arrives whole.
        out in output().prop_filter("fits one pipe write", |o| o.len() < 4000),
    ) {
        let _alone = SERIAL.blocking_lock();
        runtime().block_on(async {
            let started = Started::default();
            let s = started.clone();
            let pool = Pool::builder(move |_: SlotInfo| {
                let s = s.clone();
                async move {
                    let w = fixture(&[]).max_line_bytes(LIMIT).spawn()?;
                    s.0.lock().unwrap().push(w.pid());
                    Ok::<_, ProcessError>(w)
                }
            })
            .startup(OnDemand)
            .sizing(Fixed(1))
            .build()
            .expect("pool");
            let request = raw(&out, usize::MAX);
            let got = within("the job", pool.run(async |w: &mut Coprocess| w.request(&request).await)).await;
            let fits = match (expect_reply(&out, LIMIT), &got) {
                (_, Err(Error::Crashed { .. })) => true,
                (Expect::Reply(v), Ok(Ok(r))) => *r == v,
                (Expect::WorkerError(m), Ok(Err(ProcessError::Worker { message, .. }))) => *message == m,
                (Expect::Protocol, Ok(Err(ProcessError::Protocol { .. }))) => true,
                (Expect::Crashed, Ok(Err(ProcessError::Crashed { .. }))) => true,
                _ => false,
            };
            assert!(fits, "output {out:?}: got {got:?}");
            let first = started.0.lock().unwrap()[0];
            // The worker exited after writing; the pool may lend it once more
            // before it sees the exit: that job is `Crashed`, or `Protocol`
            // when the worker wrote more than one line; the next one is not.
            let mut next = None;
            for _ in 0..3 {
                let r = within("the next job", pool.run(async |w: &mut Coprocess| w.request(&json!({"op": "pid"})).await)).await;
                match r {
                    Ok(Ok(pid)) => {
                        next = pid.as_u64();
                        break;
                    }
                    Err(Error::Crashed { .. })
                    | Ok(Err(ProcessError::Crashed { .. } | ProcessError::Protocol { .. })) => {}
                    other => panic!("the next job: {other:?}"),
                }
            }
            let next = next.expect("a new worker answers");
            assert_ne!(next, u64::from(first));
            within("close", pool.close()).await;
            let pids = started.0.lock().unwrap().clone();
            for pid in pids {
                assert_process_ends(pid).await;
            }
        });
    }
}

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
/// second line is no reply to the next request. The next request fails with
/// `Protocol` and the worker is killed, instead of handing that request the
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
    let next = within(
        "the next request",
        w.request(&json!({"op": "echo", "value": 7})),
    )
    .await;
    assert!(
        matches!(&next, Err(ProcessError::Protocol { message, .. }) if message.contains("no request asked for")),
        "{next:?}"
    );
    assert_process_ends(pid).await;

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
