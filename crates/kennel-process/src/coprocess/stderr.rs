//! A [`Coprocess`](super::Coprocess)'s stderr: forwarded line by line to
//! `tracing` within a budget per worker (`budget.rs`), and its last lines
//! kept as the worker's last words ([`StderrTail`]).

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::process::ChildStderr;
use tokio::sync::watch;

use super::budget::{STDERR_BYTES_PER_SEC, STDERR_LINES_PER_SEC, StderrBudget};
use crate::lines::{Line, LineReader, Overflow};
use crate::spec::CoprocessSpec;

/// The longest stderr line forwarded whole; longer ones are cut.
const STDERR_LINE_BYTES: usize = 64 * 1024;

/// How many stderr lines a [`StderrTail`] keeps: the last 20.
pub const STDERR_TAIL_LINES: usize = 20;

/// How many bytes of stderr a [`StderrTail`] keeps at most: 4 KiB (a line
/// alone longer than that keeps its first 4 KiB).
pub const STDERR_TAIL_BYTES: usize = 4 * 1024;

/// The last lines a worker wrote on stderr: at most [`STDERR_TAIL_LINES`]
/// lines and [`STDERR_TAIL_BYTES`] bytes, oldest first, blank lines left
/// out, each decoded as UTF-8 (invalid bytes replaced). Cheap to clone;
/// see [`Coprocess::stderr_tail`](crate::Coprocess::stderr_tail).
#[derive(Clone)]
pub struct StderrTail {
    inner: Arc<Inner>,
}

struct Inner {
    lines: Mutex<Tail>,
    closed: watch::Sender<bool>,
}

#[derive(Default)]
struct Tail {
    lines: VecDeque<String>,
    bytes: usize,
}

impl StderrTail {
    pub(crate) fn new() -> Self {
        Self {
            inner: Arc::new(Inner {
                lines: Mutex::new(Tail::default()),
                closed: watch::channel(false).0,
            }),
        }
    }

    /// The lines kept, oldest first.
    pub fn lines(&self) -> Vec<String> {
        self.tail().lines.iter().cloned().collect()
    }

    /// The last line kept, if any.
    pub fn last_line(&self) -> Option<String> {
        self.tail().lines.back().cloned()
    }

    /// Whether the worker's stderr has closed (every process that held it
    /// has ended or closed it), so that no line will be added.
    pub fn is_closed(&self) -> bool {
        *self.inner.closed.borrow()
    }

    /// Resolves once the worker's stderr has closed and every line it wrote
    /// has been kept.
    ///
    /// # Errors
    ///
    /// None: it only waits. (Should the task reading stderr stop, e.g. with
    /// its runtime, the tail is marked closed all the same.)
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: it only waits.
    pub async fn closed(&self) {
        let mut rx = self.inner.closed.subscribe();
        // The sender lives in `self`: `wait_for` cannot fail while it waits.
        let _ = rx.wait_for(|closed| *closed).await;
    }

    /// Keeps `line` as the newest line, dropping the oldest ones beyond the
    /// bounds.
    pub(crate) fn push(&self, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        let text = text.trim_end();
        if text.is_empty() {
            return;
        }
        let text = cut(text, STDERR_TAIL_BYTES).to_owned();
        let mut tail = self.tail();
        tail.bytes += text.len();
        tail.lines.push_back(text);
        while tail.lines.len() > STDERR_TAIL_LINES || tail.bytes > STDERR_TAIL_BYTES {
            let Some(old) = tail.lines.pop_front() else {
                break;
            };
            tail.bytes -= old.len();
        }
    }

