//! No job ever gets another job's reply: a JSON-lines worker that writes one
//! line too many (a reply twice, a stray line 1 ms after its reply) is
//! retired, and every job is answered with its own reply or an error.
//!
//! Real processes: `tests/fixtures/extra_line.py` echoes each request, so
//! its replies carry the request's `kennel_id`; 4 clients send 1,000 jobs,
//! each with a unique `n` the reply must echo, through a pool of 2.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kennel::{Error, Fixed, Parallel, Pool, SlotInfo};
use kennel_process::{Coprocess, CoprocessSpec, ProcessError};
use serde_json::{Value, json};

const JOBS: usize = 1_000;
const CLIENTS: usize = 4;
/// Every this many jobs, one asks for a line too many.
const EVERY: usize = 100;

/// The fixture, run by `python3`.
fn extra_line() -> CoprocessSpec {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/extra_line.py");
    CoprocessSpec::new([std::ffi::OsStr::new("python3"), path.as_os_str()])
}

/// What became of the 1,000 jobs.
#[derive(Debug, Default)]
struct Tally {
    right: usize,
    wrong: Vec<(Value, Value)>,
    /// The jobs failed because their worker broke the protocol.
    failed: usize,
    /// Workers started, the first two included.
    started: usize,
}

/// Sends the jobs from 4 clients; job `n` is `{"n": n}`, with `flags`
/// added to every `EVERY`-th one.
async fn scene(spec: CoprocessSpec, flags: Value) -> Tally {
    let started = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&started);
    let pool = Pool::builder(move |info: SlotInfo| {
        let spec = spec.for_slot(&info);
        counted.fetch_add(1, Ordering::Relaxed);
        async move { spec.spawn() }
    })
    .name("extra-line")
    .startup(Parallel)
    .sizing(Fixed(2))
    .build()
    .expect("pool");
    let next = Arc::new(AtomicUsize::new(0));
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        let (pool, next, flags) = (pool.clone(), Arc::clone(&next), flags.clone());
        clients.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= JOBS {
                    return tally;
                }
                let mut job = json!({ "n": n });
                if n % EVERY == EVERY / 2 {
                    job.as_object_mut()
                        .expect("an object")
                        .extend(flags.as_object().expect("flags").clone());
                }
                let reply = pool
                    .run(async |w: &mut Coprocess| w.request(&job).await)
                    .await;
                match reply {
                    Ok(Ok(reply)) if reply == job => tally.right += 1,
                    Ok(Ok(reply)) => tally.wrong.push((job, reply)),
                    Ok(Err(ProcessError::Protocol { .. })) | Err(Error::Crashed { .. }) => {
                        tally.failed += 1;
                    }
                    other => panic!("job {n}: {other:?}"),
                }
            }
        }));
    }
    let mut tally = Tally::default();
    for client in clients {
        let one = client.await.expect("a client");
        tally.right += one.right;
        tally.wrong.extend(one.wrong);
        tally.failed += one.failed;
    }
    tokio::time::timeout(Duration::from_secs(30), pool.close())
        .await
        .expect("the pool closes");
    tally.started = started.load(Ordering::Relaxed);
    tally
}

/// 0 wrong replies; each job that asked for a line too many cost at most
/// one other job (the one written before the extra line was seen) and its
/// worker; all the rest answered right.
fn assert_no_reply_crossed(tally: &Tally) {
    let bad = JOBS / EVERY;
    assert!(tally.wrong.is_empty(), "wrong replies: {:?}", tally.wrong);
    assert_eq!(tally.right + tally.failed, JOBS, "{tally:?}");
    assert!(tally.failed <= bad, "{tally:?}");
    assert!(
        tally.started > 2 && tally.started <= 2 + bad,
        "the workers that wrote a line too many were retired: {tally:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_written_twice_never_answers_another_job() {
    let tally = scene(extra_line(), json!({"twice": true})).await;
    assert_no_reply_crossed(&tally);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_written_1ms_after_the_reply_never_answers_another_job() {
    let tally = scene(extra_line(), json!({"late": true})).await;
    assert_no_reply_crossed(&tally);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_ids_a_second_reply_already_waiting_retires_the_worker_and_fails_no_job() {
    let tally = scene(
        extra_line().job_ids(false),
        json!({"twice": true, "at_once": true}),
    )
    .await;
    assert_no_reply_crossed(&tally);
    assert_eq!(tally.failed, 0, "{tally:?}");
    assert_eq!(tally.started, 2 + JOBS / EVERY, "{tally:?}");
}
