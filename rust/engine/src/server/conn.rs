//! One task per connection: read, apply every complete command under one lock,
//! answer with one write.
//!
//! Reading follows beanstalkd's framing exactly: a command line must end within
//! [`MAX_LINE`] bytes (CRLF included) or the bytes are thrown away up to the next
//! CRLF and answered BAD_FORMAT; a put's body is the announced number of bytes plus
//! CRLF; an oversized body is read and discarded before JOB_TOO_BIG. A connection
//! blocked in reserve processes nothing more until it is answered, but keeps reading
//! (up to a bound) so it notices when the client hangs up.

use std::io::{self, Write};
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

use super::{ConnWaker, Shared};
use crate::protocol::{self as proto, parse, Command, Op, ProtocolError, MAX_LINE};
use crate::stats;
use crate::store::{ConnId, Delivery, ReserveOutcome, Store};

/// Bytes read per read call when no body is pending.
const READ_CHUNK: usize = 16 * 1024;
/// Stop applying commands once this much output is pending, write it, then go on:
/// a client pipelining many large peeks cannot make the server buffer without bound.
const OUT_HIGH_WATER: usize = 1 << 20;
/// While blocked in reserve, read at most this much ahead (to notice a hang-up).
const WAIT_READ_LIMIT: usize = 64 * 1024;

/// The socket operations a connection needs; TCP and Unix streams both have them.
pub trait Socket: AsyncWrite + Unpin + Send + 'static {
    fn readable(&self) -> impl std::future::Future<Output = io::Result<()>> + Send;
    fn try_read_buf(&self, buf: &mut BytesMut) -> io::Result<usize>;
}

impl Socket for tokio::net::TcpStream {
    fn readable(&self) -> impl std::future::Future<Output = io::Result<()>> + Send {
        tokio::net::TcpStream::readable(self)
    }
    fn try_read_buf(&self, buf: &mut BytesMut) -> io::Result<usize> {
        tokio::net::TcpStream::try_read_buf(self, buf)
    }
}

impl Socket for tokio::net::UnixStream {
    fn readable(&self) -> impl std::future::Future<Output = io::Result<()>> + Send {
        tokio::net::UnixStream::readable(self)
    }
    fn try_read_buf(&self, buf: &mut BytesMut) -> io::Result<usize> {
        tokio::net::UnixStream::try_read_buf(self, buf)
    }
}

/// What the reader expects next.
#[derive(Debug, Clone, Copy)]
enum Framing {
    Command,
    /// An over-long line is being thrown away up to its CRLF.
    SkipLine,
    /// A put's body (and CRLF): `need` bytes.
    Body {
        id: u64,
        pri: u32,
        delay: u32,
        ttr: u32,
        need: usize,
    },
    /// An oversized body is being thrown away; JOB_TOO_BIG follows.
    Discard {
        left: u64,
    },
}

/// Why applying stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    /// Need more input (or the output is full; write it first).
    More,
    /// Blocked in reserve.
    Wait,
    Quit,
}

struct Conn {
    id: ConnId,
    input: BytesMut,
    out: Vec<u8>,
    framing: Framing,
    max_job_size: u32,
    waiting: bool,
    eof: bool,
}

/// Serve one client until it quits, hangs up, or the server stops.
pub async fn serve<S: Socket>(mut sock: S, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let waker = Arc::new(ConnWaker::default());
    let (id, max_job_size) = {
        let mut store = shared.lock();
        (store.connect(waker.clone()), store.max_job_size())
    };
    if shared.verbose > 0 {
        eprintln!("beanpole: connection {id} opened");
    }
    let mut conn = Conn {
        id,
        input: BytesMut::new(),
        out: Vec::new(),
        framing: Framing::Command,
        max_job_size,
        waiting: false,
        eof: false,
    };
    let result = conn.run(&mut sock, &shared, &waker, &mut stop).await;
    if let Err(e) = result {
        if shared.verbose > 0 {
            eprintln!("beanpole: connection {id}: {e}");
        }
    }
    let settled = {
        let mut store = shared.lock();
        store.disconnect(id, shared.now());
        shared.settle(&mut store)
    };
    shared.finish(settled);
    if shared.verbose > 0 {
        eprintln!("beanpole: connection {id} closed");
    }
}

