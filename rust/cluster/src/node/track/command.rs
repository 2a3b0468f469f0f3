//! The client's side of a session: its byte stream cut into commands exactly
//! where the engine's server cuts it (`rust/engine/src/server/conn.rs`), with
//! what a follower needs to know of each.
//!
//! The server's rules, which [`CommandFramer`] follows:
//!
//! * a command line ends where [`line_end`] says (the first CR within the first
//!   [`MAX_LINE`] bytes, if an LF follows it);
//! * with no end within [`MAX_LINE`] bytes, those bytes are thrown away, and so is
//!   everything up to the next line end: one command, answered BAD_FORMAT;
//! * a `put` line that parses is followed by its body: the announced size plus
//!   two bytes, answered EXPECTED_CRLF when those two are not CRLF;
//! * a `put` announcing more than the job size limit is followed by that many
//!   bytes plus two, read and thrown away before JOB_TOO_BIG;
//! * any other line (a `put` line that does not parse included) is the whole
//!   command;
//! * after `quit` nothing more is read.

use beanpole_engine::protocol::{line_end, parse, Command, Op, ProtocolError, MAX_LINE};
use bytes::{Buf, Bytes, BytesMut};

/// What a command means for the session's state kept by a follower.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandKind {
    /// `use <tube>`, a valid tube name.
    Use(Bytes),
    /// `watch <tube>`, a valid tube name.
    Watch(Bytes),
    /// `ignore <tube>`, a valid tube name.
    Ignore(Bytes),
    /// `quit` (any line starting with it): the server answers nothing and reads
    /// nothing more.
    Quit,
    /// Every other command, and every line the server refuses.
    Other,
}

/// One command as the server will frame it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FramedCommand {
    /// Bytes the server frames as this one command and answers the same way: the
    /// bytes as received (the line and its CRLF, and for a put its body and CRLF),
    /// except for an over-long line, whose bytes are not kept and which stands here
    /// as [`MAX_LINE`] bytes with no line end followed by CRLF (the server answers
    /// any over-long line BAD_FORMAT and changes nothing), and for an oversized
    /// put, whose body is not kept (see `discard`).
    pub bytes: Bytes,
    /// After `bytes`, this many bytes of any content that the server reads and
    /// throws away before it answers: an oversized put's body and CRLF. Zero for
    /// every other command.
    pub discard: u64,
    /// How many bytes of the client's stream the command took: as many as
    /// [`FramedCommand::wire_len`], except for an over-long line (its own length
    /// and CRLF, where `bytes` is a stand-in).
    pub received: u64,
    /// What the command means for the session's used tube and watch list.
    pub kind: CommandKind,
    /// The command the line parsed as (a put also when its body then lacks its
    /// CRLF or is oversized); None for a line the server refuses as such (BAD_FORMAT,
    /// UNKNOWN_COMMAND, over-long).
    pub op: Option<Op>,
    /// The reply the server is bound to give, known from the bytes alone:
    /// BAD_FORMAT, UNKNOWN_COMMAND, JOB_TOO_BIG or EXPECTED_CRLF (each with its
    /// CRLF). Such a command changes nothing on the server but its stats counters.
    pub fixed_reply: Option<&'static [u8]>,
    /// Whether the server may hold its reply back, waiting for a job: a `reserve`, or
    /// a `reserve-with-timeout` above 0. The server applies nothing after it until it
    /// has answered it.
    pub waits: bool,
}

impl FramedCommand {
    /// How many bytes the server reads for this command: `bytes` and `discard`.
    pub fn wire_len(&self) -> u64 {
        self.bytes.len() as u64 + self.discard
    }

    /// Whether the server answers it: every command but `quit`.
    pub fn expects_reply(&self) -> bool {
        self.kind != CommandKind::Quit
    }
}

/// What an over-long line stands as: [`MAX_LINE`] bytes with no line end in
/// them, then CRLF. The server throws the first [`MAX_LINE`] bytes away, finds the
/// CRLF at once and answers BAD_FORMAT.
static OVER_LONG: [u8; MAX_LINE + 2] = over_long_line();

const fn over_long_line() -> [u8; MAX_LINE + 2] {
    let mut line = [b'x'; MAX_LINE + 2];
    line[MAX_LINE] = b'\r';
    line[MAX_LINE + 1] = b'\n';
    line
}

