//! Logging that never blocks the server (ADR 0021): every line goes
//! through `tracing-appender`'s non-blocking writer, in lossy mode, to
//! stderr. When stderr is slow or stalled (a log shipper that stopped
//! reading a pipe), lines beyond a bounded buffer are dropped and counted
//! (`kennel_log_dropped_lines_total` at `/metrics`) instead of holding up
//! the request or the signal that wrote them.
//!
//! Lines are text or JSON (`--log-format`, `server.log_format`), filtered
//! by `RUST_LOG`; with the access log on, each request is one INFO line
//! (target `kennel_server::access`).

use std::sync::OnceLock;
use std::time::Instant;

use axum::extract::Request;
use axum::response::Response;
use tracing_appender::non_blocking::{ErrorCounter, NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;
use crate::state::AppState;

/// How many log lines may wait for stderr before new ones are dropped.
pub const LOG_BUFFER_LINES: usize = 8_192;

/// The longest path an access log line shows; longer ones are cut.
const ACCESS_PATH_CHARS: usize = 256;

static DROPPED: OnceLock<ErrorCounter> = OnceLock::new();

/// Keeps the log writer's thread; dropping it flushes what waits (for at
/// most a second) and stops the thread. Hold it until the process ends.
#[derive(Debug)]
#[must_use = "dropping the guard stops the log writer"]
pub struct LogGuard(#[allow(dead_code)] WorkerGuard);

/// Installs the process's log subscriber: `format` lines on stderr through
/// the non-blocking writer, filtered by `RUST_LOG` or else by `default`.
/// Later calls install nothing (the first subscriber stays) but return a
/// guard all the same.
pub fn init(format: LogFormat, default: &str) -> LogGuard {
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
    LogGuard(guard)
}

/// Log lines dropped so far because stderr did not keep up.
pub fn dropped_lines() -> u64 {
    DROPPED
        .get()
        .map_or(0, |c| u64::try_from(c.dropped_lines()).unwrap_or(u64::MAX))
}

/// One request's access log line, begun as the request comes in and
/// written once it is answered: method, path, route, status and time.
pub(crate) struct AccessLine {
    started: Instant,
    method: String,
    path: String,
    route: String,
}

impl AccessLine {
    /// With the state's access log on, the line of `request`, which came
    /// in at `started` and took `route` (its metrics' label); `None` with
    /// it off (the default), which costs nothing more.
    pub(crate) fn start(
        state: &AppState,
        request: &Request,
        route: &str,
        started: Instant,
    ) -> Option<Self> {
        if !state.access_log() {
            return None;
        }
        Some(Self {
            started,
            method: request.method().as_str().chars().take(32).collect(),
            path: request
                .uri()
                .path()
                .chars()
                .take(ACCESS_PATH_CHARS)
                .collect(),
            route: route.to_owned(),
        })
    }

    /// Writes the line, with the answer's status.
    pub(crate) fn finish(self, response: &Response) {
        tracing::info!(
            target: "kennel_server::access",
            method = %self.method,
            path = %self.path,
            route = %self.route,
            status = response.status().as_u16(),
            millis = (self.started.elapsed().as_secs_f64() * 1e6).round() / 1e3,
            "request"
        );
    }
}
