//! The real pool driven by the same operations as the model
//! (`StateMachineTest`), compared with it after every step and closed at the
//! end.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kennel::{
    BoxError, Error, Fixed, IdleTimeout, LeaderFirst, NoEviction, OnDemand, OrderedReady, Parallel,
    Pool, Reconfig, RejectReason, SlotInfo,
};
use proptest_state_machine::StateMachineTest;
use tokio::sync::oneshot;

use crate::machine::PoolModel;
use crate::reference::{JobSt, Model, Op, St, StartupKind};
use crate::sut::{Farm, Gated, Job, Shared, Sut};

pub(crate) struct PoolTest;

impl StateMachineTest for PoolTest {
    type SystemUnderTest = Sut;
    type Reference = PoolModel;

    fn init_test(m: &Model) -> Sut {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("runtime");
        let farm = Farm::default();
        let pool = {
            let _in_rt = rt.enter();
            let f = farm.clone();
            let b = Pool::builder(move |info: SlotInfo| {
                std::future::ready(Ok::<_, BoxError>(f.make(info.slot)))
            })
            .name("model")
            .sizing(Fixed(m.capacity))
            .with_options(|o| o.max_waiting = Some(m.max_waiting))
            // The reference model has no crash-loop breaker; its own tests
            // (breaker.rs) check it.
            .with_options(|o| {
                o.break_after_failed_starts = None;
                o.job_grace = Duration::from_secs(1);
            });
            let b = match m.evict_after {
                Some(ms) => b.eviction(IdleTimeout::new(Duration::from_millis(ms)).unwrap()),
                None => b.eviction(NoEviction),
            };
            match m.startup {
                StartupKind::OnDemand => b.startup(OnDemand),
                StartupKind::Parallel => b.startup(Parallel),
                StartupKind::OrderedReady => b.startup(OrderedReady),
                StartupKind::LeaderFirst => b.startup(LeaderFirst),
            }
            .build()
            .expect("pool")
        };
        let sut = Sut {
            rt,
            pool,
            farm,
            jobs: BTreeMap::new(),
            now: 0,
        };
        sut.settle();
        sut
    }

    fn apply(mut sut: Sut, m: &Model, op: Op) -> Sut {
        match op {
            Op::Lend => {
                let id = m.next_job - 1;
                let got: Shared<_> = Arc::default();
                let (pool, g) = (sut.pool.clone(), got.clone());
                let task = sut.rt.spawn(async move {
                    let r = pool.lend().await;
                    *g.lock().unwrap() = Some(r);
                });
                sut.jobs.insert(id, Job::Lend { task, got });
            }
            Op::Run => {
                let id = m.next_job - 1;
                let (finish, fin) = oneshot::channel::<()>();
                let running: Shared<_> = Arc::default();
                let result: Shared<_> = Arc::default();
                let (pool, r, res) = (sut.pool.clone(), running.clone(), result.clone());
                let task = sut.rt.spawn(async move {
                    let out = pool
                        .run(async move |w: &mut Gated| {
                            *r.lock().unwrap() = Some((w.slot, w.id));
                            let _ = fin.await;
                            w.id
                        })
                        .await;
                    *res.lock().unwrap() = Some(out);
                });
                sut.jobs.insert(
                    id,
                    Job::Run {
                        task,
                        finish: Some(finish),
                        running,
                        result,
                    },
                );
            }
            Op::Return(j) => drop(sut.lease_of(j)),
            Op::Fail(j) => sut.lease_of(j).expect("a lease").fail(),
            Op::Finish(j) => match sut.jobs.get_mut(&j) {
                Some(Job::Run { finish, .. }) => {
                    let _ = finish.take().expect("not finished yet").send(());
                }
                _ => panic!("job {j} is not a run job"),
            },
            Op::Abort(j) => match sut.jobs.get(&j) {
                Some(Job::Run { task, .. } | Job::Lend { task, .. }) => task.abort(),
                None => panic!("no job {j}"),
            },
            Op::Ready(i) => sut.farm.open_gate(i, true),
            Op::WarmupFail(i) => sut.farm.open_gate(i, false),
            Op::Crash(i) => sut.farm.crash(i),
            Op::Advance(_) => {
                for &t in &m.stops {
                    sut.advance_to(t);
                }
            }
            Op::Reconfigure(n) => {
                let _in_rt = sut.rt.enter();
                sut.pool
                    .reconfigure(Reconfig::new().sizing(Fixed(n)))
                    .expect("reconfigure");
            }
        }
        if let Op::Advance(_) = op {
            sut.advance_to(m.now);
        }
        sut.settle();
        sut
    }

