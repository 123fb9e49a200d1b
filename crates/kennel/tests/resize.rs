//! The sizing machinery: a sizing that changes the running size. Fewer keeps
//! workers alive (kept); more uses a kept worker first. A scripted sizing
//! stands in for the learning ones.
mod support;

use std::sync::{Arc, Mutex};

use kennel::{
    BuildError, Event, Parallel, Pool, SizePlan, Sizing, SizingDecision, SizingInput, SizingStep,
    SizingView, Verdict,
};
use support::{Fake, Farm, advance, drain, secs, settle, spawn_lend_slot};
use tokio::time::Instant;

/// Runs the sizes a test sets, checked at each wake-up (every second).
#[derive(Debug, Clone)]
struct Scripted {
    capacity: usize,
    want: Arc<Mutex<usize>>,
    jobs_seen: Arc<Mutex<usize>>,
}

impl Sizing for Scripted {
    fn plan(&mut self) -> Result<SizePlan, BuildError> {
        Ok(SizePlan::new(self.capacity, *self.want.lock().unwrap()))
    }

    fn observe(&mut self, view: &SizingView, input: SizingInput) -> SizingDecision {
        let mut d = SizingDecision::default();
        match input {
            SizingInput::JobDone { .. } => *self.jobs_seen.lock().unwrap() += 1,
            SizingInput::Wake => {
                d.wake_at = Some(Instant::now() + secs(1));
                let want = *self.want.lock().unwrap();
                if want != view.size {
                    d.size = Some(want);
                    d.steps.push(SizingStep::new(
                        view.size,
                        want,
                        want,
                        Verdict::Pays,
                        "scripted",
                    ));
                }
            }
            _ => {}
        }
        d
    }
}

fn scripted(capacity: usize, size: usize) -> Scripted {
    Scripted {
        capacity,
        want: Arc::new(Mutex::new(size)),
        jobs_seen: Arc::new(Mutex::new(0)),
    }
}

#[tokio::test(start_paused = true)]
async fn a_smaller_size_keeps_the_workers_alive_as_kept() {
    let farm = Farm::new();
    let sizing = scripted(4, 4);
    let pool = Pool::builder(farm.factory())
        .startup(Parallel)
        .sizing(sizing.clone())
        .build()
        .unwrap();
    settle().await;
    assert_eq!(pool.stats().idle, 4);
    *sizing.want.lock().unwrap() = 2;
    advance(secs(1)).await;
    let s = pool.stats();
    assert_eq!((s.size, s.idle, s.kept), (2, 2, 2), "{s:?}");
    assert_eq!(farm.alive(), 4, "kept workers stay alive");
    // Jobs use only the running slots.
    let a = pool.lend().await.unwrap();
    let b = pool.lend().await.unwrap();
    assert_eq!((a.slot(), b.slot()), (0, 1));
    let third = spawn_lend_slot(&pool);
    settle().await;
    assert_eq!(pool.stats().waiting, 1, "a kept worker is never lent");
    drop(a);
    assert_eq!(third.await.unwrap().unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_larger_size_uses_a_kept_worker_first_without_a_warm_up() {
    let farm = Farm::with_warmup(secs(30));
    let sizing = scripted(4, 4);
    let pool = Pool::builder(farm.factory())
        .startup(Parallel)
        .sizing(sizing.clone())
        .build()
        .unwrap();
    advance(secs(30)).await;
    *sizing.want.lock().unwrap() = 1;
    advance(secs(1)).await;
    assert_eq!(pool.stats().kept, 3);
    *sizing.want.lock().unwrap() = 3;
    advance(secs(1)).await;
    let s = pool.stats();
    assert_eq!((s.size, s.idle, s.kept, s.starting), (3, 3, 1, 0), "{s:?}");
    assert_eq!(farm.made(), 4, "no new worker: the kept ones run again");
}

#[tokio::test(start_paused = true)]
async fn a_lent_worker_in_a_slot_no_longer_running_becomes_kept_when_returned() {
    let farm = Farm::new();
    let sizing = scripted(2, 2);
    let pool = Pool::builder(farm.factory())
        .startup(Parallel)
        .sizing(sizing.clone())
        .build()
        .unwrap();
    settle().await;
    let _a = pool.lend().await.unwrap();
    let b = pool.lend().await.unwrap();
    assert_eq!(b.slot(), 1);
    *sizing.want.lock().unwrap() = 1;
    advance(secs(1)).await;
    assert_eq!(pool.stats().lent, 2, "never cut short");
    drop(b);
    let s = pool.stats();
    assert_eq!((s.lent, s.idle, s.kept), (1, 0, 1), "{s:?}");
}

#[tokio::test(start_paused = true)]
async fn the_sizing_hears_of_every_finished_job_and_its_steps_are_events() {
    let farm = Farm::new();
    let sizing = scripted(3, 3);
    let pool = Pool::builder(farm.factory())
        .sizing(sizing.clone())
        .build()
        .unwrap();
    let mut events = pool.events();
    for _ in 0..5 {
        pool.run(async |w: &mut Fake| w.work(secs(1)).await)
            .await
            .unwrap();
    }
    assert_eq!(*sizing.jobs_seen.lock().unwrap(), 5);
    *sizing.want.lock().unwrap() = 1;
    advance(secs(1)).await;
    let steps: Vec<_> = drain(&mut events)
        .into_iter()
        .filter_map(|e| match e {
            Event::SizingStep(s) => Some((s.from, s.to)),
            _ => None,
        })
        .collect();
    assert_eq!(steps, [(3, 1)]);
}

#[tokio::test(start_paused = true)]
async fn a_size_above_the_capacity_is_held_to_the_capacity() {
    let farm = Farm::new();
    let sizing = scripted(2, 2);
    let pool = Pool::builder(farm.factory())
        .startup(Parallel)
        .sizing(sizing.clone())
        .build()
        .unwrap();
    *sizing.want.lock().unwrap() = 9;
    advance(secs(2)).await;
    assert_eq!(pool.stats().size, 2);
    assert_eq!(farm.made(), 2);
}