/// What the framer expects next (the server's `Framing`, and its end at `quit`).
#[derive(Debug, Clone, Copy)]
enum State {
    /// A command line.
    Line,
    /// An over-long line is being thrown away up to its line end; `skipped`
    /// bytes of it are gone.
    SkipLine { skipped: u64 },
    /// A put's body: the line (`line` bytes, CRLF included) stays at the front of
    /// the input until its body of `need` bytes (CRLF included) is in.
    Body { line: usize, need: usize },
    /// An oversized put's body (`total` bytes, CRLF included) is being thrown
    /// away: `left` bytes to go.
    Discard { left: u64, total: u64 },
    /// `quit` was read: nothing more is.
    Closed,
}

/// Cuts a client's byte stream into [`FramedCommand`]s, in order, exactly as the
/// engine's server will.
///
/// Feed it with [`CommandFramer::push`] (or read straight into
/// [`CommandFramer::input_mut`]), then call [`CommandFramer::next_command`] until
/// it returns None. What it holds is bounded: at most [`MAX_LINE`] bytes of a
/// line, or a put's line and body (at most the job size limit plus a line),
/// besides what was pushed and not yet framed; thrown-away bytes are not kept.
#[derive(Debug)]
pub struct CommandFramer {
    input: BytesMut,
    state: State,
    /// The server's job size limit (`-z`): it decides JOB_TOO_BIG, so it must be
    /// the server's.
    max_job_size: u32,
    /// Oversized put's line, kept while its body is thrown away.
    discard_line: Bytes,
}

impl CommandFramer {
    /// A framer for a server whose job size limit is `max_job_size`.
    pub fn new(max_job_size: u32) -> CommandFramer {
        CommandFramer {
            input: BytesMut::new(),
            state: State::Line,
            max_job_size,
            discard_line: Bytes::new(),
        }
    }

    /// Add bytes received from the client. Bytes an oversized put throws away are
    /// dropped here when nothing is pending before them; everything is dropped
    /// after `quit`.
    pub fn push(&mut self, mut bytes: &[u8]) {
        match &mut self.state {
            State::Closed => return,
            State::Discard { left, .. } if self.input.is_empty() => {
                let n = usize::try_from(*left).map_or(bytes.len(), |l| l.min(bytes.len()));
                *left -= n as u64;
                bytes = &bytes[n..];
            }
            _ => {}
        }
        self.input.extend_from_slice(bytes);
    }

    /// The input buffer, to read into directly (e.g. with `read_buf`), with
    /// room for a read of several commands (`READ_SPARE`); bytes appended to
    /// it count as pushed. Call [`CommandFramer::next_command`]
    /// afterwards as after a push.
    pub fn input_mut(&mut self) -> &mut BytesMut {
        self.input.reserve(super::READ_SPARE);
        &mut self.input
    }

    /// The bytes received and held, not yet given out in a command.
    pub fn pending(&self) -> &[u8] {
        &self.input
    }

    /// Bytes received and held, not yet given out in a command.
    pub fn buffered(&self) -> usize {
        self.input.len()
    }

