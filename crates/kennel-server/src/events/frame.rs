//! [`Frame`]: one event, serialised once as the bytes of a server-sent
//! event and shared by every subscriber.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

/// One event as `/events` sends it: its id, its pool, and the SSE bytes
/// (`id:`, `event:`, `data:` lines and the blank line), made once.
#[derive(Debug)]
pub(crate) struct Frame {
    /// Increasing across every pool of the service; the SSE `id`.
    pub id: u64,
    /// The pool's name.
    pub pool: Arc<str>,
    /// The whole SSE frame.
    pub sse: Bytes,
}

impl Frame {
    /// The frame of `data` named `name`, with id `id`.
    pub(crate) fn new(id: u64, pool: Arc<str>, name: &'static str, data: &Value) -> Self {
        let sse = Bytes::from(format!("id: {id}\nevent: {name}\ndata: {data}\n\n"));
        Self { id, pool, sse }
    }
}

/// The last frame a slow subscriber gets: `event: lagged`, with how many
/// frames it missed; its stream then ends.
pub(crate) fn lagged(missed: u64) -> Bytes {
    Bytes::from(format!(
        "event: lagged\ndata: {{\"missed\":{missed},\"reason\":\"the subscriber fell too far behind; reconnect with Last-Event-ID to replay\"}}\n\n"
    ))
}

/// A keep-alive comment.
pub(crate) const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";
