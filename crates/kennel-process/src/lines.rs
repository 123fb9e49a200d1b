//! Reading newline-terminated lines with a size limit: a worker's line may
//! be huge, never end, or not be UTF-8; [`LineReader`] never holds more
//! than the limit, and keeps a partial line in itself.

use std::future::Future;
use std::io;
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// How long an excerpt of bad output may be, in bytes.
const EXCERPT_BYTES: usize = 80;

/// The outcome of reading one line.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// A whole line, without its `\n` (and without a `\r` before it); in
    /// [`Overflow::Truncate`] mode cut at the limit.
    Complete(Vec<u8>),
    /// A line longer than the limit (only when the reader fails on long
    /// lines). The first bytes are kept for an excerpt; the stream is left in
    /// the middle of the line.
    TooLong(Vec<u8>),
    /// The end of the stream. `partial` holds bytes of a last line that had
    /// no newline.
    Eof {
        /// Bytes after the last newline.
        partial: Vec<u8>,
    },
}

/// What to do with a line over the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Overflow {
    /// Stop and return [`Line::TooLong`].
    Fail,
    /// Keep the first `limit` bytes, drop the rest.
    Truncate,
}

/// Reads lines of at most `limit` bytes.
#[derive(Debug)]
pub(crate) struct LineReader<R> {
    inner: BufReader<R>,
    buf: Vec<u8>,
    limit: usize,
    overflow: Overflow,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub(crate) fn new(inner: R, limit: usize, overflow: Overflow) -> Self {
        Self {
            inner: BufReader::with_capacity(64 * 1024, inner),
            buf: Vec::new(),
            limit,
            overflow,
        }
    }

    /// Reads the next line.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: bytes read before the future is dropped
    /// stay in the reader and the next call goes on from there.
    pub(crate) async fn next_line(&mut self) -> io::Result<Line> {
        loop {
            let available = self.inner.fill_buf().await?;
            if available.is_empty() {
                return Ok(Line::Eof {
                    partial: std::mem::take(&mut self.buf),
                });
            }
            let newline = available.iter().position(|&b| b == b'\n');
            let chunk_len = newline.unwrap_or(available.len());
            let room = self.limit.saturating_sub(self.buf.len());
            if chunk_len > room {
                match self.overflow {
                    Overflow::Fail => {
                        let mut head = std::mem::take(&mut self.buf);
                        head.truncate(EXCERPT_BYTES);
                        let more = EXCERPT_BYTES.saturating_sub(head.len()).min(chunk_len);
                        head.extend_from_slice(&available[..more]);
                        return Ok(Line::TooLong(head));
                    }
                    Overflow::Truncate => {
                        // Past the limit `room` is 0: the rest is dropped.
                        self.buf.extend_from_slice(&available[..room]);
                    }
                }
            } else {
                self.buf.extend_from_slice(&available[..chunk_len]);
            }
            match newline {
                Some(at) => {
                    self.inner.consume(at + 1);
                    let mut line = std::mem::take(&mut self.buf);
                    if line.last() == Some(&b'\r') {
                        line.pop();
                    }
                    return Ok(Line::Complete(line));
                }
                None => {
                    let len = available.len();
                    self.inner.consume(len);
                }
            }
        }
    }

    /// Reads exactly `n` bytes (a `Content-Length` body); `None` at the end
    /// of the stream before all of them came.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: the bytes read so far stay in the reader,
    /// and the next call with the same `n` goes on from there.
    pub(crate) async fn next_bytes(&mut self, n: usize) -> io::Result<Option<Vec<u8>>> {
        while self.buf.len() < n {
            let available = self.inner.fill_buf().await?;
            if available.is_empty() {
                return Ok(None);
            }
            let take = available.len().min(n - self.buf.len());
            self.buf.extend_from_slice(&available[..take]);
            self.inner.consume(take);
        }
        Ok(Some(std::mem::take(&mut self.buf)))
    }

