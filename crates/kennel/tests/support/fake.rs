//! The fake worker: how it warms up, answers its probes, runs a job,
//! crashes, reads its memory and closes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kennel::{BoxError, ExitSignal, ExitStatus, Exited, Killer, Meter, Worker};

/// How one fake worker warms up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Warmup {
    /// Ready after this long.
    Takes(Duration),
    /// `ready()` fails after this long.
    Fails(Duration),
    /// `ready()` never resolves.
    Hangs,
}

/// How one fake worker answers its probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Health {
    /// Passes at once.
    #[default]
    Good,
    /// Passes after this long.
    Slow(Duration),
    /// Fails at once.
    Bad,
    /// Never answers.
    Hangs,
}

/// What a fake worker's probes see and say.
#[derive(Debug, Default)]
pub(super) struct Probes {
    pub(super) health: Health,
    pub(super) count: usize,
}

/// A fake worker.
#[derive(Debug)]
pub struct Fake {
    pub id: usize,
    pub slot: usize,
    pub jobs: u64,
    pub(super) warmup: Warmup,
    pub(super) signal: ExitSignal,
    pub(super) exited: Option<Exited>,
    pub(super) memory: Arc<AtomicU64>,
    pub(super) probes: Arc<Mutex<Probes>>,
}

impl Fake {
    /// A job that takes `d` and returns this worker's id.
    pub async fn work(&mut self, d: Duration) -> usize {
        tokio::time::sleep(d).await;
        self.jobs += 1;
        self.id
    }

    /// Exits on its own (as if it crashed).
    pub fn crash(&self) {
        self.signal.exit(ExitStatus::Code(101));
    }
}

impl Worker for Fake {
    async fn ready(&mut self) -> Result<(), BoxError> {
        match self.warmup {
            Warmup::Takes(d) => {
                tokio::time::sleep(d).await;
                Ok(())
            }
            Warmup::Fails(d) => {
                tokio::time::sleep(d).await;
                Err("model file is corrupt".into())
            }
            Warmup::Hangs => std::future::pending().await,
        }
    }

    fn exited(&mut self) -> Exited {
        self.exited.take().unwrap_or_else(Exited::never)
    }

    fn killer(&self) -> Killer {
        self.signal.killer()
    }

    fn is_alive(&self) -> bool {
        !self.signal.has_exited()
    }

    fn about(&self) -> Option<String> {
        Some(format!("{{\"fake\":{}}}", self.id))
    }

    async fn check(&mut self) -> Result<(), BoxError> {
        let health = {
            let mut p = self.probes.lock().unwrap();
            p.count += 1;
            p.health
        };
        match health {
            Health::Good => Ok(()),
            Health::Slow(d) => {
                tokio::time::sleep(d).await;
                Ok(())
            }
            Health::Bad => Err("the model answers garbage".into()),
            Health::Hangs => std::future::pending().await,
        }
    }

    fn meter(&self) -> Option<Meter> {
        let memory = self.memory.clone();
        Some(Meter::new(move || Some(memory.load(Ordering::SeqCst))))
    }

    async fn close(self) {
        self.signal.exit(ExitStatus::Closed);
    }
}
