//! Reading one message at a time in a coprocess's framing: a line for the
//! line framings, a `Content-Length` frame for LSP's. The state of a frame
//! half read lives here, so that a dropped read loses nothing.

use std::io;

use tokio::io::AsyncRead;

use crate::framing::Framing;
use crate::lines::{Line, LineReader, Overflow};

/// One message, or why there is none.
#[derive(Debug)]
pub(crate) enum Frame {
    /// A message: a line that is not blank, or a frame's body.
    Message(Vec<u8>),
    /// A line or a frame over the limit: the first bytes, for an excerpt.
    TooLong(Vec<u8>),
    /// Headers that are not `Content-Length` framing.
    BadHeader(String),
    /// The end of the stream.
    Eof,
}

/// Reads the messages of one framing from a worker's stdout.
#[derive(Debug)]
pub(crate) struct Frames<R> {
    lines: LineReader<R>,
    framing: Framing,
    limit: usize,
    /// Within the headers of a frame: its `Content-Length`, once read.
    headers: Option<Option<usize>>,
    /// The headers ended: the body of this many bytes comes next.
    body: Option<usize>,
}

impl<R: AsyncRead + Unpin> Frames<R> {
    pub(crate) fn new(inner: R, framing: Framing, limit: usize) -> Self {
        Self {
            lines: LineReader::new(inner, limit, Overflow::Fail),
            framing,
            limit,
            headers: None,
            body: None,
        }
    }

    /// The lines underneath, for the check for unasked output.
    pub(crate) fn lines(&mut self) -> &mut LineReader<R> {
        &mut self.lines
    }

    /// The next message; blank lines (and blank lines between frames) are
    /// skipped.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: a half-read line or frame stays here and
    /// the next call goes on with it.
    pub(crate) async fn next(&mut self) -> io::Result<Frame> {
        loop {
            if let Some(n) = self.body {
                let body = self.lines.next_bytes(n).await?;
                self.body = None;
                return Ok(body.map_or(Frame::Eof, Frame::Message));
            }
            let line = match self.lines.next_line().await? {
                Line::Complete(bytes) => bytes,
                Line::TooLong(head) => return Ok(Frame::TooLong(head)),
                Line::Eof { .. } => return Ok(Frame::Eof),
            };
            if self.framing != Framing::ContentLength {
                if !line.iter().all(u8::is_ascii_whitespace) {
                    return Ok(Frame::Message(line));
                }
                continue;
            }
            let text = String::from_utf8_lossy(&line);
            let text = text.trim();
            if text.is_empty() {
                match self.headers.take() {
                    None => {} // blank lines between frames
                    Some(Some(n)) if n > self.limit => {
                        return Ok(Frame::TooLong(format!("Content-Length: {n}").into_bytes()));
                    }
                    Some(Some(n)) => self.body = Some(n),
                    Some(None) => {
                        let message = "a frame has no Content-Length header".to_owned();
                        return Ok(Frame::BadHeader(message));
                    }
                }
                continue;
            }
            let length = self.headers.get_or_insert(None);
            let Some((name, value)) = text.split_once(':') else {
                return Ok(Frame::BadHeader(format!(
                    "a header line has no colon: {}",
                    crate::lines::excerpt(&line)
                )));
            };
            if name.trim().eq_ignore_ascii_case("content-length") {
                match value.trim().parse::<usize>() {
                    Ok(n) => *length = Some(n),
                    Err(_) => {
                        return Ok(Frame::BadHeader(format!(
                            "a Content-Length that is not a number: {}",
                            crate::lines::excerpt(value.trim().as_bytes())
                        )));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn all(data: &[u8], framing: Framing, limit: usize) -> Vec<String> {
        let mut frames = Frames::new(data, framing, limit);
        let mut out = Vec::new();
        loop {
            match frames.next().await.unwrap() {
                Frame::Message(m) => out.push(String::from_utf8(m).unwrap()),
                Frame::TooLong(h) => {
                    out.push(format!("too long: {}", String::from_utf8_lossy(&h)));
                    return out;
                }
                Frame::BadHeader(m) => {
                    out.push(format!("bad: {m}"));
                    return out;
                }
                Frame::Eof => return out,
            }
        }
    }

    #[tokio::test]
    async fn content_length_frames_are_read_whole_with_any_header_case() {
        let data = b"Content-Length: 2\r\n\r\n{}\r\n\r\ncontent-length:8\r\nContent-Type: x\r\n\r\n[1,\n2,3]";
        assert_eq!(
            all(data, Framing::ContentLength, 100).await,
            ["{}", "[1,\n2,3]"]
        );
    }

    #[tokio::test]
    async fn a_frame_over_the_limit_or_without_a_length_is_refused() {
        let over = all(b"Content-Length: 101\r\n\r\n", Framing::ContentLength, 100).await;
        assert_eq!(over, ["too long: Content-Length: 101"]);
        let none = all(b"Content-Type: x\r\n\r\n{}", Framing::ContentLength, 100).await;
        assert_eq!(none, ["bad: a frame has no Content-Length header"]);
        let text = all(b"hello\r\n\r\n", Framing::ContentLength, 100).await;
        assert!(
            text[0].starts_with("bad: a header line has no colon"),
            "{text:?}"
        );
    }

    #[tokio::test]
    async fn line_framings_skip_blank_lines() {
        assert_eq!(
            all(b"\n{\"a\":1}\n  \n[2]\n", Framing::JsonRpc, 100).await,
            ["{\"a\":1}", "[2]"]
        );
    }
}