impl Conn {
    async fn run<S: Socket>(
        &mut self,
        sock: &mut S,
        shared: &Shared,
        waker: &ConnWaker,
        stop: &mut watch::Receiver<bool>,
    ) -> io::Result<()> {
        loop {
            let flow = if self.waiting {
                Flow::Wait
            } else {
                self.apply(shared)
            };
            if !self.out.is_empty() {
                sock.write_all(&self.out).await?;
                self.out.clear();
                if self.out.capacity() > OUT_HIGH_WATER {
                    self.out = Vec::new();
                }
            }
            match flow {
                Flow::Quit => return Ok(()),
                Flow::Wait => {
                    if self.eof {
                        self.abandon_wait(shared);
                        continue;
                    }
                    tokio::select! {
                        _ = waker.0.notified() => self.collect_delivery(shared),
                        r = sock.readable(), if self.input.len() < WAIT_READ_LIMIT => {
                            r?;
                            self.read(sock)?;
                        }
                        _ = stop.changed() => return Ok(()),
                    }
                }
                Flow::More => {
                    if self.eof {
                        return Ok(());
                    }
                    if self.out.is_empty() && self.pending_input_is_complete_command() {
                        continue;
                    }
                    if self.input.is_empty() && self.input.capacity() > 0 {
                        // Idle connections hold no buffer.
                        self.input = BytesMut::new();
                    }
                    tokio::select! {
                        r = sock.readable() => {
                            r?;
                            self.read(sock)?;
                        }
                        _ = stop.changed() => return Ok(()),
                    }
                }
            }
        }
    }

    /// After an output-limited batch, there may be complete commands left to apply
    /// without reading more.
    fn pending_input_is_complete_command(&self) -> bool {
        match self.framing {
            Framing::Command | Framing::SkipLine => {
                line_end(&self.input).is_some() || self.input.len() >= MAX_LINE
            }
            Framing::Body { need, .. } => self.input.len() >= need,
            Framing::Discard { .. } => !self.input.is_empty(),
        }
    }

