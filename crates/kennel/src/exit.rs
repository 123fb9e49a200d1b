//! [`ExitSignal`]: how a worker tells the pool that it ended, first exit wins.

use std::fmt;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::worker::{Exit, ExitStatus, Exited, Killer, Worker};

/// The sending half of a worker's end: every worker type of kennel and
/// kennel-process records its end here, and workers written by hand can too.
///
/// [`ExitSignal::new`] notes the start time and returns the signal and the
/// [`Exited`] future to hand the pool. The first call to
/// [`exit`](ExitSignal::exit) wins; later calls do nothing. Clones share the
/// one end, so the task that sees a process end, the kill switch and the
/// worker itself may each hold one.
///
/// ```
/// use kennel::{ExitSignal, ExitStatus};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let (signal, exited) = ExitSignal::new();
/// let another = signal.exited();
/// signal.killer().kill();
/// signal.exit(ExitStatus::Closed); // too late: the kill came first
/// assert_eq!(exited.await.status, ExitStatus::Killed);
/// assert_eq!(another.await.status, ExitStatus::Killed);
/// assert_eq!(signal.try_exited().map(|exit| exit.status), Some(ExitStatus::Killed));
/// # }
/// ```
#[derive(Clone)]
pub struct ExitSignal {
    started: Instant,
    /// `None` until the first exit; then that exit for good.
    tx: watch::Sender<Option<Exit>>,
}

impl ExitSignal {
    /// A new signal, started now, and the future that resolves on its exit.
    pub fn new() -> (Self, Exited) {
        let (tx, _) = watch::channel(None);
        let signal = Self {
            started: Instant::now(),
            tx,
        };
        let exited = signal.exited();
        (signal, exited)
    }

    /// Another future that resolves on this signal's exit, with the same
    /// [`Exit`] as the first. It does not keep the signal alive: once every
    /// clone of the signal is dropped without an exit, it resolves with
    /// [`ExitStatus::Other`] ("worker dropped").
    pub fn exited(&self) -> Exited {
        let mut rx = self.tx.subscribe();
        Exited::new(async move {
            loop {
                if let Some(exit) = rx.borrow_and_update().clone() {
                    return exit;
                }
                if rx.changed().await.is_err() {
                    // Every signal was dropped without an exit: the worker is gone.
                    return rx.borrow().clone().unwrap_or(Exit {
                        status: ExitStatus::Other("worker dropped".into()),
                        ran_for: Duration::ZERO,
                        last_words: Vec::new(),
                    });
                }
            }
        })
    }

    /// Records that the worker ended with `status`, having run since
    /// [`started`](Self::started). Only the first call counts.
    pub fn exit(&self, status: ExitStatus) {
        self.exit_with(status, Vec::new());
    }

    /// As [`exit`](Self::exit), with the worker's last words (the last lines
    /// it wrote to stderr), which the pool's `worker:exited` and
    /// `worker:crashed` events carry. Only the first call counts.
    pub fn exit_with(&self, status: ExitStatus, last_words: Vec<String>) {
        let ran_for = self.started.elapsed();
        self.tx.send_if_modified(|seen| {
            if seen.is_some() {
                return false;
            }
            *seen = Some(Exit {
                status,
                ran_for,
                last_words,
            });
            true
        });
    }

    /// Whether the worker has ended.
    pub fn has_exited(&self) -> bool {
        self.tx.borrow().is_some()
    }

    /// How the worker ended, if it has: the first exit recorded.
    pub fn try_exited(&self) -> Option<Exit> {
        self.tx.borrow().clone()
    }

    /// A [`Killer`] that records [`ExitStatus::Killed`].
    pub fn killer(&self) -> Killer {
        let signal = self.clone();
        Killer::new(move || signal.exit(ExitStatus::Killed))
    }

    /// When the worker started.
    pub fn started(&self) -> Instant {
        self.started
    }
}

/// The end and the kill switch the pool keeps for `worker`, asked once,
/// right after the factory made it. A worker killed by being dropped (the
/// default [`Worker::killer`]) gets a signal of the pool's own: its kill
/// records [`ExitStatus::Killed`], and whichever ends first, that or the
/// worker's own `exited()`, is the worker's end.
pub(crate) fn watch<W: Worker>(worker: &mut W) -> (Exited, Killer) {
    let exited = worker.exited();
    let killer = worker.killer();
    if !killer.is_by_drop() {
        return (exited, killer);
    }
    let (signal, ours) = ExitSignal::new();
    let either = Exited::new(async move {
        tokio::select! {
            exit = exited => exit,
            exit = ours => exit,
        }
    });
    (either, signal.killer())
}

impl fmt::Debug for ExitSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExitSignal")
            .field("exited", &self.has_exited())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    fn is_pending(exited: &mut Exited) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        matches!(pin!(exited).poll(&mut cx), Poll::Pending)
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_exit_wins_for_every_future() {
        let (signal, mut first) = ExitSignal::new();
        let mut second = signal.exited();
        assert!(is_pending(&mut first));
        assert!(is_pending(&mut second));
        assert!(!signal.has_exited());
        assert_eq!(signal.try_exited(), None);

        tokio::time::advance(Duration::from_secs(3)).await;
        signal.exit(ExitStatus::Code(1));
        tokio::time::advance(Duration::from_secs(1)).await;
        signal.clone().exit(ExitStatus::Closed);
        signal.killer().kill();

        let exit = Exit {
            status: ExitStatus::Code(1),
            ran_for: Duration::from_secs(3),
            last_words: Vec::new(),
        };
        assert_eq!(first.await, exit);
        assert_eq!(second.await, exit);
        // A future made after the end resolves at once with the same exit.
        assert_eq!(signal.exited().await, exit);
        assert!(signal.has_exited());
        assert_eq!(signal.try_exited(), Some(exit));
    }

    #[tokio::test(start_paused = true)]
    async fn a_kill_is_an_exit() {
        let (signal, exited) = ExitSignal::new();
        let started = signal.started();
        tokio::time::advance(Duration::from_millis(250)).await;
        signal.killer().kill();
        let exit = exited.await;
        assert_eq!(exit.status, ExitStatus::Killed);
        assert_eq!(exit.ran_for, Duration::from_millis(250));
        assert_eq!(started.elapsed(), Duration::from_millis(250));
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_every_signal_without_an_exit_ends_the_futures() {
        let (signal, first) = ExitSignal::new();
        let second = signal.exited();
        let clone = signal.clone();
        drop(signal);
        let mut third = clone.exited();
        assert!(is_pending(&mut third), "a clone still holds the signal");
        drop(clone);
        for exited in [first, second, third] {
            let exit = exited.await;
            assert_eq!(exit.status, ExitStatus::Other("worker dropped".into()));
            assert_eq!(exit.ran_for, Duration::ZERO);
        }
    }

    #[test]
    fn its_debug_says_whether_it_ended() {
        let (signal, _exited) = ExitSignal::new();
        assert_eq!(format!("{signal:?}"), "ExitSignal { exited: false }");
        signal.exit(ExitStatus::Closed);
        assert_eq!(format!("{signal:?}"), "ExitSignal { exited: true }");
    }
}