    fn check_invariants(sut: &Sut, m: &Model) {
        // Every count of the snapshot.
        let stats = sut.pool.stats();
        assert_eq!(stats, m.stats(), "stats (model: {m:#?})");

        // Each slot holds what the model says, and at most one live worker.
        let mut lent_workers = Vec::new();
        for (i, s) in m.slots.iter().enumerate() {
            let live = sut.farm.live_in(i);
            let want = usize::from(s.has_live_worker());
            assert_eq!(
                live.len(),
                want,
                "live workers in slot {i}: {live:?}, model {s:?}"
            );
            if let St::Starting { .. } = s.st {
                assert!(sut.farm.is_warming(live[0]), "slot {i} warms up");
            }
        }
        assert_eq!(
            sut.farm.alive(),
            m.slots.iter().filter(|s| s.has_live_worker()).count(),
            "live workers"
        );

        // Each job is where the model says.
        for (&id, job) in &m.jobs {
            match (sut.jobs.get(&id), job.st) {
                (Some(Job::Lend { got, task }), st) => {
                    let got = got.lock().unwrap();
                    match (st, got.as_ref()) {
                        (JobSt::Waiting, None) => assert!(!task.is_finished(), "job {id} waits"),
                        (JobSt::Lent { slot }, Some(Ok(lease))) => {
                            assert_eq!(lease.slot(), slot, "job {id}'s slot");
                            let worker = lease.id;
                            if let St::Lent { .. } = m.slots[slot].st {
                                assert_eq!(
                                    sut.farm.live_in(slot),
                                    vec![worker],
                                    "job {id}'s worker"
                                );
                            }
                            lent_workers.push(worker);
                        }
                        (JobSt::Rejected, Some(Err(Error::Rejected { reason }))) => {
                            assert_eq!(*reason, RejectReason::QueueFull);
                        }
                        (
                            JobSt::WarmupFailed { slot },
                            Some(Err(Error::WarmupFailed { slot: s, .. })),
                        ) => {
                            assert_eq!(*s, slot, "job {id} failed on the warm-up of its slot");
                        }
                        (JobSt::Over, _) => {}
                        (st, got) => panic!("job {id}: model {st:?}, pool {got:?}"),
                    }
                }
                (
                    Some(Job::Run {
                        running, result, ..
                    }),
                    st,
                ) => {
                    let running = *running.lock().unwrap();
                    let result = result.lock().unwrap();
                    match (st, running, result.as_ref()) {
                        (JobSt::Waiting, None, None) => {}
                        (JobSt::Lent { slot }, Some((s, worker)), None) => {
                            assert_eq!(s, slot, "job {id}'s slot");
                            assert_eq!(sut.farm.live_in(slot), vec![worker], "job {id}'s worker");
                            lent_workers.push(worker);
                        }
                        (JobSt::Rejected, None, Some(Err(Error::Rejected { reason }))) => {
                            assert_eq!(*reason, RejectReason::QueueFull);
                        }
                        (
                            JobSt::WarmupFailed { slot },
                            None,
                            Some(Err(Error::WarmupFailed { slot: s, .. })),
                        ) => {
                            assert_eq!(*s, slot);
                        }
                        (JobSt::Crashed, Some(_), Some(Err(Error::Crashed { .. }))) => {}
                        (JobSt::Over, _, _) => {}
                        (st, running, result) => {
                            panic!(
                                "run job {id}: model {st:?}, pool running {running:?} result {result:?}"
                            )
                        }
                    }
                }
                (None, st) => panic!("job {id} unknown to the test ({st:?})"),
            }
        }
        // No worker is lent twice.
        let n = lent_workers.len();
        lent_workers.sort_unstable();
        lent_workers.dedup();
        assert_eq!(lent_workers.len(), n, "a worker lent to two jobs");
    }

    fn teardown(mut sut: Sut, _m: Model) {
        for (_, job) in std::mem::take(&mut sut.jobs) {
            match job {
                Job::Lend { task, got } => {
                    task.abort();
                    drop(got.lock().unwrap().take());
                }
                Job::Run { task, .. } => task.abort(),
            }
        }
        sut.settle();
        let pool = sut.pool.clone();
        // On the paused clock, the close grace passes at once.
        sut.rt.block_on(async move {
            tokio::time::timeout(Duration::from_secs(60), pool.close())
                .await
                .expect("close ends");
        });
        sut.settle();
        assert_eq!(sut.farm.alive(), 0, "a worker outlived close()");
        let s = sut.pool.stats();
        assert_eq!(
            (s.starting, s.idle, s.lent, s.waiting, s.kept),
            (0, 0, 0, 0, 0),
            "stats after close: {s:?}"
        );
    }
}