    /// Read what is available; a zero-length read means the client closed its side.
    fn read<S: Socket>(&mut self, sock: &S) -> io::Result<()> {
        let want = match self.framing {
            Framing::Body { need, .. } if need > self.input.len() => need - self.input.len(),
            _ => READ_CHUNK,
        };
        self.input
            .reserve(want.clamp(1024, READ_CHUNK.max(want.min(1 << 26))));
        match sock.try_read_buf(&mut self.input) {
            Ok(0) => {
                self.eof = true;
                Ok(())
            }
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                self.eof = true;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn collect_delivery(&mut self, shared: &Shared) {
        let delivery = shared.lock().take_delivery(self.id);
        if let Some(d) = delivery {
            self.waiting = false;
            encode_delivery(&mut self.out, &d);
        }
    }

    fn abandon_wait(&mut self, shared: &Shared) {
        let (delivery, settled) = {
            let mut store = shared.lock();
            let d = store.abandon_wait(self.id);
            (d, shared.settle(&mut store))
        };
        shared.finish(settled);
        self.waiting = false;
        if let Some(d) = delivery {
            encode_delivery(&mut self.out, &d);
        }
    }

    /// Apply every complete command in the input under one lock.
    fn apply(&mut self, shared: &Shared) -> Flow {
        let mut guard = None;
        let flow = loop {
            if self.out.len() >= OUT_HIGH_WATER {
                break Flow::More;
            }
            match self.framing {
                Framing::Command | Framing::SkipLine => {
                    let Some(end) = line_end(&self.input) else {
                        if self.input.len() >= MAX_LINE {
                            self.input.advance(MAX_LINE);
                            self.framing = Framing::SkipLine;
                            continue;
                        }
                        break Flow::More;
                    };
                    let line = self.input.split_to(end + 2);
                    if let Framing::SkipLine = self.framing {
                        self.framing = Framing::Command;
                        self.out.extend_from_slice(proto::BAD_FORMAT);
                        continue;
                    }
                    let store = guard.get_or_insert_with(|| shared.lock());
                    // Read the clock per command, as beanstalkd does: a stats-job right
                    // after a reserve already shows less than the full TTR left.
                    let flow = self.command(&line[..end], store, shared, shared.now());
                    if flow != Flow::More {
                        break flow;
                    }
                }
                Framing::Body {
                    id,
                    pri,
                    delay,
                    ttr,
                    need,
                } => {
                    if self.input.len() < need {
                        break Flow::More;
                    }
                    self.framing = Framing::Command;
                    if &self.input[need - 2..need] != b"\r\n" {
                        self.input.advance(need);
                        self.out.extend_from_slice(proto::EXPECTED_CRLF);
                        continue;
                    }
                    let body = Bytes::copy_from_slice(&self.input[..need]);
                    self.input.advance(need);
                    let store = guard.get_or_insert_with(|| shared.lock());
                    match store.put(self.id, id, pri, delay, ttr, body, shared.now()) {
                        Ok(id) => {
                            let _ = write!(self.out, "INSERTED {id}\r\n");
                        }
                        Err(_) => self.out.extend_from_slice(proto::DRAINING),
                    }
                }
                Framing::Discard { left } => {
                    let n = (left as usize).min(self.input.len());
                    self.input.advance(n);
                    let left = left - n as u64;
                    if left > 0 {
                        self.framing = Framing::Discard { left };
                        break Flow::More;
                    }
                    self.framing = Framing::Command;
                    self.out.extend_from_slice(proto::JOB_TOO_BIG);
                }
            }
        };
        if let Some(mut store) = guard {
            let settled = shared.settle(&mut store);
            drop(store);
            shared.finish(settled);
        }
        flow
    }

    /// Apply one command line; the reply goes to `self.out`.
    fn command(&mut self, line: &[u8], store: &mut Store, shared: &Shared, now: u64) -> Flow {
        let out = &mut self.out;
        let cmd = match parse(line, self.max_job_size) {
            Ok(cmd) => cmd,
            Err(e) => {
                match e {
                    ProtocolError::BadFormatCounted(op) => store.count(op),
                    ProtocolError::JobTooBig { discard } => {
                        store.count(Op::Put);
                        self.framing = Framing::Discard { left: discard };
                        return Flow::More;
                    }
                    _ => {}
                }
                out.extend_from_slice(e.reply());
                return Flow::More;
            }
        };
        store.count(cmd.op());
        let conn = self.id;
        match cmd {
            Command::Put {
                pri,
                delay,
                ttr,
                bytes,
            } => {
                let id = store.begin_put(conn);
                self.framing = Framing::Body {
                    id,
                    pri,
                    delay,
                    ttr,
                    need: bytes as usize + 2,
                };
            }
            Command::Reserve | Command::ReserveWithTimeout(_) => {
                let timeout = match cmd {
                    Command::ReserveWithTimeout(t) => Some(t),
                    _ => None,
                };
                match store.reserve(conn, timeout, now) {
                    ReserveOutcome::Now(d) => encode_delivery(out, &d),
                    ReserveOutcome::Waiting => {
                        self.waiting = true;
                        return Flow::Wait;
                    }
                }
            }
            Command::ReserveJob(id) => match store.reserve_job(conn, id, now) {
                Some((id, body)) => encode_job(out, "RESERVED", id, &body),
                None => out.extend_from_slice(proto::NOT_FOUND),
            },
            Command::Delete(id) => reply(out, store.delete(conn, id), proto::DELETED),
            Command::Release { id, pri, delay } => reply(
                out,
                store.release(conn, id, pri, delay, now),
                proto::RELEASED,
            ),
            Command::Bury { id, pri } => reply(out, store.bury(conn, id, pri), proto::BURIED),
            Command::Touch(id) => reply(out, store.touch(conn, id, now), proto::TOUCHED),
            Command::Use(name) => {
                store.use_tube(conn, name);
                using(out, name);
            }
            Command::Watch(name) => {
                let n = store.watch(conn, name);
                let _ = write!(out, "WATCHING {n}\r\n");
            }
            Command::Ignore(name) => match store.ignore(conn, name) {
                Ok(n) => {
                    let _ = write!(out, "WATCHING {n}\r\n");
                }
                Err(_) => out.extend_from_slice(proto::NOT_IGNORED),
            },
            Command::Peek(id) => found(out, store.peek(id)),
            Command::PeekReady => found(out, store.peek_ready(conn)),
            Command::PeekDelayed => found(out, store.peek_delayed(conn)),
            Command::PeekBuried => found(out, store.peek_buried(conn)),
            Command::Kick(bound) => {
                let n = store.kick(conn, bound, now);
                let _ = write!(out, "KICKED {n}\r\n");
            }
            Command::KickJob(id) => reply(out, store.kick_job(id, now), proto::KICKED),
            Command::StatsJob(id) => match store.stats_job(id, now) {
                Some(s) => stats::write_yaml(out, &stats::job_pairs(&s)),
                None => out.extend_from_slice(proto::NOT_FOUND),
            },
            Command::StatsTube(name) => match store.stats_tube(name, now) {
                Some(s) => stats::write_yaml(out, &stats::tube_pairs(&s)),
                None => out.extend_from_slice(proto::NOT_FOUND),
            },
            Command::Stats => stats::write_yaml(out, &shared.stats_pairs(store)),
            Command::ListTubes => stats::write_list(out, &store.list_tubes()),
            Command::ListTubeUsed => using(out, store.tube_used(conn)),
            Command::ListTubesWatched => stats::write_list(out, &store.list_tubes_watched(conn)),
            Command::PauseTube { name, delay } => {
                reply(out, store.pause_tube(name, delay, now), proto::PAUSED)
            }
            Command::Quit => return Flow::Quit,
        }
        Flow::More
    }
}

/// Where the command line at the start of `input` ends (the index of its CR), as
/// beanstalkd finds it: only the first CR within the first [`MAX_LINE`] buffered
/// bytes counts, and only if an LF follows it. A line with a lone CR therefore has
/// no end until [`MAX_LINE`] bytes have arrived and are thrown away as over-long.
fn line_end(input: &[u8]) -> Option<usize> {
    let window = &input[..input.len().min(MAX_LINE)];
    let searchable = window.len().checked_sub(1)?;
    let cr = memchr::memchr(b'\r', &window[..searchable])?;
    (window[cr + 1] == b'\n').then_some(cr)
}

fn reply(out: &mut Vec<u8>, ok: bool, word: &[u8]) {
    out.extend_from_slice(if ok { word } else { proto::NOT_FOUND });
}

fn using(out: &mut Vec<u8>, name: &[u8]) {
    out.extend_from_slice(b"USING ");
    out.extend_from_slice(name);
    out.extend_from_slice(b"\r\n");
}

fn found(out: &mut Vec<u8>, job: Option<(u64, Bytes)>) {
    match job {
        Some((id, body)) => encode_job(out, "FOUND", id, &body),
        None => out.extend_from_slice(proto::NOT_FOUND),
    }
}

/// `<word> <id> <bytes>\r\n<body>\r\n`; `body` already ends with CRLF.
fn encode_job(out: &mut Vec<u8>, word: &str, id: u64, body: &[u8]) {
    let _ = write!(out, "{word} {id} {}\r\n", body.len().saturating_sub(2));
    out.extend_from_slice(body);
}

fn encode_delivery(out: &mut Vec<u8>, d: &Delivery) {
    match d {
        Delivery::Reserved { id, body } => encode_job(out, "RESERVED", *id, body),
        Delivery::DeadlineSoon => out.extend_from_slice(proto::DEADLINE_SOON),
        Delivery::TimedOut => out.extend_from_slice(proto::TIMED_OUT),
    }
}
