//! Logging that never blocks the server: every line goes through
//! `tracing-appender`'s non-blocking writer, in lossy mode, to stderr;
//! lines past a bounded buffer are dropped and counted
//! (`kennel_log_dropped_lines_total`), text or JSON (`--log-format`),
//! filtered by `RUST_LOG` (docs/SERVICE.md, "Logs"). The start-up summary
//! is written by a thread of its own ([`print_detached`]), and a last error
//! line waits at most [`LAST_LINE_WAIT`] ([`eprint_bounded`]).

use std::io::Write;
use std::sync::OnceLock;
use std::time::Duration;

use tracing_appender::non_blocking::{ErrorCounter, NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// How many log lines may wait for stderr before new ones are dropped.
pub(crate) const LOG_BUFFER_LINES: usize = 8_192;

static DROPPED: OnceLock<ErrorCounter> = OnceLock::new();

/// Installs the process's log subscriber: `format` lines on stderr through
/// the non-blocking writer, filtered by `RUST_LOG` or else by `default`.
/// Later calls install nothing (the first subscriber stays) but return a
/// guard all the same. The guard keeps the log writer's thread: dropping it
/// flushes what waits (for at most a second) and stops the thread, so hold
/// it until the process ends.
#[must_use = "dropping the guard stops the log writer"]
pub(crate) fn init(format: LogFormat, default: &str) -> WorkerGuard {
    let (writer, guard) = NonBlockingBuilder::default()
        .lossy(true)
        .buffered_lines_limit(LOG_BUFFER_LINES)
        .thread_name("kennel-log")
        .finish(std::io::stderr());
    let _ = DROPPED.set(writer.error_counter());
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    let _ = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
    };
    guard
}

/// Log lines dropped so far because stderr did not keep up.
pub(crate) fn dropped_lines() -> u64 {
    DROPPED
        .get()
        .map_or(0, |c| u64::try_from(c.dropped_lines()).unwrap_or(u64::MAX))
}

/// How long [`eprint_bounded`] waits for stderr to take its line.
pub(crate) const LAST_LINE_WAIT: Duration = Duration::from_secs(2);

/// Writes `text` to `out` from a thread named `name`; the receiver hears
/// when it is written. A pipe that is slow or never read holds up that
/// thread only, which the end of the process ends.
fn detached(
    name: &str,
    text: String,
    mut out: impl Write + Send + 'static,
) -> std::io::Result<std::sync::mpsc::Receiver<()>> {
    let (done, written) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
            let _ = done.send(());
        })?;
    Ok(written)
}

/// Writes `text` to stdout from a thread of its own and returns at once.
pub(crate) fn print_detached(text: String) {
    if let Err(err) = detached("kennel-stdout", text, std::io::stdout()) {
        tracing::warn!(target: "kennel_server", %err, "cannot start the thread that writes to stdout");
    }
}

/// Writes `text` to stderr, waiting for it at most [`LAST_LINE_WAIT`]: a
/// line written on the way out (an error) does not keep the process from
/// ending when nobody reads stderr.
pub(crate) fn eprint_bounded(text: &str) {
    if let Ok(written) = detached("kennel-stderr", text.to_owned(), std::io::stderr()) {
        let _ = written.recv_timeout(LAST_LINE_WAIT);
    }
}
