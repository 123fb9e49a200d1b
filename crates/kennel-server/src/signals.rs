//! The signals `kennel serve` answers: SIGTERM and SIGINT stop it (a
//! second one during the stop kills every worker at once), SIGHUP reloads
//! the config file.

use anyhow::Context;
use tokio::signal::unix::{Signal, SignalKind, signal};

/// What a signal asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asked {
    /// SIGTERM or SIGINT: stop (named for the log).
    Stop(&'static str),
    /// SIGHUP: read the config file again.
    Reload,
}

/// The watched signals.
pub(crate) struct Signals {
    term: Signal,
    int: Signal,
    hup: Signal,
}

impl Signals {
    /// Watches SIGTERM, SIGINT and SIGHUP from now on.
    ///
    /// # Errors
    ///
    /// When a signal cannot be watched.
    pub(crate) fn watch() -> anyhow::Result<Self> {
        Ok(Self {
            term: signal(SignalKind::terminate()).context("cannot watch SIGTERM")?,
            int: signal(SignalKind::interrupt()).context("cannot watch SIGINT")?,
            hup: signal(SignalKind::hangup()).context("cannot watch SIGHUP")?,
        })
    }

    /// The next signal.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a signal that arrives meanwhile is kept for the next
    /// call.
    pub(crate) async fn next(&mut self) -> Asked {
        tokio::select! {
            _ = self.term.recv() => Asked::Stop("SIGTERM"),
            _ = self.int.recv() => Asked::Stop("SIGINT"),
            _ = self.hup.recv() => Asked::Reload,
        }
    }

    /// The next stop signal; a SIGHUP meanwhile is logged and ignored (the
    /// server is stopping).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`next`](Self::next).
    pub(crate) async fn next_stop(&mut self) -> &'static str {
        loop {
            match self.next().await {
                Asked::Stop(name) => return name,
                Asked::Reload => {
                    tracing::warn!(target: "kennel_server", "SIGHUP ignored: the server is stopping");
                }
            }
        }
    }
}