    fn tail(&self) -> std::sync::MutexGuard<'_, Tail> {
        self.inner
            .lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for StderrTail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StderrTail")
            .field("lines", &self.tail().lines)
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// The longest start of `text` of at most `max` bytes that ends on a
/// character boundary.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Forwards each stderr line of the worker to `tracing` and keeps it in
/// `tail`, within the worker's [`StderrBudget`]: lines past it are read
/// and dropped, counted in `kennel_worker_stderr_dropped_lines_total`
/// (labelled `pool`) and in a WARN line at most every 10 s. Marks the tail
/// closed at the end of the stream.
pub(super) async fn forward_stderr(
    stderr: ChildStderr,
    spec: CoprocessSpec,
    pid: u32,
    tail: StderrTail,
) {
    let mut reader = LineReader::new(stderr, STDERR_LINE_BYTES, Overflow::Truncate);
    // Closed however this task ends, even when its runtime stops.
    let _closed = CloseOnDrop(tail.clone());
    let mut budget = StderrBudget::new();
    let (pool, slot) = (spec.pool.as_deref(), spec.slot);
    let dropped_lines = metrics::counter!(
        "kennel_worker_stderr_dropped_lines_total",
        "pool" => pool.unwrap_or_default().to_owned()
    );
    let note = |dropped: Option<u64>| {
        let Some(dropped) = dropped else { return };
        tracing::warn!(
            target: "kennel_process::stderr",
            pool,
            slot,
            pid,
            dropped,
            "the worker writes stderr faster than {STDERR_LINES_PER_SEC} lines or {} KiB a second: {dropped} line(s) dropped",
            STDERR_BYTES_PER_SEC / 1024,
        );
    };
    loop {
        let allowed = budget.allows_line();
        let (bytes, last) = match reader.next_line().await {
            Ok(Line::Complete(bytes) | Line::TooLong(bytes)) => (bytes, false),
            Ok(Line::Eof { partial }) => (partial, true),
            Err(_) => break,
        };
        if bytes.is_empty() && last {
            break;
        } else if !allowed {
            dropped_lines.increment(1);
            budget.dropped += 1;
        } else {
            budget.spend(bytes.len());
            tail.push(&bytes);
            let line = String::from_utf8_lossy(&bytes);
            tracing::info!(target: "kennel_process::stderr", pool, slot, pid, "{line}");
        }
        note(budget.note_due(false));
        if last {
            break;
        }
    }
    note(budget.note_due(true));
}

struct CloseOnDrop(StderrTail);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.inner.closed.send_replace(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_lines_in_order() {
        let tail = StderrTail::new();
        for i in 0..50 {
            tail.push(format!("line {i}").as_bytes());
        }
        let expected: Vec<String> = (30..50).map(|i| format!("line {i}")).collect();
        assert_eq!(tail.lines(), expected);
        assert_eq!(tail.last_line().as_deref(), Some("line 49"));
    }

    #[test]
    fn the_tail_keeps_at_most_its_bytes_dropping_the_oldest_lines() {
        let tail = StderrTail::new();
        for i in 0..10 {
            tail.push(format!("{i}{}", "x".repeat(999)).as_bytes());
        }
        let lines = tail.lines();
        assert_eq!(lines.len(), 4, "4 lines of 1000 bytes fit in 4 KiB");
        assert!(lines.iter().map(String::len).sum::<usize>() <= STDERR_TAIL_BYTES);
        assert!(lines[0].starts_with('6') && lines[3].starts_with('9'));
    }

    #[test]
    fn a_line_longer_than_the_tail_keeps_its_start_on_a_character_boundary() {
        let tail = StderrTail::new();
        tail.push("é".repeat(STDERR_TAIL_BYTES).as_bytes());
        let lines = tail.lines();
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].len(), STDERR_TAIL_BYTES);
        assert!(lines[0].chars().all(|c| c == 'é'));
    }

    #[test]
    fn blank_lines_and_trailing_spaces_are_not_kept() {
        let tail = StderrTail::new();
        tail.push(b"first  \r");
        tail.push(b"   ");
        tail.push(b"");
        tail.push(b"\xffsecond");
        assert_eq!(tail.lines(), ["first", "\u{fffd}second"]);
    }
}
