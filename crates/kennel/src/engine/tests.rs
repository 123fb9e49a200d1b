//! The handlers tested as plain functions: no runtime, no task, no clock
//! but the session's time the state holds (`State::now`); only the state
//! they leave and the effects they return.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rand::SeedableRng;
use tokio::time::Instant;

use super::effects::{Effects, Wake, When};
use super::lend::Acquired;
use super::life::Made;
use super::release::{Outcome, Returned};
use super::state::{Parts, State};
use crate::event::{Event, RetireReason};
use crate::eviction::NoEviction;
use crate::options::Options;
use crate::sizing::Fixed;

use crate::startup::{OnDemand, Parallel, Startup};
use crate::worker::{Exit, ExitStatus, Exited, Killer, Worker};

#[derive(Debug)]
struct Plain(Killer);

/// Whether a lock session recorded nothing to carry out.
fn no_effect(fx: &Effects<Plain>) -> bool {
    fx.job_done.is_none()
        && fx.events.is_empty()
        && fx.kills.is_empty()
        && fx.closes.is_empty()
        && fx.drops.is_empty()
        && fx.warmups.is_empty()
        && fx.watches.is_empty()
        && fx.wakes.is_empty()
        && fx.holders.is_empty()
        && fx.meters.is_empty()
        && fx.probes.is_empty()
        && !fx.ended
}

impl Worker for Plain {
    fn exited(&mut self) -> Exited {
        Exited::never()
    }
    fn killer(&self) -> Killer {
        self.0.clone()
    }
}

fn state(startup: impl Startup, n: usize) -> State<Plain> {
    State::new(Parts {
        name: "t".into(),
        capacity: n,
        size: n,
        sizing_jobs: false,
        opts: Options::default(),
        startup: Arc::new(startup),
        sizing: Box::new(Fixed(n)),
        eviction: Arc::new(NoEviction),
        metrics: false,
        rng: rand::rngs::StdRng::seed_from_u64(1),
        gpus: None,
    })
}

fn kills() -> (Killer, Arc<AtomicUsize>) {
    let n = Arc::new(AtomicUsize::new(0));
    let m = n.clone();
    (
        Killer::new(move || {
            m.fetch_add(1, Ordering::SeqCst);
        }),
        n,
    )
}

fn made(killer: &Killer) -> Made {
    Made {
        killer: killer.clone(),
        exited: Exited::never(),
        started: Instant::now(),
        pid: None,
        meter: None,
        threads: None,
        size: 1,
        key: None,
    }
}

/// Starts slot `i` of `st` for no job and makes its worker ready.
fn ready_in(st: &mut State<Plain>, i: usize) -> Killer {
    let mut fx = Effects::default();
    st.start_slot(&mut fx, i, None);
    let generation = fx.warmups[0].generation;
    let (killer, _) = kills();
    assert!(st.register(&mut fx, i, generation, made(&killer)));
    st.on_ready(
        &mut fx,
        i,
        generation,
        Plain(killer.clone()),
        Duration::ZERO,
    );
    killer
}

#[test]
fn a_job_on_an_empty_pool_asks_for_one_warm_up_and_waits_for_it() {
    let mut st = state(OnDemand, 2);
    let mut fx = Effects::default();
    let got = st
        .acquire(&mut fx, true, crate::dispatch::Ask::default())
        .unwrap();
    assert!(matches!(got, Acquired::Wait(_)));
    assert_eq!(fx.warmups.len(), 1, "one warm-up, for slot 0");
    assert_eq!(fx.warmups[0].slot, 0);
    assert!(matches!(fx.events[..], [Event::Starting { slot: 0 }]));
    assert_eq!(st.stats().starting, 1);
    assert_eq!(st.stats().waiting, 1);
}

#[test]
fn a_ready_worker_goes_to_the_job_that_waits_for_it_through_its_hand_over() {
    let mut st = state(OnDemand, 1);
    let mut fx = Effects::default();
    let Ok(Acquired::Wait(mut waiting)) =
        st.acquire(&mut fx, true, crate::dispatch::Ask::default())
    else {
        panic!("waits");
    };
    let generation = fx.warmups[0].generation;
    let (killer, _) = kills();
    assert!(st.register(&mut fx, 0, generation, made(&killer)));
    assert_eq!(fx.watches.len(), 1, "its exit is watched");
    st.on_ready(&mut fx, 0, generation, Plain(killer), Duration::ZERO);
    // Still lent: to the job, which is handed it once the lock is released.
    assert_eq!((st.stats().lent, st.stats().waiting), (1, 0));
    assert!(waiting.handed.try_recv().is_err(), "not under the lock");
    let mut handed = st.waiters.take_granted();
    assert_eq!(handed.len(), 1);
    let (to, grant) = handed.pop().expect("granted");
    assert!(to.send(grant).is_ok());
    let granted = waiting.handed.try_recv().expect("sent").expect("a worker");
    assert_eq!(granted.slot, 0);
}

