//! One task per connection: read, apply every complete command under one lock,
//! answer with one write.
//!
//! Reading follows beanstalkd's framing exactly: a command line must end within
//! [`MAX_LINE`] bytes (CRLF included) or the bytes are thrown away up to the next
//! CRLF and answered BAD_FORMAT; a put's body is the announced number of bytes plus
//! CRLF; an oversized body is read and discarded before JOB_TOO_BIG. A connection
//! blocked in reserve processes nothing more until it is answered, but keeps reading
//! (up to a bound, and past it watches the socket without reading) so it notices
//! when the client hangs up.

use std::io;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use tokio::sync::watch;

use super::carry::{Carry, Unread, WINDOW};
use super::caught::Caught;
pub use super::input::Socket;
use super::input::{self, Target, Woken, READ_CHUNK};
use super::out::Out;
use super::signal::ConnSignal;
use super::{spare, Shared};
use crate::events::level;
use crate::protocol::{self as proto, line_end, parse, Command, Op, ProtocolError, MAX_LINE};
use crate::stats;
use crate::store::session::Replay;
use crate::store::{ConnId, Delivery, PutRefused, ReserveOutcome, Store};
use crate::wal::pipe::Acked;
use crate::wal::session::Kept;

/// Stop applying commands once this much output is pending, write it, then go on:
/// a client pipelining many large peeks cannot make the server buffer without bound.
const OUT_HIGH_WATER: usize = 1 << 20;
/// While blocked in reserve, read at most this much ahead (to notice a hang-up).
const WAIT_READ_LIMIT: usize = 64 * 1024;
/// A put body at least this long (CRLF included) is read straight into a buffer of
/// its exact size, which becomes the job's body without a copy.
const DIRECT_BODY_MIN: usize = 4096;
/// Puts applied back to back in one pass share one reading of the clock, taken
/// afresh after this many: a put's time only sets its age and when its delay ends,
/// where the microseconds a pass lasts never show, and reading the clock was about
/// a tenth of what a put cost the server. Every other command reads the clock
/// itself, as beanstalkd does (a `stats-job` right after a `reserve` must already
/// show less than the whole TTR left).
const PUTS_PER_CLOCK: u32 = 256;

/// The command line that panics, with the `fault-injection` feature.
#[cfg(feature = "fault-injection")]
pub const FAULT_PANIC: &[u8] = b"fault-injection-panic";

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
    /// A large put body being read in place (see [`DIRECT_BODY_MIN`]); empty and
    /// unallocated otherwise.
    body: BytesMut,
    out: Out,
    framing: Framing,
    max_job_size: u32,
    waiting: bool,
    eof: bool,
    /// The client has shut down its sending side (its input may still be queued).
    /// From then on every reply is written before the next command is applied, as
    /// beanstalkd does: a client that closed its socket makes that write fail, and
    /// the commands it left behind are never applied.
    closing: bool,
    /// A wait for the hang-up forgot the socket's readiness while input was queued:
    /// read without asking the readiness until the queue is found empty.
    unready: bool,
    /// The next read asks for [`READ_CHUNK`] shifted left by this much: one more
    /// each time a read fills what it asked for, back to none after a short one
    /// (at most [`input::READ_MAX`]).
    read_shift: u8,
    /// Log position this batch's replies wait for.
    log_wait: Option<u64>,
    /// The log's acknowledged position (None without a log).
    log_acked: Option<watch::Receiver<u64>>,
    /// Set when a cluster follower forwards this connection as a session, or
    /// when it is a cluster leader's own client (`carry.rs`).
    session: Option<Box<SessionConn>>,
    /// The server stopped under the connection (its log pipe closed, or it
    /// stops): a leader's own client is then carried to the next leader.
    cut: bool,
}

