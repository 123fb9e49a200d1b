//! The property tests: any generated output, from a lone worker as a
//! reply or before its ready line, and from a worker in a pool, held
//! against the reference reading. proptest keeps the cases it saw fail in
//! `tests/proptest-regressions/properties.txt`: in a test target with a
//! `main.rs`, its default `SourceParallel` looks there, not beside this file.

use std::sync::{Arc, Mutex};

use kennel::{Error, ExitStatus, Fixed, OnDemand, Pool, SlotInfo};
use kennel_process::{Coprocess, ProcessError};
use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{Value, json};

use crate::common::{assert_process_ends, fixture, within};
use crate::reference::{Expect, ExpectReady, expect_ready, expect_reply, more_after_reply};
use crate::strategies::{atom, output};
use crate::{LIMIT, SERIAL};

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
        // Output after the reply, there as the reply was read: killed for
        // it (the reply stands); else it exited by itself.
        Expect::Reply(_) | Expect::WorkerError(_) if more_after_reply(out) => assert!(
            matches!(exit.status, ExitStatus::Code(0) | ExitStatus::Signal(9)),
            "{exit:?}"
        ),
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
    /// writing, the pool's `Crashed`: a crash is never the worker's error),
    /// and the next job gets a new worker.
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
                    Err(Error::Crashed { .. }) | Ok(Err(ProcessError::Protocol { .. })) => {}
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
