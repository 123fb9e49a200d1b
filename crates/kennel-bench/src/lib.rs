//! Benchmarks of kennel against its peers; see `docs/BENCHMARKS.md`. The
//! bench targets are in this package's `benches/`; what they share is here.

use kennel::{BoxError, ExitSignal, Exited, Killer, Worker};

/// A worker that does nothing: what a lend and return costs by itself.
#[derive(Debug)]
pub struct Noop {
    signal: ExitSignal,
    exited: Option<Exited>,
}

impl Noop {
    /// A new worker, for a pool's factory.
    ///
    /// # Errors
    ///
    /// None: the `Result` is the factory's shape.
    pub fn make() -> Result<Self, BoxError> {
        let (signal, exited) = ExitSignal::new();
        Ok(Self {
            signal,
            exited: Some(exited),
        })
    }
}

impl Worker for Noop {
    fn exited(&mut self) -> Exited {
        self.exited.take().unwrap_or_else(Exited::never)
    }
    fn killer(&self) -> Killer {
        self.signal.killer()
    }
}