/// A forwarded session's bookkeeping on the leader (see `store/session.rs`).
#[derive(Debug)]
pub struct SessionConn {
    /// Commands answered so far, replayed ones included.
    answered: u64,
    /// Commands up to this number are answered from their first run.
    replay_to: u64,
    /// Where the current command's reply starts in the output.
    mark: usize,
    /// The client quit (as opposed to the follower's link breaking).
    quit: bool,
    /// A resent put's recorded reply, sent once its body has been read.
    put_reply: Option<Vec<u8>>,
    /// For a leader's own client: what moves with it if the server stops.
    carry: Option<Box<Carry>>,
}

impl SessionConn {
    /// A session attached with `acked` commands answered, whose recorded replies
    /// go up to `replay_to`.
    pub fn new(acked: u64, replay_to: u64) -> SessionConn {
        SessionConn {
            answered: acked,
            replay_to,
            mark: 0,
            quit: false,
            put_reply: None,
            carry: None,
        }
    }

    /// A cluster leader's own new client, as session `owner`.
    fn own(owner: u64, max_job_size: u32) -> SessionConn {
        SessionConn {
            carry: Some(Box::new(Carry::new(owner, max_job_size))),
            ..SessionConn::new(0, 0)
        }
    }
}

/// The read shift after a read of `got` bytes (see `Conn::read_shift`).
fn next_read_shift(shift: u8, got: usize, filled: bool) -> u8 {
    let want = READ_CHUNK << shift;
    if got > 0 && (got >= want || filled) {
        if (want << 1) <= input::READ_MAX {
            return shift + 1;
        }
        shift
    } else if got < READ_CHUNK / 2 {
        0
    } else {
        shift
    }
}

/// Serve one client until it quits, hangs up, or the server stops.
pub async fn serve<S: Socket>(sock: S, shared: &Shared) {
    let signal = Arc::new(ConnSignal::default());
    // A cluster leader's client is a session from the start.
    let owner = shared.carrier.as_ref().map(|c| c.0.new_owner());
    let (id, session) = {
        let mut store = shared.lock();
        let own = owner.and_then(|owner| {
            let default: &[u8] = b"default";
            let (id, _) = store
                .attach_session(signal.clone(), owner, 0, default, &[default])
                .ok()?;
            let session = SessionConn::own(owner, store.max_job_size());
            Some((id, Some((Box::new(session), Vec::new()))))
        });
        let (id, session) = own.unwrap_or_else(|| (store.connect(signal.clone()), None));
        if shared.stopping() {
            // The stop went out before this connection was registered: see it at
            // the first wait.
            crate::store::Wakeup::wake(&*signal);
        }
        (id, session)
    };
    serve_as(sock, shared, signal, id, session).await;
}

/// A session to serve, and the bytes to send before its first reply.
pub type SessionStart = (Box<SessionConn>, Vec<u8>);

