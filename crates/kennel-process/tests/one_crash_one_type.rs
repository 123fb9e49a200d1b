//! One crash, one type: a worker that ends under a job fails the job with
//! the pool's error, `kennel::Error::Crashed`, which carries its exit and
//! last words, whatever the worker; the worker's own error is only what the
//! worker said.

#![cfg(target_os = "linux")]

mod common;

use common::{fixture, within};
use kennel::{Error, ExitStatus, Fixed, JobError, Parallel, Pool, SlotInfo};
use kennel_process::{Coprocess, ThreadWorker};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

#[tokio::test]
async fn a_coprocess_killed_under_a_job_fails_it_with_the_pools_crash_and_its_last_words() {
    let pool = fixture(&[])
        .pool()
        .name("killed")
        .startup(Parallel)
        .sizing(Fixed(1))
        .build()
        .expect("pool");
    let result = within(
        "the job",
        pool.try_run(async |w: &mut Coprocess| {
            let said = json!({"op": "stderr", "text": "about to be killed"});
            w.request(&said).await?;
            // Killed from outside (the OOM killer, an operator) as it works.
            let pid = Pid::from_raw(i32::try_from(w.pid()).expect("a pid"));
            kill(pid, Signal::SIGKILL).expect("kill");
            w.request(&json!({"op": "hang"})).await
        }),
    )
    .await;
    let Err(JobError::Pool(Error::Crashed {
        exit: Some(exit),
        attempts: 1,
    })) = &result
    else {
        panic!("expected the pool's Crashed, got {result:?}");
    };
    assert_eq!(exit.status, ExitStatus::Signal(9));
    assert!(
        exit.last_words.iter().any(|l| l == "about to be killed"),
        "{exit:?}"
    );
    let message = result.expect_err("crashed").to_string();
    assert!(message.contains("about to be killed"), "{message}");
    within("close", pool.close()).await;
}

#[tokio::test]
async fn a_thread_workers_job_that_panics_fails_with_the_pools_crash_and_its_message() {
    let pool = Pool::builder(|_: SlotInfo| async {
        ThreadWorker::spawn(|| Ok::<_, std::io::Error>(0_u32))
    })
    .name("panics")
    .startup(Parallel)
    .sizing(Fixed(1))
    .build()
    .expect("pool");
    let result = within(
        "the job",
        pool.try_run(async |w: &mut ThreadWorker<u32>| {
            w.run(|_| -> u32 { panic!("bad value 42") }).await
        }),
    )
    .await;
    let Err(JobError::Pool(Error::Crashed {
        exit: Some(exit), ..
    })) = &result
    else {
        panic!("expected the pool's Crashed, got {result:?}");
    };
    assert_eq!(exit.status, ExitStatus::Panicked("bad value 42".into()));
    let next = within(
        "the next job",
        pool.try_run(async |w: &mut ThreadWorker<u32>| w.run(|n| *n + 1).await),
    )
    .await;
    assert_eq!(next.expect("a new worker"), 1);
    within("close", pool.close()).await;
}