#[test]
fn an_idle_worker_that_exits_early_under_an_eager_startup_backs_off_one_second() {
    let mut st = state(Parallel, 1);
    ready_in(&mut st, 0);
    assert_eq!(st.stats().idle, 1);
    let mut fx = Effects::default();
    let generation = st.slots.generation(0);
    let exit = Exit {
        status: ExitStatus::Code(1),
        ran_for: Duration::from_secs(1),
        last_words: Vec::new(),
    };
    st.on_exit(&mut fx, 0, generation, exit);
    assert_eq!(fx.drops.len(), 1, "the worker is dropped after the lock");
    assert!(fx.ended);
    let backoff = fx
        .wakes
        .iter()
        .find(|a| matches!(a.wake, Wake::Backoff { slot: 0, .. }))
        .expect("a back-off timer");
    assert!(matches!(backoff.when, When::At(_)));
    assert!(fx.events.iter().any(
        |e| matches!(e, Event::Backoff { slot: 0, delay, .. } if *delay == Duration::from_secs(1))
    ));
    assert_eq!(st.stats().idle + st.stats().starting, 0, "it rests");
}

#[test]
fn a_failed_lease_kills_its_worker_after_the_lock_and_says_why() {
    let mut st = state(OnDemand, 1);
    ready_in(&mut st, 0);
    let mut fx = Effects::default();
    let Ok(Acquired::Now(g)) = st.acquire(&mut fx, true, crate::dispatch::Ask::default()) else {
        panic!("idle worker lent at once");
    };
    assert!(
        no_effect(&fx),
        "a lend from idle has no effect to carry out"
    );
    let back = Returned {
        slot: g.slot,
        worker: g.worker,
        cell: &g.cell,
        outcome: Outcome::Retire(RetireReason::Failed),
        held: None,
        key: None,
        job: true,
        memory: None,
        tenant: Some(&g.tenant),
        threads: None,
    };
    st.release(&mut fx, back);
    assert_eq!(fx.kills.len(), 1);
    assert_eq!(fx.drops.len(), 1);
    assert!(matches!(
        fx.events[..],
        [Event::Retired {
            slot: 0,
            reason: RetireReason::Failed,
            ..
        }]
    ));
    assert_eq!(
        st.slots.counts().closing,
        1,
        "closing until its exit is seen"
    );
}

#[test]
fn a_returned_worker_is_idle_again_with_no_effect() {
    let mut st = state(OnDemand, 1);
    ready_in(&mut st, 0);
    let mut fx = Effects::default();
    let Ok(Acquired::Now(g)) = st.acquire(&mut fx, true, crate::dispatch::Ask::default()) else {
        panic!("lent");
    };
    let back = Returned {
        slot: g.slot,
        worker: g.worker,
        cell: &g.cell,
        outcome: Outcome::Returned,
        held: None,
        key: None,
        job: true,
        memory: None,
        tenant: Some(&g.tenant),
        threads: None,
    };
    st.release(&mut fx, back);
    assert!(no_effect(&fx));
    assert_eq!(st.stats().idle, 1);
}

#[test]
fn closing_fails_waiting_jobs_and_closes_idle_workers_after_the_lock() {
    let mut st = state(OnDemand, 2);
    ready_in(&mut st, 0);
    let mut fx = Effects::default();
    let _lent = st
        .acquire(&mut fx, true, crate::dispatch::Ask::default())
        .unwrap();
    let _waiting = st
        .acquire(&mut fx, true, crate::dispatch::Ask::default())
        .unwrap();
    let mut fx = Effects::default();
    assert!(st.begin_close(&mut fx));
    assert!(!st.begin_close(&mut Effects::default()), "once");
    assert!(matches!(fx.events[..], [Event::Closed]));
    assert_eq!(st.stats().waiting, 0);
    assert!(!st.all_ended(), "the lent worker has not ended");
}

#[test]
fn a_handler_counts_time_from_its_lock_sessions_now_not_the_clock() {
    let mut st = state(OnDemand, 1);
    st.opts.probe_every = Some(Duration::from_secs(2));
    // An hour from the clock: only the session's time can give this.
    st.now += Duration::from_secs(3600);
    let mut fx = Effects::default();
    st.arm_probe(&mut fx);
    let armed = &fx.wakes[0];
    assert!(matches!(
        armed.when,
        When::At(at) if at == st.now + Duration::from_secs(2)
    ));
}
