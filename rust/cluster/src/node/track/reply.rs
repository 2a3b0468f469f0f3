//! The server's side of a session: its byte stream cut into replies. A reply is
//! one line, except `RESERVED <id> <bytes>`, `FOUND <id> <bytes>` and
//! `OK <bytes>`, which a body of that many bytes and CRLF follows.
//!
//! The server is trusted to keep to this; a stream that does not is an error
//! ([`ReplyError`]), reported once and then for good.

use bytes::{Bytes, BytesMut};
use thiserror::Error;

/// Longest reply line accepted, CRLF included. The server's longest is
/// `USING ` and a 200-byte tube name; job ids and sizes are at most 20 digits.
pub const MAX_REPLY_LINE: usize = 512;

/// Why the server's bytes are no stream of replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ReplyError {
    /// No CRLF within [`MAX_REPLY_LINE`] bytes.
    #[error("reply line longer than {MAX_REPLY_LINE} bytes")]
    LineTooLong,
    /// A `RESERVED`, `FOUND` or `OK` line whose body length cannot be read.
    #[error("reply line announces a body of unreadable length")]
    BadLength,
    /// A body not followed by CRLF.
    #[error("reply body not followed by CRLF")]
    MissingCrlf,
}

/// One complete reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The reply's bytes as the server sent them: its line and CRLF, and its body
    /// and CRLF if it has one.
    bytes: Bytes,
    /// Length of the line, without its CRLF.
    line: usize,
}

impl Reply {
    /// The reply's bytes as the server sent them.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// The reply's bytes, given up.
    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }

    /// The reply line without its CRLF, e.g. `WATCHING 2`.
    pub fn line(&self) -> &[u8] {
        &self.bytes[..self.line]
    }

    /// The body without its CRLF, for a reply that has one.
    pub fn body(&self) -> Option<&[u8]> {
        let start = self.line + 2;
        (self.bytes.len() > start).then(|| &self.bytes[start..self.bytes.len() - 2])
    }
}

/// Cuts a server's byte stream into [`Reply`]s, in order.
///
/// Feed it with [`ReplyFramer::push`] (or read straight into
/// [`ReplyFramer::input_mut`]), then call [`ReplyFramer::next_reply`] until it
/// returns `Ok(None)`. A reply is held until it is complete, its body included.
#[derive(Debug, Default)]
pub struct ReplyFramer {
    input: BytesMut,
    /// The reply at the front of the input, once its line is read: the length of
    /// its line (no CRLF) and of the whole reply.
    head: Option<(usize, usize)>,
    failed: Option<ReplyError>,
}

impl ReplyFramer {
    /// A framer at the start of a server's stream.
    pub fn new() -> ReplyFramer {
        ReplyFramer::default()
    }

    /// Add bytes received from the server.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.failed.is_none() {
            self.input.extend_from_slice(bytes);
        }
    }

    /// The input buffer, to read into directly (e.g. with `read_buf`), with
    /// room for a read of several replies (`READ_SPARE`); bytes appended to
    /// it count as pushed.
    pub fn input_mut(&mut self) -> &mut BytesMut {
        self.input.reserve(super::READ_SPARE);
        &mut self.input
    }

    /// Bytes received and held, not yet given out in a reply.
    pub fn buffered(&self) -> usize {
        self.input.len()
    }

    /// The next complete reply, if it is all in.
    pub fn next_reply(&mut self) -> Result<Option<Reply>, ReplyError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let (line, total) = match self.head {
            Some(head) => head,
            None => match self.read_head() {
                Ok(Some(head)) => head,
                Ok(None) => return Ok(None),
                Err(e) => return Err(self.fail(e)),
            },
        };
        self.head = Some((line, total));
        if self.input.len() < total {
            return Ok(None);
        }
        self.head = None;
        if total > line + 2 && &self.input[total - 2..total] != b"\r\n" {
            return Err(self.fail(ReplyError::MissingCrlf));
        }
        Ok(Some(Reply {
            bytes: self.input.split_to(total).freeze(),
            line,
        }))
    }

    fn fail(&mut self, e: ReplyError) -> ReplyError {
        self.failed = Some(e);
        self.input = BytesMut::new();
        e
    }

    /// The line at the front of the input, once it is all in: its length (no
    /// CRLF) and the reply's.
    fn read_head(&mut self) -> Result<Option<(usize, usize)>, ReplyError> {
        let window = &self.input[..self.input.len().min(MAX_REPLY_LINE)];
        let Some(end) = window.windows(2).position(|w| w == b"\r\n") else {
            if self.input.len() >= MAX_REPLY_LINE {
                return Err(ReplyError::LineTooLong);
            }
            return Ok(None);
        };
        let body = body_len(&self.input[..end])?;
        let total = match body {
            None => end + 2,
            Some(n) => n.checked_add(end + 4).ok_or(ReplyError::BadLength)?,
        };
        Ok(Some((end, total)))
    }
}

/// The length of the body a reply line announces (without its CRLF), None for a
/// line with no body.
fn body_len(line: &[u8]) -> Result<Option<usize>, ReplyError> {
    let (rest, fields) = if let Some(rest) = line.strip_prefix(b"RESERVED ") {
        (rest, 2)
    } else if let Some(rest) = line.strip_prefix(b"FOUND ") {
        (rest, 2)
    } else if let Some(rest) = line.strip_prefix(b"OK ") {
        (rest, 1)
    } else {
        return Ok(None);
    };
    let mut parts = rest.split(|&b| b == b' ');
    let mut last = None;
    for _ in 0..fields {
        last = Some(number(parts.next().ok_or(ReplyError::BadLength)?)?);
    }
    if parts.next().is_some() {
        return Err(ReplyError::BadLength);
    }
    let n = last.ok_or(ReplyError::BadLength)?;
    usize::try_from(n)
        .map(Some)
        .map_err(|_| ReplyError::BadLength)
}

/// A decimal number of at least one digit and nothing else.
fn number(digits: &[u8]) -> Result<u64, ReplyError> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(ReplyError::BadLength);
    }
    digits.iter().try_fold(0u64, |v, &d| {
        v.checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(d - b'0')))
            .ok_or(ReplyError::BadLength)
    })
}