/// Serve a connection already registered in the store as `id` (with `signal`
/// as its wakeup); `session` for one a cluster follower forwards.
pub async fn serve_as<S: Socket>(
    mut sock: S,
    shared: &Shared,
    signal: Arc<ConnSignal>,
    id: ConnId,
    session: Option<SessionStart>,
) {
    let (session, greeting) = match session {
        Some((s, g)) => (Some(s), g),
        None => (None, Vec::new()),
    };
    let max_job_size = shared.lock().max_job_size();
    shared
        .events
        .log(level::INFO, || format!("connection {id} opened"));
    let mut conn = Conn {
        id,
        input: BytesMut::new(),
        body: BytesMut::new(),
        out: Out::default(),
        framing: Framing::Command,
        max_job_size,
        waiting: false,
        eof: false,
        closing: false,
        unready: false,
        read_shift: 0,
        log_wait: None,
        log_acked: shared.log_pipe.as_ref().map(|p| p.subscribe()),
        session,
        cut: false,
    };
    conn.out.extend(&greeting);
    // A panic in the connection's work ends this connection only: it is logged and
    // the connection is closed as any other (its reserved jobs go back at once).
    let ended = Caught::new(conn.run(&mut sock, shared, &signal)).await;
    // A leader's own client whose server stopped under it goes on elsewhere.
    let carried = match (&ended, conn.cut) {
        (Ok(Ok(())), true) => conn.carried(shared),
        _ => None,
    };
    let carried = match carried {
        Some((taken, carrier)) => sock
            .into_tcp()
            .map(|stream| (taken.into_session(stream), carrier)),
        None => {
            match ended {
                // Say goodbye where the transport has a way to (TLS's close_notify).
                Ok(Ok(())) => {
                    spare::give(&mut conn.input);
                    std::future::poll_fn(|cx| sock.poll_goodbye(cx)).await;
                }
                Ok(Err(e)) => {
                    spare::give(&mut conn.input);
                    shared
                        .events
                        .log(level::INFO, || format!("connection {id}: {e}"));
                }
                Err(why) => shared
                    .events
                    .log(level::ERROR, || format!("connection {id} panicked: {why}")),
            }
            None
        }
    };
    let settled = {
        let mut store = shared.lock();
        let keep = match &conn.session {
            // A leader's own client whose server stopped under it: carried to
            // the next leader.
            Some(s) if s.carry.is_some() => carried.is_some(),
            // The follower's link broke, or the server stops: the session waits
            // for the follower to attach it again.
            Some(s) => !s.quit,
            None => false,
        };
        if keep {
            store.detach_session(id, shared.now());
        } else {
            store.disconnect(id, shared.now());
        }
        shared.settle(&mut store)
    };
    // Records of commands whose replies were never sent, and of the disconnect.
    let position = shared.finish(settled).max(conn.log_wait);
    shared.write_log(position);
    if let Some((session, carrier)) = carried {
        carrier.0.carry(session);
    }
    shared
        .events
        .log(level::INFO, || format!("connection {id} closed"));
}

