//! Reading the next message from a coprocess, with the end of its stream,
//! a message over the limit and broken framing turned into the errors of
//! the protocol (the worker is killed for each).

use super::Coprocess;
use crate::error::ProcessError;
use crate::frames::Frame;
use crate::lines::excerpt;

/// What the read was for, which decides the error of an end.
#[derive(Debug, Clone, Copy)]
pub(super) enum Reading {
    /// The warm-up (a ready line, a handshake): an end is `NotReady`.
    WarmUp,
    /// A reply: an end is `Crashed`.
    Reply,
}

impl Coprocess {
    /// The next message, or the error that broke the stream (the worker has
    /// been killed then).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a half-read message stays in the reader.
    pub(super) async fn next_message(&mut self, reading: Reading) -> Result<Vec<u8>, ProcessError> {
        let frame = match self.stdout.next().await {
            Ok(frame) => frame,
            Err(err) => {
                let what = format!("reading its stdout failed: {err}");
                return Err(self.ended(reading, &what).await);
            }
        };
        match frame {
            Frame::Message(bytes) => Ok(bytes),
            Frame::TooLong(head) => {
                let message = format!(
                    "a line is over the {}-byte limit; it starts with {}",
                    self.spec.max_line_bytes,
                    excerpt(&head)
                );
                Err(self.protocol_error(message).await)
            }
            Frame::BadHeader(message) => {
                let message = format!("the worker broke the Content-Length framing: {message}");
                Err(self.protocol_error(message).await)
            }
            Frame::Eof => {
                let what = match reading {
                    Reading::WarmUp => "it closed its stdout before it was ready",
                    Reading::Reply => "it closed its stdout before replying",
                };
                Err(self.ended(reading, what).await)
            }
        }
    }

    /// The worker's end, met while `reading`: the error to return.
    pub(super) async fn ended(&mut self, reading: Reading, what: &str) -> ProcessError {
        let status = self.break_after_eof(what).await;
        let stderr = self.last_words().await;
        match reading {
            Reading::WarmUp => ProcessError::NotReady {
                reason: status
                    .as_ref()
                    .map_or_else(|| what.to_owned(), ToString::to_string),
                status,
                stderr,
            },
            Reading::Reply => ProcessError::Crashed { status, stderr },
        }
    }

    /// Writes `bytes` as [`write`](Self::write) does; if that fails, the
    /// error of the worker's end met while `reading` (`what` was written).
    pub(super) async fn send(
        &mut self,
        bytes: &[u8],
        reading: Reading,
        what: &str,
    ) -> Result<(), ProcessError> {
        match self.write(bytes).await {
            Ok(()) => Ok(()),
            Err(err) => Err(self
                .ended(reading, &format!("writing {what} failed: {err}"))
                .await),
        }
    }

    /// Writes `bytes` to the worker's stdin and flushes.
    ///
    /// # Errors
    ///
    /// The write's error (a closed pipe, say); the caller decides.
    pub(super) async fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        use tokio::io::AsyncWriteExt;
        match self.stdin.as_mut() {
            Some(stdin) => {
                stdin.write_all(bytes).await?;
                stdin.flush().await
            }
            None => Err(std::io::ErrorKind::BrokenPipe.into()),
        }
    }
}
