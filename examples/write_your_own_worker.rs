//! Write your own worker, eviction and sizing: an in-memory worker that holds
//! a session, an eviction that keeps a costly worker at least a minimum
//! time, and a sizing that runs more workers while a queue forms and keeps
//! them warm when it shrinks.
//!
//! `cargo run -p kennel-examples --example write-your-own-worker`

use std::collections::HashMap;
use std::time::Duration;

use kennel::{
    BoxError, BuildError, Event, EvictAfter, Eviction, ExitSignal, ExitStatus, Exited, IdleWorker,
    Killer, OnDemand, Pool, SizePlan, Sizing, SizingDecision, SizingInput, SizingStep, SizingView,
    SlotInfo, Verdict, Worker,
};
use tokio::time::Instant;

// ----- the worker -----

/// An in-memory worker: a session that remembers what it was told.
struct Session {
    slot: usize,
    memory: HashMap<String, String>,
    jobs: u32,
    signal: ExitSignal,
    exited: Option<Exited>,
}

impl Session {
    /// The factory: called by the pool for each new worker.
    async fn open(info: SlotInfo) -> Result<Self, BoxError> {
        let (signal, exited) = ExitSignal::new();
        Ok(Self {
            slot: info.slot,
            memory: HashMap::new(),
            jobs: 0,
            signal,
            exited: Some(exited),
        })
    }

    fn remember(&mut self, key: &str, value: &str) -> usize {
        self.jobs += 1;
        self.memory.insert(key.to_owned(), value.to_owned());
        self.memory.len()
    }
}

impl Worker for Session {
    /// The warm-up: runs on a task of the pool, once per worker.
    async fn ready(&mut self) -> Result<(), BoxError> {
        tokio::time::sleep(Duration::from_millis(50)).await;
        Ok(())
    }

    /// Handed out once: the pool watches it while a job holds the worker.
    fn exited(&mut self) -> Exited {
        self.exited.take().unwrap_or_else(Exited::never)
    }

    /// Handed out once: the pool kills through it without touching the worker.
    fn killer(&self) -> Killer {
        self.signal.killer()
    }

    /// Graceful end (eviction, close): flush, then record the exit.
    async fn close(self) {
        println!(
            "    slot {} closes after {} job(s), {} key(s) held",
            self.slot,
            self.jobs,
            self.memory.len()
        );
        self.signal.exit(ExitStatus::Closed);
    }
}

// ----- an eviction -----

/// Evicts a worker idle for `idle`, but never before it has run `min_life`:
/// a worker whose warm-up was costly should serve a while before it goes.
#[derive(Debug)]
struct AmortisedIdle {
    idle: Duration,
    min_life: Duration,
}

impl Eviction for AmortisedIdle {
    fn idle(&self, worker: IdleWorker) -> Option<EvictAfter> {
        let until_min_life = self
            .min_life
            .saturating_sub(worker.ran_for(worker.idle_since));
        let wait = self.idle.max(until_min_life);
        // The pool's clock is tokio's: wait with tokio::time.
        Some(Box::pin(tokio::time::sleep(wait)))
    }
}

// ----- a sizing -----

/// Runs 1 of `capacity` slots; grows to all of them as soon as a finished
/// job sees others waiting, and shrinks back to 1 after `quiet` with no
/// queue. The workers it stops running are kept alive (`kept`), warm.
#[derive(Debug)]
struct GrowOnQueue {
    capacity: usize,
    quiet: Duration,
}

impl Sizing for GrowOnQueue {
    fn plan(&mut self) -> Result<SizePlan, BuildError> {
        if self.capacity == 0 {
            return Err(BuildError {
                option: "sizing",
                message: "GrowOnQueue needs a capacity of 1 or more".into(),
            });
        }
        Ok(SizePlan::new(self.capacity, 1))
    }

    fn observe(&mut self, view: &SizingView, input: SizingInput) -> SizingDecision {
        let mut decision = SizingDecision::default();
        let want = match input {
            SizingInput::JobDone { .. } if view.waiting > 0 => self.capacity,
            SizingInput::Wake if view.waiting == 0 => 1,
            _ => view.size,
        };
        if want != view.size {
            decision.size = Some(want);
            decision.steps.push(SizingStep::new(
                view.size,
                want,
                want,
                Verdict::Pays,
                format!("{} job(s) waiting", view.waiting),
            ));
        }
        // Look again after a quiet spell.
        decision.wake_at = Some(view.now + self.quiet);
        decision
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("1. An in-memory worker with a custom eviction");
    println!("   (idle 100 ms, but each worker lives at least 400 ms):");
    let t0 = Instant::now();
    let pool = Pool::builder(Session::open)
        .startup(OnDemand)
        .sizing(kennel::Fixed(2))
        .eviction(AmortisedIdle {
            idle: Duration::from_millis(100),
            min_life: Duration::from_millis(400),
        })
        .build()?;
    let mut events = pool.events();
    let held = pool
        .run(async |s: &mut Session| s.remember("user", "ada"))
        .await?;
    println!("    the session holds {held} key(s)");
    // The worker is idle from about 50 ms; it goes at about 400 ms.
    loop {
        if let Event::Evicted { slot, idle_for, .. } = events.recv().await? {
            println!(
                "    worker:evicted slot {slot} at {} ms, idle for {} ms",
                t0.elapsed().as_millis(),
                idle_for.as_millis()
            );
            break;
        }
    }
    pool.close().await;

    println!("\n2. A custom sizing: 1 of 3 slots, all 3 while a queue forms:");
    let pool = Pool::builder(Session::open)
        .startup(OnDemand)
        .sizing(GrowOnQueue {
            capacity: 3,
            quiet: Duration::from_millis(200),
        })
        .build()?;
    let mut events = pool.events();
    let s = pool.stats();
    println!("    built:        size {} of {}", s.size, s.capacity);
    let mut jobs = Vec::new();
    for n in 0..9 {
        let pool = pool.clone();
        jobs.push(tokio::spawn(async move {
            pool.run(async |s: &mut Session| {
                tokio::time::sleep(Duration::from_millis(40)).await;
                s.remember(&format!("key{n}"), "v")
            })
            .await
        }));
    }
    for job in jobs {
        job.await??;
    }
    let s = pool.stats();
    println!(
        "    after 9 jobs: size {}, idle {}, kept {}",
        s.size, s.idle, s.kept
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let s = pool.stats();
    println!(
        "    quiet 300 ms: size {}, idle {}, kept {}",
        s.size, s.idle, s.kept
    );
    while let Ok(event) = events.try_recv() {
        if let Event::SizingStep(step) = event {
            println!(
                "    sizing:step {} -> {} ({})",
                step.from, step.to, step.figures
            );
        }
    }
    pool.close().await;
    Ok(())
}