impl Conn {
    async fn run<S: Socket>(
        &mut self,
        sock: &mut S,
        shared: &Shared,
        signal: &ConnSignal,
    ) -> io::Result<()> {
        loop {
            let flow = if self.waiting {
                Flow::Wait
            } else {
                self.apply(shared)
            };
            if !self.out.is_empty() {
                // With a log, a reply goes out only once the records it depends
                // on are written (and, with -f 0, synced).
                if let (Some(position), Some(acked), Some(pipe)) = (
                    self.log_wait.take(),
                    self.log_acked.as_mut(),
                    shared.log_pipe.as_ref(),
                ) {
                    if pipe.acked() < position && !pipe.is_replicated() {
                        // Let the other connections with input ready queue their
                        // records first: then one write covers them all. (A
                        // replicated pipe has queued them at the pass's end
                        // already, and its commit is for the cluster to make.)
                        tokio::task::yield_now().await;
                    }
                    // The wait's future is boxed: it is only needed when the write
                    // is someone else's or an fsync is awaited, and inline it would
                    // make every connection's task larger.
                    if !pipe.write_through(position) {
                        match Box::pin(pipe.wait_acked(acked, position)).await {
                            Acked::Yes => {}
                            Acked::Closed => {
                                self.cut = true;
                                return Ok(());
                            }
                            Acked::TimedOut => {
                                // A replicated pipe's commit did not come in
                                // time (no majority): the pass's outcome is
                                // unknown; say so and close, as after a server
                                // error.
                                self.out.clear();
                                self.out.extend(b"INTERNAL_ERROR\r\n");
                                self.out.write_to(sock, OUT_HIGH_WATER).await?;
                                return Ok(());
                            }
                        }
                    }
                }
                self.out.write_to(sock, OUT_HIGH_WATER).await?;
            }
            match flow {
                Flow::Quit => return Ok(()),
                Flow::Wait => {
                    if self.eof {
                        self.abandon_wait(shared);
                        continue;
                    }
                    // Keep reading (up to a bound) to notice a hang-up; beyond the
                    // bound, watch for the hang-up without reading.
                    let want = WAIT_READ_LIMIT.saturating_sub(self.input.len());
                    let woken = if want > 0 {
                        let target = Target::Input {
                            buf: &mut self.input,
                            want,
                        };
                        read(sock, signal, target, &mut self.unready).await?
                    } else {
                        self.unready = true;
                        input::wait(sock, signal, Target::HangUp).await?
                    };
                    match woken {
                        Woken::Signal if shared.stopping() => {
                            self.cut = true;
                            return Ok(());
                        }
                        Woken::Signal => self.collect_delivery(shared),
                        Woken::Read { eof } => {
                            self.eof |= eof;
                            self.closing |= eof;
                        }
                        // The input before the hang-up is read and applied afterwards.
                        Woken::HangUp => {
                            self.closing = true;
                            self.abandon_wait(shared);
                        }
                    }
                }
                Flow::More => {
                    let pending = self.pending_input_is_complete_command();
                    if self.eof {
                        if pending {
                            continue;
                        }
                        return Ok(());
                    }
                    if self.out.is_empty() && pending {
                        continue;
                    }
                    // With no input pending the wait holds no buffer (see input::wait).
                    let mut unready = std::mem::take(&mut self.unready);
                    let before = self.input.len();
                    let woken = read(sock, signal, self.read_target(), &mut unready).await?;
                    self.unready = unready;
                    let got = self.input.len().saturating_sub(before);
                    let filled = self.input.capacity() == self.input.len();
                    self.adapt_reads(got, filled);
                    match woken {
                        Woken::Signal if shared.stopping() => {
                            self.cut = true;
                            return Ok(());
                        }
                        // A wakeup left from an earlier reserve: nothing to do.
                        Woken::Signal | Woken::HangUp => {}
                        Woken::Read { eof } => {
                            self.eof |= eof;
                            self.closing |= eof;
                        }
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
            Framing::Body { need, .. } => self.body_len() >= need,
            Framing::Discard { .. } => !self.input.is_empty(),
        }
    }

    /// Bytes of the pending put body received so far.
    fn body_len(&self) -> usize {
        if self.body.capacity() > 0 {
            self.body.len()
        } else {
            self.input.len()
        }
    }

    /// After a read of `got` input bytes: ask for more next time if it took all it
    /// asked for or all the room there was (more is probably queued), for the usual
    /// amount after a short one.
    fn adapt_reads(&mut self, got: usize, filled: bool) {
        self.read_shift = next_read_shift(self.read_shift, got, filled);
    }

    /// Where the next read goes. A large body gets its own buffer of exactly its
    /// size, so the read cannot run past it.
    fn read_target(&mut self) -> Target<'_> {
        match self.framing {
            Framing::Body { need, .. } if need >= DIRECT_BODY_MIN => {
                if self.body.capacity() == 0 {
                    self.body = BytesMut::with_capacity(need);
                    self.body.extend_from_slice(&self.input);
                    self.input.clear();
                }
                Target::Own(&mut self.body)
            }
            _ => Target::Input {
                buf: &mut self.input,
                want: READ_CHUNK << self.read_shift,
            },
        }
    }

    fn collect_delivery(&mut self, shared: &Shared) {
        let (delivery, position) = {
            let mut store = shared.lock();
            (store.take_delivery(self.id), store.log_position())
        };
        if let Some(d) = delivery {
            // The reservation was journaled by whoever handed it over; wait for it.
            self.log_wait = self.log_wait.max(position);
            self.waiting = false;
            self.begin_reply();
            encode_delivery(&mut self.out, &d);
            if self.session.is_some() {
                self.note_reply(&mut shared.lock(), false);
            }
        }
    }

    fn abandon_wait(&mut self, shared: &Shared) {
        let (delivery, settled) = {
            let mut store = shared.lock();
            let d = store.abandon_wait(self.id);
            (d, shared.settle(&mut store))
        };
        self.log_wait = self.log_wait.max(shared.finish(settled));
        self.waiting = false;
        if let Some(d) = delivery {
            self.begin_reply();
            encode_delivery(&mut self.out, &d);
            if self.session.is_some() {
                self.note_reply(&mut shared.lock(), false);
            }
        }
    }

    /// A session's next reply starts here.
    fn begin_reply(&mut self) {
        let at = self.out.len();
        if let Some(s) = self.session.as_mut() {
            s.mark = at;
        }
    }

    /// If the output grew since [`Conn::begin_reply`], that is the reply of the
    /// session's next command: count it, and note it for the record (a
    /// reservation by its first line: the job holds its body). `in_pass`
    /// unless it answers a waiting reserve between passes.
    fn note_reply(&mut self, store: &mut Store, in_pass: bool) {
        let Some(s) = self.session.as_mut() else {
            return;
        };
        if self.out.len() <= s.mark {
            return;
        }
        let reply = match self.out.text_tail(s.mark) {
            Some(text) => Kept::new(&text[..recorded_len(text)]),
            None => {
                let mut reply = self.out.tail(s.mark);
                reply.truncate(recorded_len(&reply));
                Kept::new(reply)
            }
        };
        s.answered += 1;
        s.mark = self.out.len();
        if let Some(c) = s.carry.as_mut() {
            let unread = Unread {
                body: &self.body,
                input: &self.input,
            };
            c.answered(&unread, s.answered, in_pass);
        }
        store.note_reply(self.id, reply);
    }

    /// For a leader's own client, before the next command of a pass: whether
    /// the pass must stop here (it has answered as many commands as can be
    /// carried unanswered), and keep the tubes if the command may change them.
    fn carry_before_command(&mut self, store: &Store) -> bool {
        let Some(s) = self.session.as_mut() else {
            return false;
        };
        let Some(c) = s.carry.as_mut() else {
            return false;
        };
        if !self.out.is_empty() && c.unacked(s.answered) >= WINDOW {
            return true;
        }
        if matches!(self.framing, Framing::Command) && c.keeps_tubes(&self.input) {
            let watched = store.list_tubes_watched(self.id);
            c.keep_tubes(
                store.tube_used(self.id).to_vec(),
                watched.into_iter().map(<[u8]>::to_vec).collect(),
            );
        }
        false
    }

    /// A leader's own client whose server stopped under it: what moves with
    /// it, and where to. None if it is not one, or its bytes were not kept.
    fn carried(&mut self, shared: &Shared) -> Option<(super::carry::Taken, super::Carrier)> {
        let carrier = shared.carrier.clone()?;
        let s = self.session.as_mut()?;
        let c = s.carry.as_mut()?;
        let unread = Unread {
            body: &self.body,
            input: &self.input,
        };
        let mut taken = c.take(&unread, s.answered, self.out.is_empty())?;
        taken.eof = self.eof;
        if taken.tubes.is_none() {
            let store = shared.lock();
            let watched = store.list_tubes_watched(self.id);
            taken.tubes = Some((
                store.tube_used(self.id).to_vec(),
                watched.into_iter().map(<[u8]>::to_vec).collect(),
            ));
        }
        Some((taken, carrier))
    }

    /// Apply every complete command in the input under one lock.
    ///
    /// For a forwarded session, each command's reply is noted as it is made,
    /// and the replies are journaled with the pass's records if the pass changed
    /// anything (in the same entry, so a change never commits without the reply
    /// that answers its command again).
    fn apply(&mut self, shared: &Shared) -> Flow {
        let mut guard = None;
        let mut pass_start = None;
        if self.session.is_some() {
            pass_start = guard.insert(shared.lock()).log_position();
            self.begin_reply();
            if let Some(s) = self.session.as_mut() {
                if let Some(c) = s.carry.as_mut() {
                    let unread = Unread {
                        body: &self.body,
                        input: &self.input,
                    };
                    c.pass_begins(&unread, s.answered, self.out.is_empty());
                }
            }
        }
        // The clock of back-to-back puts (see `PUTS_PER_CLOCK`): the time read and
        // how many puts have used it. Any other command forgets it.
        let mut put_clock: Option<(u64, u32)> = None;
        let flow = loop {
            if self.session.is_some() {
                let store = guard.get_or_insert_with(|| shared.lock());
                self.note_reply(store, true);
                if self.carry_before_command(store) {
                    break Flow::More;
                }
            }
            if self.out.len() >= OUT_HIGH_WATER || (self.closing && !self.out.is_empty()) {
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
                    if let Framing::SkipLine = self.framing {
                        self.input.advance(end + 2);
                        self.framing = Framing::Command;
                        self.out.extend(proto::BAD_FORMAT);
                        continue;
                    }
                    let store = guard.get_or_insert_with(|| shared.lock());
                    if !self.input[..end].starts_with(b"put ") {
                        put_clock = None;
                    }
                    // The line is parsed in place; the input is lent out meanwhile.
                    let input = std::mem::take(&mut self.input);
                    let flow = self.command(&input[..end], store, shared);
                    self.input = input;
                    self.input.advance(end + 2);
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
                    if self.body_len() < need {
                        break Flow::More;
                    }
                    self.framing = Framing::Command;
                    if let Some(reply) = self.session.as_mut().and_then(|s| s.put_reply.take()) {
                        // A resent put, answered from its first run.
                        if self.body.capacity() > 0 {
                            self.body = BytesMut::new();
                        } else {
                            self.input.advance(need);
                        }
                        self.out.extend(&reply);
                        continue;
                    }
                    // A large body read in place is kept as it is; a small one is
                    // copied by the store from the input, where it stays until then.
                    let direct =
                        (self.body.capacity() > 0).then(|| std::mem::take(&mut self.body).freeze());
                    let crlf = match &direct {
                        Some(body) => &body[need - 2..] == b"\r\n",
                        None => &self.input[need - 2..need] == b"\r\n",
                    };
                    if !crlf {
                        if direct.is_none() {
                            self.input.advance(need);
                        }
                        self.out.extend(proto::EXPECTED_CRLF);
                        continue;
                    }
                    let store = guard.get_or_insert_with(|| shared.lock());
                    let now = match put_clock {
                        Some((now, used)) if used < PUTS_PER_CLOCK => {
                            put_clock = Some((now, used + 1));
                            now
                        }
                        _ => {
                            let now = shared.now();
                            put_clock = Some((now, 1));
                            now
                        }
                    };
                    let put = match direct {
                        Some(body) => store.put(self.id, id, pri, delay, ttr, body, now),
                        None => {
                            let body = &self.input[..need];
                            let put = store.put(self.id, id, pri, delay, ttr, body, now);
                            self.input.advance(need);
                            put
                        }
                    };
                    match put {
                        Ok(id) => {
                            self.out.extend(b"INSERTED ");
                            self.out.num(id);
                            self.out.extend(b"\r\n");
                        }
                        Err(PutRefused::Draining) => self.out.extend(proto::DRAINING),
                        Err(PutRefused::NoSpace) => self.out.extend(proto::OUT_OF_MEMORY),
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
                    self.out.extend(proto::JOB_TOO_BIG);
                }
            }
        };
        if self.session.is_some() {
            let store = guard.get_or_insert_with(|| shared.lock());
            self.note_reply(store, true);
            if store.log_position() != pass_start {
                store.record_replies(self.id);
            }
            if let Some(s) = self.session.as_mut() {
                s.quit |= flow == Flow::Quit;
                if let Some(c) = s.carry.as_mut() {
                    c.pass_ends(&Unread {
                        body: &self.body,
                        input: &self.input,
                    });
                }
            }
        }
        if let Some(mut store) = guard {
            let settled = shared.settle(&mut store);
            drop(store);
            self.log_wait = self.log_wait.max(shared.finish(settled));
        }
        flow
    }

    /// Apply one command line; the reply goes to `self.out`.
    fn command(&mut self, line: &[u8], store: &mut Store, shared: &Shared) -> Flow {
        // Only in builds with the `fault-injection` feature (the engine's own tests):
        // a line that makes this connection's task panic with the store locked.
        #[cfg(feature = "fault-injection")]
        if line == FAULT_PANIC {
            panic!("fault injection: a connection task panics with the store locked");
        }
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
                out.extend(e.reply());
                return Flow::More;
            }
        };
        store.count(cmd.op());
        let conn = self.id;
        if let Some(s) = self.session.as_mut() {
            let n = s.answered + 1;
            let reserve = matches!(cmd, Command::Reserve | Command::ReserveWithTimeout(_));
            // A resent use, watch or ignore runs again: it changes nothing but
            // the session's tubes, which the attach set as they were before it,
            // and its reply follows from them.
            let tubes = matches!(
                cmd,
                Command::Use(_) | Command::Watch(_) | Command::Ignore(_)
            );
            if (n <= s.replay_to || reserve) && !tubes {
                match store.replay(conn, n) {
                    Some(Replay::Reply(bytes)) => {
                        if let Command::Put { body, .. } = cmd {
                            s.put_reply = Some(bytes);
                            self.framing = Framing::Body {
                                id: 0,
                                pri: 0,
                                delay: 0,
                                ttr: 0,
                                need: body as usize + 2,
                            };
                        } else {
                            out.extend(&bytes);
                        }
                        return Flow::More;
                    }
                    Some(Replay::Reserved { id, body }) => {
                        encode_job(out, b"RESERVED ", id, &body);
                        return Flow::More;
                    }
                    None => {}
                }
            }
        }
        if let Command::Put {
            pri,
            delay,
            ttr,
            body: bytes,
        } = cmd
        {
            // The line only announces the body; the put happens, and reads the
            // clock, when the body is in.
            let id = store.begin_put(conn);
            self.framing = Framing::Body {
                id,
                pri,
                delay,
                ttr,
                need: bytes as usize + 2,
            };
            return Flow::More;
        }
        // Read the clock per command, as beanstalkd does: a stats-job right after a
        // reserve already shows less than the full TTR left.
        let now = shared.now();
        let journaled_update = matches!(
            cmd,
            Command::Release { .. } | Command::Bury { .. } | Command::Kick(_) | Command::KickJob(_)
        );
        if journaled_update && !store.log_room_for_update() {
            // The log cannot place the change's record: refuse it, change nothing.
            out.extend(proto::OUT_OF_MEMORY);
            return Flow::More;
        }
        match cmd {
            // Handled above, before the clock is read.
            Command::Put { .. } => {}
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
                Some((id, body)) => encode_job(out, b"RESERVED ", id, &body),
                None => out.extend(proto::NOT_FOUND),
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
                counted(out, b"WATCHING ", n as u64);
            }
            Command::Ignore(name) => match store.ignore(conn, name) {
                Ok(n) => counted(out, b"WATCHING ", n as u64),
                Err(_) => out.extend(proto::NOT_IGNORED),
            },
            Command::Peek(id) => found(out, store.peek(id)),
            Command::PeekReady => found(out, store.peek_ready(conn)),
            Command::PeekDelayed => found(out, store.peek_delayed(conn)),
            Command::PeekBuried => found(out, store.peek_buried(conn)),
            Command::Kick(bound) => {
                let n = store.kick(conn, bound, now);
                counted(out, b"KICKED ", u64::from(n));
            }
            Command::KickJob(id) => reply(out, store.kick_job(id, now), proto::KICKED),
            Command::StatsJob(id) => match store.stats_job(id, now) {
                Some(s) => stats::write_yaml(&mut out.buf, &stats::job_pairs(&s)),
                None => out.extend(proto::NOT_FOUND),
            },
            Command::StatsTube(name) => match store.stats_tube(name, now) {
                Some(s) => stats::write_yaml(&mut out.buf, &stats::tube_pairs(&s)),
                None => out.extend(proto::NOT_FOUND),
            },
            Command::Stats => stats::write_yaml(&mut out.buf, &shared.stats_pairs(store)),
            Command::ListTubes => stats::write_list(&mut out.buf, &store.list_tubes()),
            Command::ListTubeUsed => using(out, store.tube_used(conn)),
            Command::ListTubesWatched => {
                stats::write_list(&mut out.buf, &store.list_tubes_watched(conn))
            }
            Command::PauseTube { name, delay } => {
                reply(out, store.pause_tube(name, delay, now), proto::PAUSED)
            }
            Command::Quit => return Flow::Quit,
        }
        Flow::More
    }
}

