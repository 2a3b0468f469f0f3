//! One client connection: a reused read buffer, a reused write buffer, and a reply parser.
//!
//! Commands are appended to `out` and sent with one write per batch; replies are parsed in
//! place from the read buffer. Nothing is allocated per command. Every wait is bounded: a
//! read or write that makes no progress re-checks the run's stop condition every
//! [`POLL`], so a silent server can never hang the tool.

use std::io;
use std::net::SocketAddr;
use std::ops::Range;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::tls::Stream;

/// How often a blocked read or write looks at the stop condition.
pub const POLL: Duration = Duration::from_millis(100);
/// Longest reply line accepted (beanstalkd's longest is well under this).
const MAX_LINE: usize = 512;
/// Free space wanted in the read buffer before a read.
const MIN_FREE: usize = 4096;

/// Why a connection stopped.
#[derive(Debug)]
pub enum Fail {
    /// The run is stopping (not an error of this connection).
    Stopped,
    /// The server closed the connection.
    Eof,
    Io(io::Error),
    /// A reply that is not valid protocol.
    Protocol(String),
}

impl std::fmt::Display for Fail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fail::Stopped => f.write_str("stopped"),
            Fail::Eof => f.write_str("the server closed the connection"),
            Fail::Io(e) => write!(f, "i/o error: {e}"),
            Fail::Protocol(s) => write!(f, "protocol error: {s}"),
        }
    }
}

impl From<io::Error> for Fail {
    fn from(e: io::Error) -> Self {
        Fail::Io(e)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Inserted,
    Buried,
    Using,
    Watching,
    Reserved,
    Deleted,
    TimedOut,
    DeadlineSoon,
    /// Any other line (kept whole in `arg`).
    Other,
}

/// A parsed reply. `arg` indexes the read buffer (USING's tube, RESERVED's body, or the
/// whole line for `Other`) and stays valid until the next call to [`Conn::reply`].
#[derive(Debug, Clone)]
pub struct Reply {
    pub kind: Kind,
    pub num: u64,
    pub arg: Range<usize>,
}

/// What a blocked read waits for besides the stop flag.
pub trait Cancel {
    /// True when the run (or this connection's part of it) should stop waiting.
    fn cancelled(&self) -> bool;
}

#[derive(Debug)]
pub struct Conn {
    stream: Stream,
    rbuf: Vec<u8>,
    rpos: usize,
    rend: usize,
    /// Bytes the pending reply needs from `rpos` (0 when unknown).
    need: usize,
    /// Commands to send; `flush` writes and clears it.
    pub out: Vec<u8>,
    /// When the last read returned data: the receive time of every reply parsed from it.
    pub recv_at: Instant,
}

/// Buffers kept across connections (the storm scenario reconnects in a loop).
#[derive(Debug, Default)]
pub struct Bufs {
    pub rbuf: Vec<u8>,
    pub out: Vec<u8>,
}

impl Bufs {
    pub fn new(rcap: usize, wcap: usize) -> Self {
        Bufs {
            rbuf: vec![0; rcap.max(MIN_FREE * 2)],
            out: Vec::with_capacity(wcap),
        }
    }
}

fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in s {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    Some(v)
}

/// Append the decimal form of `v`.
pub fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&tmp[i..]);
}

fn lossy(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(&b[..b.len().min(120)]);
    format!("{s:?}")
}

impl Conn {
    pub async fn connect(addr: SocketAddr, bufs: Bufs) -> io::Result<Conn> {
        let stream = Stream::connect(addr).await?;
        Ok(Conn {
            stream,
            rbuf: bufs.rbuf,
            rpos: 0,
            rend: 0,
            need: 0,
            out: bufs.out,
            recv_at: Instant::now(),
        })
    }

    /// Give the buffers back for the next connection.
    pub fn into_bufs(mut self) -> Bufs {
        self.out.clear();
        Bufs {
            rbuf: self.rbuf,
            out: self.out,
        }
    }

    /// The socket and the buffers (for holding a connection without its buffers).
    pub fn into_parts(mut self) -> (Stream, Bufs) {
        self.out.clear();
        let bufs = Bufs {
            rbuf: self.rbuf,
            out: self.out,
        };
        (self.stream, bufs)
    }

    pub fn bytes(&self, r: &Range<usize>) -> &[u8] {
        &self.rbuf[r.clone()]
    }

    pub fn describe(&self, r: &Reply) -> String {
        match r.kind {
            Kind::Other => lossy(self.bytes(&r.arg)),
            Kind::Reserved => format!("RESERVED {} <{} bytes>", r.num, r.arg.len()),
            k => format!("{k:?} {}", r.num),
        }
    }

    /// Write all of `out` and clear it.
    pub async fn flush(&mut self, cancel: &impl Cancel) -> Result<(), Fail> {
        let mut off = 0;
        while off < self.out.len() {
            match tokio::time::timeout(POLL, self.stream.write(&self.out[off..])).await {
                Ok(Ok(0)) => return Err(Fail::Eof),
                Ok(Ok(n)) => off += n,
                Ok(Err(e)) => return Err(Fail::Io(e)),
                Err(_) => {
                    if cancel.cancelled() {
                        return Err(Fail::Stopped);
                    }
                }
            }
        }
        self.out.clear();
        // TLS may hold records back until flushed (a no-op for plain TCP).
        loop {
            match tokio::time::timeout(POLL, self.stream.flush()).await {
                Ok(Ok(())) => return Ok(()),
                Ok(Err(e)) => return Err(Fail::Io(e)),
                Err(_) => {
                    if cancel.cancelled() {
                        return Err(Fail::Stopped);
                    }
                }
            }
        }
    }