    /// Whether a `quit` was framed: the server reads nothing after it.
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed)
    }

    /// Whether the input so far ends exactly between two commands: nothing of a
    /// next command has been received.
    pub fn at_boundary(&self) -> bool {
        matches!(self.state, State::Line | State::Closed) && self.input.is_empty()
    }

    /// What the server has read of the command in progress once that command's
    /// line is a put's (the line parsed; its body, or an oversized body to throw
    /// away, is still coming): the bytes kept (the line, and as much of the body as
    /// came) and how many thrown-away bytes follow them. A server sent these has
    /// done what a put's line does (counted it, and given the job its id). None
    /// otherwise. Meaningful after [`CommandFramer::next_command`] returned None.
    pub fn begun(&self) -> Option<(&[u8], u64)> {
        match self.state {
            State::Body { line, need } => {
                let kept = self.input.len().min(line + need);
                Some((&self.input[..kept], 0))
            }
            State::Discard { left, total } => Some((&self.discard_line, total - left)),
            _ => None,
        }
    }

    /// The next complete command, if its bytes are all in.
    pub fn next_command(&mut self) -> Option<FramedCommand> {
        loop {
            match self.state {
                State::Closed => {
                    self.input.clear();
                    return None;
                }
                State::Line | State::SkipLine { .. } => {
                    let Some(end) = line_end(&self.input) else {
                        if self.input.len() >= MAX_LINE {
                            self.input.advance(MAX_LINE);
                            let skipped = match self.state {
                                State::SkipLine { skipped } => skipped,
                                _ => 0,
                            };
                            self.state = State::SkipLine {
                                skipped: skipped + MAX_LINE as u64,
                            };
                            continue;
                        }
                        return None;
                    };
                    if let State::SkipLine { skipped } = self.state {
                        self.input.advance(end + 2);
                        self.state = State::Line;
                        return Some(FramedCommand {
                            bytes: Bytes::from_static(&OVER_LONG),
                            discard: 0,
                            received: skipped + end as u64 + 2,
                            kind: CommandKind::Other,
                            op: None,
                            fixed_reply: Some(beanpole_engine::protocol::BAD_FORMAT),
                            waits: false,
                        });
                    }
                    if let Some(cmd) = self.line(end) {
                        return Some(cmd);
                    }
                }
                State::Body { line, need } => {
                    if self.input.len() < line + need {
                        return None;
                    }
                    self.state = State::Line;
                    let bytes = self.input.split_to(line + need).freeze();
                    let crlf = bytes.ends_with(b"\r\n");
                    return Some(FramedCommand {
                        received: bytes.len() as u64,
                        bytes,
                        discard: 0,
                        kind: CommandKind::Other,
                        op: Some(Op::Put),
                        fixed_reply: (!crlf).then_some(beanpole_engine::protocol::EXPECTED_CRLF),
                        waits: false,
                    });
                }
                State::Discard { left, total } => {
                    let n =
                        usize::try_from(left).map_or(self.input.len(), |l| l.min(self.input.len()));
                    self.input.advance(n);
                    let left = left - n as u64;
                    if left > 0 {
                        self.state = State::Discard { left, total };
                        return None;
                    }
                    self.state = State::Line;
                    let bytes = std::mem::take(&mut self.discard_line);
                    return Some(FramedCommand {
                        received: bytes.len() as u64 + total,
                        bytes,
                        discard: total,
                        kind: CommandKind::Other,
                        op: Some(Op::Put),
                        fixed_reply: Some(beanpole_engine::protocol::JOB_TOO_BIG),
                        waits: false,
                    });
                }
            }
        }
    }

    /// The command line ending (its CR) at `end`: the command, or None when a put's
    /// body follows (the state then says what is awaited).
    fn line(&mut self, end: usize) -> Option<FramedCommand> {
        match parse(&self.input[..end], self.max_job_size) {
            Ok(Command::Put { body, .. }) => {
                self.state = State::Body {
                    line: end + 2,
                    need: body as usize + 2,
                };
                None
            }
            Err(ProtocolError::JobTooBig { discard }) => {
                self.discard_line = self.input.split_to(end + 2).freeze();
                self.state = State::Discard {
                    left: discard,
                    total: discard,
                };
                None
            }
            Err(e) => Some(FramedCommand {
                bytes: self.input.split_to(end + 2).freeze(),
                discard: 0,
                received: end as u64 + 2,
                kind: CommandKind::Other,
                op: None,
                fixed_reply: Some(e.reply()),
                waits: false,
            }),
            Ok(cmd) => {
                let op = cmd.op();
                let waits = matches!(cmd, Command::Reserve)
                    || matches!(cmd, Command::ReserveWithTimeout(t) if t > 0);
                // Where the tube name starts in the line (it runs to the line's end).
                let name_at = match cmd {
                    Command::Use(n) | Command::Watch(n) | Command::Ignore(n) => {
                        n.as_ptr() as usize - self.input.as_ptr() as usize
                    }
                    _ => end,
                };
                let bytes = self.input.split_to(end + 2).freeze();
                let name = || bytes.slice(name_at..end);
                let kind = match op {
                    Op::Use => CommandKind::Use(name()),
                    Op::Watch => CommandKind::Watch(name()),
                    Op::Ignore => CommandKind::Ignore(name()),
                    Op::Quit => {
                        self.state = State::Closed;
                        self.input.clear();
                        CommandKind::Quit
                    }
                    _ => CommandKind::Other,
                };
                Some(FramedCommand {
                    bytes,
                    discard: 0,
                    received: end as u64 + 2,
                    kind,
                    op: Some(op),
                    fixed_reply: None,
                    waits,
                })
            }
        }
    }
}
