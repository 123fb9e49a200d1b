//! The system under test: a real pool of gated in-memory workers, the
//! factory's record of every worker, and the jobs the test started.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kennel::{BoxError, Error, ExitSignal, ExitStatus, Exited, Killer, Lease, Pool, Worker};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::reference::JobId;

/// An in-memory worker whose warm-up ends when the test opens its gate.
#[derive(Debug)]
pub(crate) struct Gated {
    pub(crate) id: usize,
    pub(crate) slot: usize,
    signal: ExitSignal,
    exited: Option<Exited>,
    gate: Option<oneshot::Receiver<bool>>,
}

impl Worker for Gated {
    async fn ready(&mut self) -> Result<(), BoxError> {
        match self.gate.take() {
            Some(gate) => match gate.await {
                Ok(true) => Ok(()),
                Ok(false) => Err("the model file is corrupt".into()),
                Err(_) => std::future::pending().await,
            },
            None => Ok(()),
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

    async fn close(self) {
        self.signal.exit(ExitStatus::Closed);
    }
}

#[derive(Debug)]
struct Made {
    slot: usize,
    signal: ExitSignal,
    gate: Option<oneshot::Sender<bool>>,
}

/// Every worker the factory made, by id.
#[derive(Debug, Clone, Default)]
pub(crate) struct Farm(Arc<Mutex<Vec<Made>>>);

impl Farm {
    pub(crate) fn make(&self, slot: usize) -> Gated {
        let (signal, exited) = ExitSignal::new();
        let (tx, rx) = oneshot::channel();
        let mut made = self.0.lock().unwrap();
        let id = made.len();
        made.push(Made {
            slot,
            signal: signal.clone(),
            gate: Some(tx),
        });
        Gated {
            id,
            slot,
            signal,
            exited: Some(exited),
            gate: Some(rx),
        }
    }

    /// Ids of the live workers in `slot`.
    pub(crate) fn live_in(&self, slot: usize) -> Vec<usize> {
        let made = self.0.lock().unwrap();
        (0..made.len())
            .filter(|&id| made[id].slot == slot && !made[id].signal.has_exited())
            .collect()
    }

    pub(crate) fn alive(&self) -> usize {
        let made = self.0.lock().unwrap();
        made.iter().filter(|m| !m.signal.has_exited()).count()
    }

    pub(crate) fn open_gate(&self, slot: usize, ok: bool) {
        let mut made = self.0.lock().unwrap();
        let m = made
            .iter_mut()
            .rev()
            .find(|m| m.slot == slot && !m.signal.has_exited() && m.gate.is_some())
            .unwrap_or_else(|| panic!("no worker warms up in slot {slot}"));
        let _ = m.gate.take().expect("checked").send(ok);
    }

    pub(crate) fn crash(&self, slot: usize) {
        let made = self.0.lock().unwrap();
        let m = made
            .iter()
            .rev()
            .find(|m| m.slot == slot && !m.signal.has_exited())
            .unwrap_or_else(|| panic!("no live worker in slot {slot}"));
        m.signal.exit(ExitStatus::Code(1));
    }

    pub(crate) fn is_warming(&self, id: usize) -> bool {
        self.0.lock().unwrap()[id].gate.is_some()
    }
}

pub(crate) type Shared<T> = Arc<Mutex<Option<T>>>;

pub(crate) enum Job {
    Lend {
        task: JoinHandle<()>,
        got: Shared<Result<Lease<Gated>, Error>>,
    },
    Run {
        task: JoinHandle<()>,
        finish: Option<oneshot::Sender<()>>,
        /// `(slot, worker id)` once the job runs.
        running: Shared<(usize, usize)>,
        result: Shared<Result<usize, Error>>,
    },
}

pub(crate) struct Sut {
    pub(crate) rt: tokio::runtime::Runtime,
    pub(crate) pool: Pool<Gated>,
    pub(crate) farm: Farm,
    pub(crate) jobs: BTreeMap<JobId, Job>,
    /// Model time the real clock has been moved to.
    pub(crate) now: u64,
}

impl Sut {
    /// Lets every task that can run, run (the clock does not move).
    pub(crate) fn settle(&self) {
        self.rt.block_on(async {
            for _ in 0..200 {
                tokio::task::yield_now().await;
            }
        });
    }

    pub(crate) fn advance_to(&mut self, t: u64) {
        let d = Duration::from_millis(t - self.now);
        self.rt.block_on(tokio::time::advance(d));
        self.now = t;
        self.settle();
    }

    pub(crate) fn lease_of(&self, j: JobId) -> Option<Lease<Gated>> {
        match self.jobs.get(&j) {
            Some(Job::Lend { got, .. }) => match got.lock().unwrap().take() {
                Some(Ok(lease)) => Some(lease),
                other => panic!("job {j} holds no lease: {other:?}"),
            },
            _ => panic!("job {j} is not a lend job"),
        }
    }
}