/// The next input (or the signal) into `target`. With `unready` set, input queued
/// while a wait for the hang-up had forgotten the socket's readiness is read first,
/// without waiting for a readiness event that will not come; `unready` stays set
/// until such a read finds nothing queued.
async fn read<S: Socket>(
    sock: &mut S,
    signal: &ConnSignal,
    mut target: Target<'_>,
    unready: &mut bool,
) -> io::Result<Woken> {
    if *unready {
        if let Some(woken) = input::read_unready(sock, reborrow(&mut target))? {
            return Ok(woken);
        }
        *unready = false;
    }
    input::wait(sock, signal, target).await
}

fn reborrow<'a>(target: &'a mut Target<'_>) -> Target<'a> {
    match target {
        Target::Input { buf, want } => Target::Input { buf, want: *want },
        Target::Own(buf) => Target::Own(buf),
        Target::HangUp => Target::HangUp,
    }
}

fn reply(out: &mut Out, ok: bool, word: &[u8]) {
    out.extend(if ok { word } else { proto::NOT_FOUND });
}

/// `<word><n>\r\n`, e.g. `WATCHING 2`.
fn counted(out: &mut Out, word: &[u8], n: u64) {
    out.extend(word);
    out.num(n);
    out.extend(b"\r\n");
}

fn using(out: &mut Out, name: &[u8]) {
    out.extend(b"USING ");
    out.extend(name);
    out.extend(b"\r\n");
}

