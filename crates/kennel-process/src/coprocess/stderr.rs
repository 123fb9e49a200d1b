//! A [`Coprocess`](super::Coprocess)'s stderr, forwarded line by line to
//! `tracing`.

use tokio::process::ChildStderr;

use super::Label;
use crate::lines::{Line, LineReader, Overflow};

/// The longest stderr line forwarded whole; longer ones are cut.
const STDERR_LINE_BYTES: usize = 64 * 1024;

/// Forwards each stderr line of the worker to `tracing`.
pub(super) async fn forward_stderr(stderr: ChildStderr, label: Label, pid: u32) {
    let mut reader = LineReader::new(stderr, STDERR_LINE_BYTES, Overflow::Truncate);
    loop {
        let (bytes, last) = match reader.next_line().await {
            Ok(Line::Complete(bytes) | Line::Truncated(bytes) | Line::TooLong(bytes)) => {
                (bytes, false)
            }
            Ok(Line::Eof { partial }) => (partial, true),
            Err(_) => return,
        };
        if !bytes.is_empty() || !last {
            let line = String::from_utf8_lossy(&bytes);
            tracing::info!(
                target: "kennel_process::stderr",
                pool = label.pool.as_deref(),
                slot = label.slot,
                pid,
                "{line}"
            );
        }
        if last {
            return;
        }
    }
}
