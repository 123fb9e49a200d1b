//! The reference model as a `ReferenceStateMachine` (initial states,
//! transitions, preconditions, apply) and the test that runs it.

use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::strategy::{BoxedStrategy, Union};
use proptest::test_runner::Config;
use proptest_state_machine::{ReferenceStateMachine, prop_state_machine};

use crate::check::PoolTest;
use crate::reference::{JobSt, Kind, Model, Op, SlotM, StartupKind};

pub(crate) struct PoolModel;

impl ReferenceStateMachine for PoolModel {
    type State = Model;
    type Transition = Op;

    fn init_state() -> BoxedStrategy<Model> {
        (
            prop_oneof![
                Just(StartupKind::OnDemand),
                Just(StartupKind::Parallel),
                Just(StartupKind::OrderedReady),
                Just(StartupKind::LeaderFirst),
            ],
            1usize..=4,
            0usize..=3,
            prop_oneof![Just(None), Just(Some(500u64)), Just(Some(2500u64))],
        )
            .prop_map(|(startup, capacity, max_waiting, evict_after)| {
                let mut m = Model {
                    startup,
                    evict_after,
                    max_waiting,
                    now: 0,
                    capacity,
                    size: capacity,
                    slots: (0..capacity).map(|_| SlotM::new()).collect(),
                    waiters: Vec::new(),
                    jobs: BTreeMap::new(),
                    next_job: 0,
                    ever_ready: false,
                    stops: Vec::new(),
                };
                m.kick_startup();
                m
            })
            .boxed()
    }

    fn transitions(m: &Model) -> BoxedStrategy<Op> {
        let mut choices: Vec<(u32, BoxedStrategy<Op>)> = vec![
            (6, Just(Op::Lend).boxed()),
            (4, Just(Op::Run).boxed()),
            (
                3,
                prop_oneof![
                    Just(1u64),
                    Just(250),
                    Just(999),
                    Just(1000),
                    Just(2000),
                    Just(4500),
                    Just(61_000),
                    Just(600_000),
                ]
                .prop_map(Op::Advance)
                .boxed(),
            ),
            (1, (1usize..=4).prop_map(Op::Reconfigure).boxed()),
        ];
        let lent_lend =
            m.jobs_where(|j, _| j.kind == Kind::Lend && matches!(j.st, JobSt::Lent { .. }));
        if !lent_lend.is_empty() {
            choices.push((
                4,
                proptest::sample::select(lent_lend.clone())
                    .prop_map(Op::Return)
                    .boxed(),
            ));
            choices.push((
                2,
                proptest::sample::select(lent_lend)
                    .prop_map(Op::Fail)
                    .boxed(),
            ));
        }
        let running_run =
            m.jobs_where(|j, _| j.kind == Kind::Run && matches!(j.st, JobSt::Lent { .. }));
        if !running_run.is_empty() {
            choices.push((
                4,
                proptest::sample::select(running_run.clone())
                    .prop_map(Op::Finish)
                    .boxed(),
            ));
            choices.push((
                2,
                proptest::sample::select(running_run)
                    .prop_map(Op::Abort)
                    .boxed(),
            ));
        }
        let waiting = m.jobs_where(|j, _| j.st == JobSt::Waiting);
        if !waiting.is_empty() {
            choices.push((
                2,
                proptest::sample::select(waiting)
                    .prop_map(Op::Abort)
                    .boxed(),
            ));
        }
        let starting: Vec<usize> = (0..m.slots.len()).filter(|&i| m.is_starting(i)).collect();
        if !starting.is_empty() {
            choices.push((
                6,
                proptest::sample::select(starting.clone())
                    .prop_map(Op::Ready)
                    .boxed(),
            ));
            choices.push((
                1,
                proptest::sample::select(starting)
                    .prop_map(Op::WarmupFail)
                    .boxed(),
            ));
        }
        let live: Vec<usize> = (0..m.slots.len())
            .filter(|&i| m.slots[i].has_live_worker())
            .collect();
        if !live.is_empty() {
            choices.push((
                2,
                proptest::sample::select(live).prop_map(Op::Crash).boxed(),
            ));
        }
        Union::new_weighted(choices).boxed()
    }

    fn preconditions(m: &Model, op: &Op) -> bool {
        match *op {
            Op::Lend | Op::Run => true,
            Op::Return(j) | Op::Fail(j) => m.is_lent_lend(j),
            Op::Finish(j) => m.is_running_run(j),
            Op::Abort(j) => m.is_waiting(j) || m.is_running_run(j),
            Op::Ready(i) | Op::WarmupFail(i) => m.is_starting(i),
            Op::Crash(i) => m.slots.get(i).is_some_and(SlotM::has_live_worker),
            Op::Advance(d) => !m.ambiguous_advance(d),
            Op::Reconfigure(n) => (1..=4).contains(&n),
        }
    }

    fn apply(mut m: Model, op: &Op) -> Model {
        m.stops.clear();
        match *op {
            Op::Lend => m.acquire(Kind::Lend),
            Op::Run => m.acquire(Kind::Run),
            Op::Return(j) => m.release(j, false, false),
            Op::Fail(j) => m.release(j, true, true),
            Op::Finish(j) => m.release(j, false, false),
            Op::Abort(j) => {
                if m.is_waiting(j) {
                    m.cancel_wait(j);
                } else {
                    // Dropped mid-job: the worker is killed; eager startups
                    // refill the slot through their startup, OnDemand leaves it.
                    m.release(j, true, false);
                }
            }
            Op::Ready(i) => m.ready(i),
            Op::WarmupFail(i) => m.warmup_fail(i),
            Op::Crash(i) => m.crash(i),
            Op::Advance(d) => m.advance(d),
            Op::Reconfigure(n) => m.reconfigure(n),
        }
        m
    }
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(256)
}

prop_state_machine! {
    #![proptest_config(Config {
        cases: cases(),
        max_shrink_iters: 4096,
        .. Config::default()
    })]

    #[test]
    fn the_pool_follows_the_reference_model(sequential 1..60 => PoolTest);
}