    /// Output that is already waiting, read or readable at once, when no
    /// one asked for any: returns its first bytes if any of them is not
    /// whitespace. Whitespace alone (blank lines) is consumed, as
    /// [`next_line`](Self::next_line) would skip it. Never waits: what has
    /// not arrived yet is not seen.
    pub(crate) fn unsolicited(&mut self) -> Option<Vec<u8>> {
        if self.buf.iter().any(|b| !b.is_ascii_whitespace()) {
            return Some(self.buf.clone());
        }
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            let fill = self.inner.fill_buf();
            tokio::pin!(fill);
            let available = match fill.poll(&mut cx) {
                // Nothing waiting; an error or the end of the stream shows
                // when the reply is read.
                Poll::Pending | Poll::Ready(Err(_)) => return None,
                Poll::Ready(Ok(available)) => available,
            };
            if available.is_empty() {
                return None;
            }
            if available.iter().any(|b| !b.is_ascii_whitespace()) {
                return Some(available[..available.len().min(EXCERPT_BYTES)].to_vec());
            }
            let len = available.len();
            self.inner.consume(len);
        }
    }
}

/// A short, printable excerpt of raw output, for error messages and logs.
pub(crate) fn excerpt(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(EXCERPT_BYTES)];
    let text = String::from_utf8_lossy(cut);
    if bytes.len() > EXCERPT_BYTES {
        format!("{text:?}…")
    } else {
        format!("{text:?}")
    }
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use tokio::io::ReadBuf;

    use super::*;

    /// A reader that hands out its data in chunks of a fixed size.
    struct Chunked {
        data: Vec<u8>,
        at: usize,
        chunk: usize,
    }

    impl AsyncRead for Chunked {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            let end = (self.at + self.chunk)
                .min(self.data.len())
                .min(self.at + buf.remaining());
            let at = self.at;
            buf.put_slice(&self.data[at..end]);
            self.at = end;
            Poll::Ready(Ok(()))
        }
    }

    async fn read_all(data: &[u8], chunk: usize, limit: usize, overflow: Overflow) -> Vec<Line> {
        let mut reader = LineReader::new(
            Chunked {
                data: data.to_vec(),
                at: 0,
                chunk,
            },
            limit,
            overflow,
        );
        let mut out = Vec::new();
        loop {
            let line = reader.next_line().await.expect("reading from memory");
            let end = matches!(line, Line::Eof { .. } | Line::TooLong(_));
            out.push(line);
            if end {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn lines_are_split_the_same_whatever_the_chunk_size() {
        let data = b"{\"a\":1}\r\n\nsecond line\nlast";
        for chunk in 1..=data.len() {
            let lines = read_all(data, chunk, 64, Overflow::Fail).await;
            assert_eq!(
                lines,
                vec![
                    Line::Complete(b"{\"a\":1}".to_vec()),
                    Line::Complete(Vec::new()),
                    Line::Complete(b"second line".to_vec()),
                    Line::Eof {
                        partial: b"last".to_vec()
                    },
                ],
                "chunk size {chunk}"
            );
        }
    }

    #[tokio::test]
    async fn a_line_of_exactly_the_limit_is_accepted_and_one_more_byte_is_not() {
        for chunk in [1, 3, 7, 100] {
            let lines = read_all(b"12345\n", chunk, 5, Overflow::Fail).await;
            assert_eq!(
                lines[0],
                Line::Complete(b"12345".to_vec()),
                "chunk size {chunk}"
            );
            let lines = read_all(b"123456\n", chunk, 5, Overflow::Fail).await;
            assert!(matches!(lines[0], Line::TooLong(_)), "chunk size {chunk}");
        }
    }

    #[tokio::test]
    async fn a_too_long_line_keeps_a_short_excerpt() {
        let data = vec![b'x'; 10_000];
        let lines = read_all(&data, 333, 1000, Overflow::Fail).await;
        let Line::TooLong(head) = &lines[0] else {
            panic!("expected TooLong, got {:?}", lines[0]);
        };
        assert_eq!(head.len(), EXCERPT_BYTES);
    }

    #[tokio::test]
    async fn truncating_mode_cuts_long_lines_and_goes_on() {
        for chunk in [1, 4, 50] {
            let lines = read_all(b"abcdefgh\nok\n", chunk, 3, Overflow::Truncate).await;
            assert_eq!(
                lines,
                vec![
                    Line::Complete(b"abc".to_vec()),
                    Line::Complete(b"ok".to_vec()),
                    Line::Eof {
                        partial: Vec::new()
                    },
                ],
                "chunk size {chunk}"
            );
        }
    }

    #[test]
    fn excerpts_are_short_and_printable() {
        assert_eq!(excerpt(b"not json"), "\"not json\"");
        let long = excerpt(&[b'a'; 500]);
        assert!(long.len() < 100, "{long}");
        assert!(long.ends_with('…'));
        assert_eq!(excerpt(b"\xff\n"), "\"\u{fffd}\\n\"");
    }
}