fn found(out: &mut Out, job: Option<(u64, Bytes)>) {
    match job {
        Some((id, body)) => encode_job(out, b"FOUND ", id, &body),
        None => out.extend(proto::NOT_FOUND),
    }
}

/// `<word> <id> <bytes>\r\n<body>\r\n`; `body` already ends with CRLF.
fn encode_job(out: &mut Out, word: &[u8], id: u64, body: &Bytes) {
    out.extend(word);
    out.num(id);
    out.extend(b" ");
    out.num(body.len().saturating_sub(2) as u64);
    out.extend(b"\r\n");
    out.body(body);
}

fn encode_delivery(out: &mut Out, d: &Delivery) {
    match d {
        Delivery::Reserved { id, body } => encode_job(out, b"RESERVED ", *id, body),
        Delivery::DeadlineSoon => out.extend(proto::DEADLINE_SOON),
        Delivery::TimedOut => out.extend(proto::TIMED_OUT),
    }
}

/// How much of a session's reply is recorded: a reservation's first line
/// (the job holds its body), any other reply whole.
fn recorded_len(reply: &[u8]) -> usize {
    if reply.starts_with(b"RESERVED ") {
        if let Some(end) = memchr::memmem::find(reply, b"\r\n") {
            return end + 2;
        }
    }
    reply.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_grow_while_they_fill_and_fall_back_after_a_short_one() {
        let max_shift = (input::READ_MAX / READ_CHUNK).trailing_zeros() as u8;
        // Full reads: one step at a time, up to READ_MAX and no further.
        let mut shift = 0;
        for step in 1..=max_shift + 2 {
            shift = next_read_shift(shift, READ_CHUNK << shift, false);
            assert_eq!(shift, step.min(max_shift));
        }
        assert_eq!(READ_CHUNK << shift, input::READ_MAX);
        // A read that took all the room there was counts as full.
        assert_eq!(next_read_shift(0, 100, true), 1);
        // A middling read keeps the size; a short one (or none) goes back.
        assert_eq!(next_read_shift(2, READ_CHUNK, false), 2);
        assert_eq!(next_read_shift(2, 10, false), 0);
        assert_eq!(next_read_shift(2, 0, true), 0);
    }
}
