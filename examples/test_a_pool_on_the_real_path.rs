//! Testing a pool on the real path: a fake worker with an `ExitSignal`, the
//! real `Pool`, and tokio's paused clock, so a 60 s back-off costs no real
//! time.
//!
//! `cargo run -p kennel-examples --example test-a-pool-on-the-real-path`
//! runs a crash loop on a paused clock; `cargo test -p kennel-examples
//! --example test-a-pool-on-the-real-path` runs the tests at the bottom.

use std::sync::{Arc, Mutex};

use kennel::{
    BoxError, Event, ExitSignal, ExitStatus, Exited, Fixed, Killer, Parallel, Pool, SlotInfo,
    Worker,
};
use tokio::time::Instant;

/// A fake worker: nothing to load, but the same `Worker` a real one is, so
/// the pool under test runs its real code.
struct Fake {
    id: usize,
    signal: ExitSignal,
    exited: Option<Exited>,
}

impl Worker for Fake {
    fn exited(&mut self) -> Exited {
        self.exited.take().unwrap_or_else(Exited::never)
    }
    fn killer(&self) -> Killer {
        self.signal.killer()
    }
    async fn close(self) {
        self.signal.exit(ExitStatus::Closed);
    }
}

/// Makes fakes and keeps each one's `ExitSignal`, so a test can make any of
/// them exit on its own, as a crashing process would.
#[derive(Clone, Default)]
struct Farm {
    made: Arc<Mutex<Vec<ExitSignal>>>,
}

impl Farm {
    /// The factory to hand `Pool::builder`.
    fn factory(
        &self,
    ) -> impl Fn(SlotInfo) -> std::future::Ready<Result<Fake, BoxError>> + Send + Sync + 'static
    {
        let farm = self.clone();
        move |_slot| {
            let (signal, exited) = ExitSignal::new();
            let mut made = farm.made.lock().unwrap();
            made.push(signal.clone());
            std::future::ready(Ok(Fake {
                id: made.len() - 1,
                signal,
                exited: Some(exited),
            }))
        }
    }

    /// How many workers were made.
    fn made(&self) -> usize {
        self.made.lock().unwrap().len()
    }

    /// Worker `id` exits on its own with code 1.
    fn crash(&self, id: usize) {
        self.made.lock().unwrap()[id].exit(ExitStatus::Code(1));
    }
}

/// Waits for the next event that `pick` accepts.
async fn next<T>(
    events: &mut tokio::sync::broadcast::Receiver<Event>,
    pick: impl Fn(&Event) -> Option<T>,
) -> T {
    loop {
        let event = events.recv().await.expect("the pool is alive");
        if let Some(t) = pick(&event) {
            return t;
        }
    }
}

/// Crashes one worker eight times in a row and reads each back-off.
async fn crash_loop() -> Result<(), Box<dyn std::error::Error>> {
    let farm = Farm::default();
    let pool = Pool::builder(farm.factory())
        .startup(Parallel)
        .sizing(Fixed(1))
        .build()?;
    let mut events = pool.events();
    let t0 = Instant::now();

    for crash in 0..8 {
        next(&mut events, |e| {
            matches!(e, Event::Ready { .. }).then_some(())
        })
        .await;
        farm.crash(farm.made() - 1);
        let crashed_at = Instant::now();
        let delay = next(&mut events, |e| match e {
            Event::Backoff { delay, .. } => Some(*delay),
            _ => None,
        })
        .await;
        // Nothing else to do: the paused runtime jumps to the back-off's end.
        next(&mut events, |e| {
            matches!(e, Event::Starting { .. }).then_some(())
        })
        .await;
        println!(
            "crash {}: worker:backoff {:>2} s, slot 0 started again {:>2} s later on the pool's clock",
            crash + 1,
            delay.as_secs(),
            crashed_at.elapsed().as_secs()
        );
    }

    // The slot now backs off 60 s; a job does not wait for it.
    next(&mut events, |e| {
        matches!(e, Event::Ready { .. }).then_some(())
    })
    .await;
    farm.crash(farm.made() - 1);
    next(&mut events, |e| {
        matches!(e, Event::Backoff { .. }).then_some(())
    })
    .await;
    let asked = Instant::now();
    let id = pool.run(async |w: &mut Fake| w.id).await?;
    println!(
        "a job during the 60 s back-off got new worker {id} after {:?}",
        asked.elapsed()
    );

    pool.close().await;
    println!(
        "the pool's clock moved {} s",
        t0.elapsed().as_secs_f64().round()
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The runtime `#[tokio::test(start_paused = true)]` builds: one thread,
    // clock paused, and moved ahead whenever every task waits on a timer.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()?;
    let real = std::time::Instant::now();
    runtime.block_on(crash_loop())?;
    println!("real time: {:?}", real.elapsed());
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use kennel::{Error, IdleTimeout, OnDemand};

    /// Lets every task that can run, run, without moving the clock.
    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_worker_that_crashes_is_started_again_after_one_second() {
        let farm = Farm::default();
        let pool = Pool::builder(farm.factory())
            .startup(Parallel)
            .sizing(Fixed(1))
            .build()
            .unwrap();
        settle().await;
        assert_eq!(farm.made(), 1);

        farm.crash(0);
        settle().await;
        tokio::time::advance(Duration::from_millis(999)).await;
        settle().await;
        assert_eq!(farm.made(), 1, "still backing off");
        tokio::time::advance(Duration::from_millis(1)).await;
        settle().await;
        assert_eq!(farm.made(), 2, "started again after 1 s");
        pool.close().await;
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_worker_goes_after_five_minutes_and_the_pool_stays_healthy() {
        let farm = Farm::default();
        let pool = Pool::builder(farm.factory())
            .startup(OnDemand)
            .sizing(Fixed(2))
            .eviction(IdleTimeout::new(Duration::from_secs(300)).unwrap())
            .build()
            .unwrap();
        pool.run(async |_w: &mut Fake| ()).await.unwrap();
        assert_eq!(pool.stats().idle, 1);

        tokio::time::advance(Duration::from_secs(299)).await;
        settle().await;
        assert_eq!(pool.stats().idle, 1);
        tokio::time::advance(Duration::from_secs(1)).await;
        settle().await;
        let stats = pool.stats();
        assert_eq!(stats.starting + stats.idle + stats.lent, 0);
        assert!(stats.is_healthy());
        pool.close().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_job_past_its_timeout_fails_and_its_worker_is_replaced() {
        let farm = Farm::default();
        let pool = Pool::builder(farm.factory())
            .startup(Parallel)
            .sizing(Fixed(1))
            .with_options(|o| o.job_timeout = Some(Duration::from_secs(30)))
            .build()
            .unwrap();
        let err = pool
            .run(async |_w: &mut Fake| tokio::time::sleep(Duration::from_secs(31)).await)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
        // A worker the pool ends itself starts no back-off: the next job
        // gets the replacement at once.
        let before = Instant::now();
        let id = pool.run(async |w: &mut Fake| w.id).await.unwrap();
        assert_eq!(id, 1);
        assert_eq!(before.elapsed(), Duration::ZERO);
        pool.close().await;
    }
}
