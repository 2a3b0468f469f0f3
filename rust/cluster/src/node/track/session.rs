//! A session's commands paired with their replies, in order: what has been
//! answered, what must be sent again to a new leader, and the used tube and
//! watch list the server holds for the session.

use std::collections::VecDeque;

use bytes::Bytes;
use thiserror::Error;

use super::command::{CommandKind, FramedCommand};
use super::reply::Reply;

/// The tube a new connection uses and watches.
pub const DEFAULT_TUBE: &[u8] = b"default";

/// A reply that does not fit the commands sent.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TrackError {
    /// A reply came with no command waiting for one.
    #[error("a reply came with no command waiting for one")]
    UnexpectedReply,
    /// A command was sent after `quit`.
    #[error("a command was sent after quit")]
    AfterQuit,
    /// `use` was answered with another tube's `USING`.
    #[error("use was answered with another tube")]
    UsedTube,
    /// `watch` or `ignore` was answered with a count of watched tubes other than
    /// the session's.
    #[error("the server watches {server} tubes where the session has {session}")]
    WatchCount {
        /// The count in the reply.
        server: u64,
        /// The session's count after the command.
        session: usize,
    },
}

/// One session's commands and replies, paired in order.
///
/// Give it each command sent to the server ([`Session::send`]) and each reply
/// received ([`Session::receive`]); the n-th reply answers the n-th command that
/// expects one (every command but `quit`). It keeps the commands not answered yet,
/// to send again after a change of leader, and the used tube and watch list as
/// the server has them once every answered command is applied (what the
/// unanswered ones will change is not in them until their replies come).
///
/// One reply of the engine's server answers no single command: when a pass's
/// records are not committed in time it drops the pass's replies, sends one
/// `INTERNAL_ERROR` and closes. Paired here with the oldest unanswered command,
/// it leaves the others unanswered, whose outcome is then unknown as well.
#[derive(Debug)]
pub struct Session {
    /// Past this many bytes of unanswered commands, [`Session::is_full`] says so.
    bound: usize,
    sent: u64,
    acked: u64,
    unanswered: VecDeque<FramedCommand>,
    /// Bytes held in `unanswered`.
    held: usize,
    quit: bool,
    used: Bytes,
    /// In beanstalkd's order (`list-tubes-watched`): appended on watch,
    /// swap-removed on ignore.
    watched: Vec<Bytes>,
}

impl Session {
    /// A new session (using and watching `default`) that is full once its
    /// unanswered commands hold more than `bound` bytes.
    pub fn new(bound: usize) -> Session {
        Session {
            bound,
            sent: 0,
            acked: 0,
            unanswered: VecDeque::new(),
            held: 0,
            quit: false,
            used: Bytes::from_static(DEFAULT_TUBE),
            watched: vec![Bytes::from_static(DEFAULT_TUBE)],
        }
    }

    /// A session taken over with `acked` commands answered, using `used` and
    /// watching `watched` (in `list-tubes-watched` order) once they are applied,
    /// and full past `bound` bytes as [`Session::new`]'s.
    pub fn resumed(bound: usize, acked: u64, used: Bytes, watched: Vec<Bytes>) -> Session {
        Session {
            sent: acked,
            acked,
            used,
            watched,
            ..Session::new(bound)
        }
    }

    /// Note a command sent to the server. A `quit` is counted but awaits no reply;
    /// nothing may follow it.
    pub fn send(&mut self, cmd: FramedCommand) -> Result<(), TrackError> {
        if self.quit {
            return Err(TrackError::AfterQuit);
        }
        self.sent += 1;
        if !cmd.expects_reply() {
            self.quit = true;
            return Ok(());
        }
        self.held += cmd.bytes.len();
        self.unanswered.push_back(cmd);
        Ok(())
    }

    /// Pair a reply with the oldest unanswered command and apply what it changed:
    /// `USING X` after `use X` makes X the used tube; `WATCHING n` after `watch X`
    /// adds X to the watch list (unless there), after `ignore X` removes it (if
    /// there). Returns the command answered. The command is answered (and counted)
    /// even when the reply contradicts the session's state (an error).
    pub fn receive(&mut self, reply: &Reply) -> Result<FramedCommand, TrackError> {
        let cmd = self
            .unanswered
            .pop_front()
            .ok_or(TrackError::UnexpectedReply)?;
        self.held -= cmd.bytes.len();
        self.acked += 1;
        let line = reply.line();
        match &cmd.kind {
            CommandKind::Use(tube) => {
                if let Some(name) = line.strip_prefix(b"USING ") {
                    if name != &tube[..] {
                        return Err(TrackError::UsedTube);
                    }
                    self.used = tube.clone();
                }
            }
            CommandKind::Watch(tube) => {
                if let Some(n) = watching(line) {
                    if !self.watched.contains(tube) {
                        self.watched.push(tube.clone());
                    }
                    self.check_count(n)?;
                }
            }
            CommandKind::Ignore(tube) => {
                if let Some(n) = watching(line) {
                    if let Some(i) = self.watched.iter().position(|t| t == tube) {
                        self.watched.swap_remove(i);
                    }
                    self.check_count(n)?;
                }
            }
            CommandKind::Quit | CommandKind::Other => {}
        }
        Ok(cmd)
    }

    fn check_count(&self, server: u64) -> Result<(), TrackError> {
        if server == self.watched.len() as u64 {
            Ok(())
        } else {
            Err(TrackError::WatchCount {
                server,
                session: self.watched.len(),
            })
        }
    }

    /// Commands sent, `quit` included.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Commands answered: replies received.
    pub fn acked(&self) -> u64 {
        self.acked
    }

    /// The commands sent and not answered yet, oldest first: what a new leader
    /// must be sent again (not a `quit`, which awaits no reply).
    pub fn unanswered(&self) -> impl ExactSizeIterator<Item = &FramedCommand> + '_ {
        self.unanswered.iter()
    }

    /// Bytes the unanswered commands hold.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Whether the unanswered commands hold more than the bound: time to stop
    /// reading the client until replies come.
    pub fn is_full(&self) -> bool {
        self.held > self.bound
    }

    /// Whether a `quit` was sent.
    pub fn quit_sent(&self) -> bool {
        self.quit
    }

    /// The tube the server has the session use.
    pub fn used(&self) -> &Bytes {
        &self.used
    }

    /// The tubes the server has the session watch, in `list-tubes-watched` order.
    pub fn watched(&self) -> &[Bytes] {
        &self.watched
    }
}

/// n in `WATCHING n`.
fn watching(line: &[u8]) -> Option<u64> {
    let digits = line.strip_prefix(b"WATCHING ")?;
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}
