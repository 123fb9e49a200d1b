//! Queued pools across a restart of NATS (a real `nats-server -js`, its
//! store on disk): across a graceful restart three instances answer all of
//! 600 synchronous jobs and run none twice (counted by the worker); across
//! a `kill -9` none runs twice, and a job whose stored end the broker lost
//! (it had not yet written it out) is failed `interrupted`, having run once.

mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::Value;
use support::counted::{counted_pool, runs};
use support::{Answer, Instance, LIMIT, Nats, TempDir, http};

/// How a restart of NATS goes.
#[derive(Clone, Copy)]
enum Restart {
    /// SIGTERM: it shuts down gracefully.
    Graceful,
    /// SIGKILL.
    Kill,
}

/// The jobs of the restart scene.
const JOBS: usize = 600;

/// What the restart scene's callers got, by job, and how many times each
/// job ran.
struct Scene {
    outcomes: BTreeMap<u64, Outcome>,
    runs: BTreeMap<u64, usize>,
}

/// What one caller got for one job.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// Its own reply.
    Answered,
    /// Failed `interrupted`.
    Interrupted,
    /// 504 `queue-timeout`, naming the job (its id).
    TimedOut(String),
    /// Anything else: an answer lost or wrong.
    Wrong(String),
}

/// Three instances of a queued pool of 2 counting workers each; 600
/// synchronous jobs from 24 callers; NATS restarted (its store on disk)
/// once a third are answered. Each caller sends its next job once it has
/// an answer, and sends a job again only when told 503
/// `queue-unavailable` (never stored, so never run). What each job got,
/// and how many times each ran.
fn restart_scene(test: &str, restart: Restart) -> Option<Scene> {
    const CALLERS: usize = 24;
    let mut nats = Nats::start(test)?;
    let dir = TempDir::new(test);
    // A runner is silent after ack_wait and 5 s: room for a loaded machine.
    let config = counted_pool(
        &nats.url,
        &dir.0,
        2,
        "ack_wait = \"5s\"\nreply_timeout = \"30s\"",
    );
    let instances: Vec<Instance> = ["a", "b", "c"]
        .iter()
        .map(|name| Instance::start(&dir.0, name, &config))
        .collect();
    let addrs: Vec<SocketAddr> = instances.iter().map(|i| i.addr).collect();
    let refused = Arc::new(AtomicUsize::new(0));
    let outcomes: Arc<Mutex<BTreeMap<u64, Outcome>>> = Arc::default();
    let callers: Vec<_> = (0..CALLERS)
        .map(|c| {
            let (refused, outcomes) = (refused.clone(), outcomes.clone());
            let addrs = addrs.clone();
            std::thread::spawn(move || {
                for n in (c..JOBS).step_by(CALLERS) {
                    let addr = addrs[n % addrs.len()];
                    let body = format!(r#"{{"n": {n}, "ms": 20}}"#);
                    let deadline = Instant::now() + LIMIT;
                    let outcome = loop {
                        let Answer {
                            status,
                            head,
                            body: text,
                        } = http(addr, "POST", "/pools/count/jobs", &[], &body);
                        let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                        if status == 503 && answer["error"] == "queue-unavailable" {
                            refused.fetch_add(1, Ordering::SeqCst);
                            assert!(Instant::now() < deadline, "job {n} refused for a minute");
                            continue;
                        }
                        let id = head.lines().find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("kennel-job-id: ")
                                .map(str::to_owned)
                        });
                        break match (status, &answer["error"], id) {
                            (200, _, _) if answer["n"] == n => Outcome::Answered,
                            (502, e, _) if e == "interrupted" => Outcome::Interrupted,
                            (504, e, Some(id)) if e == "queue-timeout" => Outcome::TimedOut(id),
                            _ => Outcome::Wrong(format!("{status} {text}")),
                        };
                    };
                    lock(&outcomes).insert(n as u64, outcome);
                }
            })
        })
        .collect();
    let deadline = Instant::now() + LIMIT;
    while lock(&outcomes).len() < JOBS / 3 {
        assert!(
            Instant::now() < deadline,
            "the first third was not answered"
        );
        std::thread::yield_now();
    }
    match restart {
        Restart::Graceful => nats.terminate(),
        Restart::Kill => nats.stop(),
    }
    nats.restart();
    for caller in callers {
        caller.join().unwrap();
    }
    let outcomes = lock(&outcomes).clone();
    let runs = runs(&dir.0);
    let count = |f: &dyn Fn(&Outcome) -> bool| outcomes.values().filter(|o| f(o)).count();
    let timed_out: Vec<String> = outcomes
        .iter()
        .filter_map(|(n, o)| match o {
            Outcome::TimedOut(id) => {
                let job = instances[0].get(&format!("/jobs/{id}"));
                Some(format!(
                    "{n} ({} run(s), {})",
                    runs.get(n).unwrap_or(&0),
                    job["state"]
                ))
            }
            _ => None,
        })
        .collect();
    eprintln!(
        "{test}: of {JOBS} jobs, {} answered with their reply, {} failed `interrupted`, {} timed out ({timed_out:?}), {} wrong; {} ran twice or more, {} never ran; {} POSTs refused 503 while NATS was away",
        count(&|o| *o == Outcome::Answered),
        count(&|o| *o == Outcome::Interrupted),
        timed_out.len(),
        count(&|o| matches!(o, Outcome::Wrong(_))),
        runs.values().filter(|r| **r > 1).count(),
        JOBS - runs.len(),
        refused.load(Ordering::SeqCst)
    );
    Some(Scene { outcomes, runs })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn a_graceful_restart_of_nats_loses_no_answer_and_runs_no_job_twice() {
    let Some(Scene { outcomes, runs }) = restart_scene(
        "a_graceful_restart_of_nats_loses_no_answer_and_runs_no_job_twice",
        Restart::Graceful,
    ) else {
        return;
    };
    let lost: Vec<_> = outcomes
        .iter()
        .filter(|(_, o)| **o != Outcome::Answered)
        .collect();
    assert!(lost.is_empty(), "answers lost or wrong: {lost:#?}");
    assert_eq!(outcomes.len(), JOBS);
    assert!(runs.values().all(|r| *r == 1), "a job ran twice: {runs:?}");
    assert_eq!(runs.len(), JOBS, "every job ran");
}

/// A `kill -9` of `nats-server` can lose writes it had confirmed (its file
/// store writes them out in the background): a job, a record's claim or a
/// stored answer. What that costs is reported; what must hold is that no
/// caller gets another job's answer or an error other than those that say
/// so, and no job runs more than twice.
#[test]
fn a_kill_9_of_nats_gives_no_caller_a_wrong_answer() {
    let Some(Scene { outcomes, runs }) = restart_scene(
        "a_kill_9_of_nats_gives_no_caller_a_wrong_answer",
        Restart::Kill,
    ) else {
        return;
    };
    let wrong: Vec<_> = outcomes
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Wrong(_)))
        .collect();
    assert!(wrong.is_empty(), "wrong answers: {wrong:#?}");
    assert_eq!(outcomes.len(), JOBS);
    assert!(
        runs.values().all(|r| *r <= 2),
        "a job ran three times: {runs:?}"
    );
    for (n, o) in &outcomes {
        if *o == Outcome::Answered {
            assert!(
                runs.get(n).is_some_and(|r| *r >= 1),
                "job {n} answered, never ran"
            );
        }
    }
}
