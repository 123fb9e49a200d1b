//! The cancellation matrix: drop a job's future at every phase, under every
//! startup, and check the pool's invariants (lending, abort, close).
mod support;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use kennel::{Fixed, LeaderFirst, OnDemand, OrderedReady, Parallel, Pool, Startup};
use support::{Fake, Farm, advance, ms, secs, settle};

const CAPACITY: usize = 2;

#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Waiting in the queue.
    Queued,
    /// Waiting for the worker it started (or found starting) to warm up.
    WarmUp,
    /// Its job runs.
    Running,
    /// A worker is being handed to it as it is dropped.
    Returning,
}

/// Checks what must hold whenever the pool has settled.
fn check(pool: &Pool<Fake>, farm: &Farm, at: &str) {
    let s = pool.stats();
    assert!(farm.alive() <= CAPACITY, "{at}: {} alive", farm.alive());
    let counted = s.starting + s.idle + s.lent + s.kept;
    assert!(counted <= s.capacity, "{at}: {s:?}");
    assert_eq!(farm.alive(), counted, "{at}: counts add up: {s:?}");
    assert!(s.is_healthy(), "{at}: {s:?}");
}

/// A job that checks that no other job holds its worker.
async fn job(pool: Pool<Fake>, lent: Arc<Mutex<HashSet<usize>>>) -> Result<usize, kennel::Error> {
    pool.run(async |w: &mut Fake| {
        assert!(
            lent.lock().unwrap().insert(w.id),
            "worker {} lent twice",
            w.id
        );
        // Removes the mark also when the job is dropped mid-way.
        let _mark = Mark(lent.clone(), w.id);
        w.work(secs(2)).await
    })
    .await
}

struct Mark(Arc<Mutex<HashSet<usize>>>, usize);

impl Drop for Mark {
    fn drop(&mut self) {
        self.0.lock().unwrap().remove(&self.1);
    }
}

async fn scenario(startup: Arc<dyn Startup>, name: &str, phase: Phase) {
    let at = format!("{name}/{phase:?}");
    let farm = Farm::with_warmup(secs(1));
    let pool = Pool::builder(farm.factory())
        .startup(ArcStartup(startup))
        .sizing(Fixed(CAPACITY))
        .build()
        .unwrap();
    let lent = Arc::new(Mutex::new(HashSet::new()));
    let spawn = |pool: &Pool<Fake>| tokio::spawn(job(pool.clone(), lent.clone()));

    let mut others = Vec::new();
    match phase {
        Phase::Queued => {
            others.push(spawn(&pool));
            others.push(spawn(&pool));
            settle().await;
            let victim = spawn(&pool);
            others.push(spawn(&pool));
            settle().await;
            check(&pool, &farm, &at);
            victim.abort();
        }
        Phase::WarmUp => {
            let victim = spawn(&pool);
            others.push(spawn(&pool));
            advance(ms(500)).await;
            check(&pool, &farm, &at);
            victim.abort();
        }
        Phase::Running => {
            let victim = spawn(&pool);
            others.push(spawn(&pool));
            advance(ms(1500)).await;
            assert_eq!(pool.stats().lent, 2, "{at}");
            victim.abort();
            others.push(spawn(&pool));
        }
        Phase::Returning => {
            let held = pool.lend().await.unwrap();
            let held2 = pool.lend().await.unwrap();
            let victim = spawn(&pool);
            others.push(spawn(&pool));
            settle().await;
            assert_eq!(pool.stats().waiting, 2, "{at}");
            // The worker goes to the victim, which is dropped at that moment.
            drop(held);
            victim.abort();
            drop(held2);
        }
    }
    for step in 0..12 {
        advance(ms(500)).await;
        check(&pool, &farm, &format!("{at} step {step}"));
    }
    for o in others {
        assert!(o.await.unwrap().is_ok(), "{at}: other jobs complete");
    }
    assert!(lent.lock().unwrap().is_empty());
    assert_eq!(
        pool.stats().lent,
        0,
        "{at}: every worker came back: {:?}",
        pool.stats()
    );
    let closing = tokio::time::Instant::now();
    pool.close().await;
    assert_eq!(
        closing.elapsed(),
        secs(0),
        "{at}: no lent worker held up the close"
    );
    assert_eq!(farm.alive(), 0, "{at}: every worker ended at close");
    settle().await;
    let tasks = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    assert_eq!(tasks, 0, "{at}: no task left running after close");
}

#[derive(Debug)]
struct ArcStartup(Arc<dyn Startup>);

impl Startup for ArcStartup {
    fn is_eager(&self) -> bool {
        self.0.is_eager()
    }
    fn next(&self, slots: &[kennel::SlotPhase], ever_ready: bool) -> kennel::Starts {
        self.0.next(slots, ever_ready)
    }
}

#[tokio::test(start_paused = true)]
async fn dropping_a_job_at_any_phase_keeps_the_pools_invariants() {
    let startups: [(Arc<dyn Startup>, &str); 4] = [
        (Arc::new(OnDemand), "OnDemand"),
        (Arc::new(Parallel), "Parallel"),
        (Arc::new(OrderedReady), "OrderedReady"),
        (Arc::new(LeaderFirst), "LeaderFirst"),
    ];
    for (startup, name) in startups {
        for phase in [
            Phase::Queued,
            Phase::WarmUp,
            Phase::Running,
            Phase::Returning,
        ] {
            scenario(startup.clone(), name, phase).await;
        }
    }
}