    async fn fill(&mut self, cancel: &impl Cancel) -> Result<(), Fail> {
        if self.rpos == self.rend {
            self.rpos = 0;
            self.rend = 0;
        }
        let want = self.need.max(MAX_LINE) + MIN_FREE;
        if self.rbuf.len() - self.rpos < want || self.rbuf.len() - self.rend < MIN_FREE {
            self.rbuf.copy_within(self.rpos..self.rend, 0);
            self.rend -= self.rpos;
            self.rpos = 0;
            if self.rbuf.len() < want {
                self.rbuf.resize(want.max(self.rbuf.len() * 2), 0);
            }
        }
        loop {
            let read = self.stream.read(&mut self.rbuf[self.rend..]);
            match tokio::time::timeout(POLL, read).await {
                Ok(Ok(0)) => return Err(Fail::Eof),
                Ok(Ok(n)) => {
                    self.rend += n;
                    self.recv_at = Instant::now();
                    return Ok(());
                }
                Ok(Err(e)) => return Err(Fail::Io(e)),
                Err(_) => {
                    if cancel.cancelled() {
                        return Err(Fail::Stopped);
                    }
                }
            }
        }
    }

    /// The next reply, reading as needed.
    pub async fn reply(&mut self, cancel: &impl Cancel) -> Result<Reply, Fail> {
        loop {
            if let Some(r) = self.parse()? {
                return Ok(r);
            }
            self.fill(cancel).await?;
        }
    }

    /// Wait for the server to close the connection (after `quit`); any bytes are an error.
    pub async fn expect_eof(&mut self, cancel: &impl Cancel) -> Result<(), Fail> {
        if self.rpos != self.rend {
            return Err(Fail::Protocol(format!(
                "unexpected bytes after quit: {}",
                lossy(&self.rbuf[self.rpos..self.rend])
            )));
        }
        match self.fill(cancel).await {
            Err(Fail::Eof) => Ok(()),
            Err(Fail::Io(e)) if e.kind() == io::ErrorKind::ConnectionReset => Ok(()),
            Err(e) => Err(e),
            Ok(()) => Err(Fail::Protocol(format!(
                "unexpected bytes after quit: {}",
                lossy(&self.rbuf[self.rpos..self.rend])
            ))),
        }
    }

    fn parse(&mut self) -> Result<Option<Reply>, Fail> {
        let avail = &self.rbuf[self.rpos..self.rend];
        let Some(nl) = memchr::memchr(b'\n', &avail[..avail.len().min(MAX_LINE)]) else {
            if avail.len() >= MAX_LINE {
                return Err(Fail::Protocol(format!(
                    "reply line longer than {MAX_LINE} bytes: {}",
                    lossy(avail)
                )));
            }
            return Ok(None);
        };
        if nl == 0 || avail[nl - 1] != b'\r' {
            return Err(Fail::Protocol(format!(
                "reply line not ended by CRLF: {}",
                lossy(&avail[..=nl])
            )));
        }
        let line = &avail[..nl - 1];
        let base = self.rpos;
        let mut consumed = nl + 1;
        let (kind, num, arg) = if let Some(rest) = line.strip_prefix(b"RESERVED ") {
            let mut parts = rest.splitn(2, |&c| c == b' ');
            let id = parts.next().and_then(parse_u64);
            let len = parts.next().and_then(parse_u64);
            let (Some(id), Some(len)) = (id, len) else {
                return Err(Fail::Protocol(format!(
                    "bad RESERVED line: {}",
                    lossy(line)
                )));
            };
            let len = usize::try_from(len).map_err(|_| Fail::Protocol("huge body".into()))?;
            let total = nl + 1 + len + 2;
            if avail.len() < total {
                self.need = total;
                return Ok(None);
            }
            if &avail[nl + 1 + len..total] != b"\r\n" {
                return Err(Fail::Protocol(format!(
                    "RESERVED {id} {len}: body not followed by CRLF"
                )));
            }
            consumed = total;
            (Kind::Reserved, id, base + nl + 1..base + nl + 1 + len)
        } else if let Some(rest) = line.strip_prefix(b"INSERTED ") {
            match parse_u64(rest) {
                Some(id) => (Kind::Inserted, id, 0..0),
                None => (Kind::Other, 0, base..base + line.len()),
            }
        } else if let Some(rest) = line.strip_prefix(b"BURIED ") {
            match parse_u64(rest) {
                Some(id) => (Kind::Buried, id, 0..0),
                None => (Kind::Other, 0, base..base + line.len()),
            }
        } else if let Some(rest) = line.strip_prefix(b"WATCHING ") {
            match parse_u64(rest) {
                Some(n) => (Kind::Watching, n, 0..0),
                None => (Kind::Other, 0, base..base + line.len()),
            }
        } else if line.starts_with(b"USING ") {
            (Kind::Using, 0, base + 6..base + line.len())
        } else if line == b"DELETED" {
            (Kind::Deleted, 0, 0..0)
        } else if line == b"TIMED_OUT" {
            (Kind::TimedOut, 0, 0..0)
        } else if line == b"DEADLINE_SOON" {
            (Kind::DeadlineSoon, 0, 0..0)
        } else {
            (Kind::Other, 0, base..base + line.len())
        };
        self.need = 0;
        self.rpos += consumed;
        Ok(Some(Reply { kind, num, arg }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal() {
        let mut v = Vec::new();
        for x in [0u64, 7, 10, 12345, u64::MAX] {
            v.clear();
            push_u64(&mut v, x);
            assert_eq!(v, x.to_string().as_bytes());
            assert_eq!(parse_u64(&v), Some(x));
        }
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"1x"), None);
        assert_eq!(parse_u64(b"99999999999999999999"), None);
    }
}
