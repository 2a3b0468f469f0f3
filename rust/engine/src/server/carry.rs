//! A cluster leader's own clients as sessions, and what moves with one when
//! the leader's term ends under it (docs/cluster.md, "The leader's own
//! clients").
//!
//! On a server given a [`Carrier`] (a cluster leader's term server), every
//! client connection is a session from the start, attached here: its
//! reservations, its replies and its end are journaled as a follower's
//! sessions' are. When the server stops under it (the term ended, or its
//! commit did not come in time), the connection is not closed: its socket, the
//! number of commands it has been answered, the tubes it used and watched then,
//! and its bytes from the first command not answered on go to the carrier,
//! which forwards the session to the next leader as a follower forwards its
//! clients' (the commands are sent again there, and those the old leader
//! applied are answered from their first run).
//!
//! To hand those bytes over, a [`Carry`] keeps a copy of what the client sent
//! from the end of its last answered command on; it is brought up to date at
//! the start of each pass and trimmed to the last answered command once that
//! command's reply has been written. Nothing here runs for a single server,
//! nor for the sessions a follower attaches.

use std::sync::Arc;

use bytes::{Buf, BytesMut};

use crate::protocol::MAX_LINE;

/// A leader's client connection whose server stopped under it, for its node to
/// forward to the next leader.
#[derive(Debug)]
pub struct CarriedSession {
    /// The client's connection (non-blocking, not registered with any runtime).
    pub stream: std::net::TcpStream,
    /// The session's key.
    pub owner: u64,
    /// Commands whose replies the client has been sent.
    pub acked: u64,
    /// The client's bytes from its first command not answered on: the commands
    /// applied and not answered (their outcome is unknown), then input not
    /// applied yet (possibly ending inside a command).
    pub input: Vec<u8>,
    /// The client's input had ended (it shut down its sending side).
    pub eof: bool,
    /// The tube it used when its last answered command had been applied.
    pub use_tube: Vec<u8>,
    /// The tubes it watched then, in `list-tubes-watched` order.
    pub watch: Vec<Vec<u8>>,
}

/// What a cluster node gives its leader's server to make its clients sessions
/// and take them over when the server stops.
pub trait SessionCarrier: Send + Sync {
    /// A key for a new client's session: random, never 0, not used before.
    fn new_owner(&self) -> u64;
    /// Forward a client connection whose server stopped under it.
    fn carry(&self, session: CarriedSession);
}

/// A [`SessionCarrier`] in the server's settings.
#[derive(Clone)]
pub struct Carrier(pub Arc<dyn SessionCarrier>);

impl std::fmt::Debug for Carrier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Carrier")
    }
}

/// Commands a pass answers at most before its replies are written: fewer than
/// the replies a session keeps, so that every command carried to the next
/// leader can be answered there from its first run.
pub(super) const WINDOW: u64 = (crate::wal::session::REPLIES_KEPT - 24) as u64;

/// A leader's own client's copy of what it sent since its last answered
/// command.
#[derive(Debug)]
pub(super) struct Carry {
    /// The session's key.
    pub owner: u64,
    /// The client's bytes from stream position `raw_at` on, as far as they
    /// were read; None once they grew past `limit` (an over-long line or an
    /// oversized body being thrown away): such a connection closes when its
    /// server stops, as a plain one does, until a pass starts between two
    /// commands again.
    raw: Option<BytesMut>,
    raw_at: u64,
    limit: usize,
    /// Stream position up to which the client's bytes have been taken in.
    read: u64,
    /// Bytes of input not applied yet when `read` was last brought up to date
    /// (only reads add to them between passes).
    seen: usize,
    /// Stream position just after the last answered command.
    boundary: u64,
    /// Commands answered and written when the last pass began with nothing
    /// left to write (`raw_at` is then `boundary`).
    acked: u64,
    /// The tubes (used, watched) as they were then, once a command since may
    /// have changed them.
    tubes: Option<(Vec<u8>, Vec<Vec<u8>>)>,
}

/// The stretch of the client's input that [`Carry`] keeps: the body being
/// read in place (if any), then the input buffer.
pub(super) struct Unread<'a> {
    pub body: &'a [u8],
    pub input: &'a [u8],
}

impl Unread<'_> {
    fn len(&self) -> usize {
        self.body.len() + self.input.len()
    }

    /// Append the last `n` bytes to `to`.
    fn tail_into(&self, n: usize, to: &mut BytesMut) {
        if n > self.input.len() {
            let from_body = n - self.input.len();
            to.extend_from_slice(&self.body[self.body.len() - from_body..]);
            to.extend_from_slice(self.input);
        } else {
            to.extend_from_slice(&self.input[self.input.len() - n..]);
        }
    }
}

/// What to carry over, from [`Carry::take`]: a [`CarriedSession`] but for its
/// connection.
pub(super) struct Taken {
    pub owner: u64,
    pub acked: u64,
    pub input: Vec<u8>,
    /// The tubes at the last acknowledgement, if they may have changed since.
    pub tubes: Option<(Vec<u8>, Vec<Vec<u8>>)>,
    pub eof: bool,
}

impl Taken {
    /// The session on `stream`; `tubes` must be set.
    pub fn into_session(self, stream: std::net::TcpStream) -> CarriedSession {
        let (use_tube, watch) = self.tubes.unwrap_or_default();
        CarriedSession {
            stream,
            owner: self.owner,
            acked: self.acked,
            input: self.input,
            eof: self.eof,
            use_tube,
            watch,
        }
    }
}

impl Carry {
    /// A new connection's (session `owner`), on a server whose job size limit
    /// is `max_job_size`.
    pub fn new(owner: u64, max_job_size: u32) -> Carry {
        Carry {
            owner,
            raw: Some(BytesMut::new()),
            raw_at: 0,
            // The unanswered commands a follower keeps, a put's body and a line.
            limit: (4 << 20) + max_job_size as usize + 2 * MAX_LINE,
            read: 0,
            seen: 0,
            boundary: 0,
            acked: 0,
            tubes: None,
        }
    }

    /// Take in what was read since the last call: nothing of the input may
    /// have been applied since.
    fn sync(&mut self, unread: &Unread<'_>) {
        let n = unread.len().saturating_sub(self.seen);
        self.seen = unread.len();
        self.read += n as u64;
        if let Some(raw) = self.raw.as_mut() {
            unread.tail_into(n, raw);
            if raw.len() > self.limit {
                self.raw = None;
            }
        }
    }

    /// A pass begins: take in what was read, and if nothing is left to write
    /// (`written`: every reply so far has gone out), `answered` commands are
    /// acknowledged and the copy starts after the last of them.
    pub fn pass_begins(&mut self, unread: &Unread<'_>, answered: u64, written: bool) {
        self.sync(unread);
        if written {
            self.acknowledge(unread, answered);
        }
    }

    /// Every reply of the `answered` commands has been written.
    fn acknowledge(&mut self, unread: &Unread<'_>, answered: u64) {
        self.acked = answered;
        self.tubes = None;
        match self.raw.as_mut() {
            Some(raw) => {
                let skip = usize::try_from(self.boundary - self.raw_at).unwrap_or(usize::MAX);
                raw.advance(skip.min(raw.len()));
                self.raw_at = self.boundary;
            }
            // Between two commands with all answered: the input not applied is
            // everything after the last answered command.
            None if unread.body.is_empty() && self.boundary + unread.len() as u64 == self.read => {
                let mut raw = BytesMut::with_capacity(unread.len());
                unread.tail_into(unread.len(), &mut raw);
                self.raw = Some(raw);
                self.raw_at = self.boundary;
            }
            None => {}
        }
    }

    /// A pass ends with `unread` not applied.
    pub fn pass_ends(&mut self, unread: &Unread<'_>) {
        self.seen = unread.len();
    }

    /// A command was answered, the `answered`-th, and `unread` is what
    /// follows it; `in_pass` unless it is a waiting reserve's answer, given
    /// between passes: the reads since are taken in first, and every earlier
    /// reply has been written (before the reserve waited).
    pub fn answered(&mut self, unread: &Unread<'_>, answered: u64, in_pass: bool) {
        if !in_pass {
            self.sync(unread);
            self.acknowledge(unread, answered.saturating_sub(1));
        }
        self.boundary = self.read - unread.len() as u64;
    }

    /// Whether the tubes must be kept as they are before the next command runs
    /// (its line is at the start of `input`): it may change them, and they
    /// have not been kept since the last acknowledgement.
    pub fn keeps_tubes(&self, input: &[u8]) -> bool {
        self.tubes.is_none()
            && [&b"use "[..], b"watch ", b"ignore "]
                .iter()
                .any(|w| input.starts_with(w))
    }

    /// Keep the tubes as they were at the last acknowledgement.
    pub fn keep_tubes(&mut self, used: Vec<u8>, watched: Vec<Vec<u8>>) {
        self.tubes = Some((used, watched));
    }

    /// Commands answered since the last acknowledgement.
    pub fn unacked(&self, answered: u64) -> u64 {
        answered.saturating_sub(self.acked)
    }

    /// What moves with the connection when its server stops: with `written`
    /// every reply so far has gone out; otherwise those of the last pass have
    /// not. None if the copy was given up.
    pub fn take(&mut self, unread: &Unread<'_>, answered: u64, written: bool) -> Option<Taken> {
        self.sync(unread);
        let raw = self.raw.take()?;
        let (acked, from, tubes) = if written {
            (answered, self.boundary, None)
        } else {
            (self.acked, self.raw_at, self.tubes.take())
        };
        let skip = usize::try_from(from - self.raw_at).ok()?;
        Some(Taken {
            owner: self.owner,
            acked,
            input: raw.get(skip..)?.to_vec(),
            tubes,
            eof: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection's input as the server holds it: nothing read in place.
    fn unread(input: &[u8]) -> Unread<'_> {
        Unread { body: &[], input }
    }

    #[test]
    fn a_pass_whose_replies_were_not_written_is_carried_whole_with_what_follows() {
        let mut c = Carry::new(7, 1000);
        // Pass 1: two commands answered, then written.
        c.pass_begins(&unread(b"use a\r\npeek 1\r\n"), 0, true);
        c.answered(&unread(b"peek 1\r\n"), 1, true);
        c.answered(&unread(b""), 2, true);
        c.pass_ends(&unread(b""));
        // Pass 2: one command answered, a put's line and half its body read.
        c.pass_begins(&unread(b"delete 1\r\nput 0 0 9 2\r\nh"), 2, true);
        c.answered(&unread(b"put 0 0 9 2\r\nh"), 3, true);
        c.pass_ends(&unread(b"put 0 0 9 2\r\nh"));
        // Its reply is not written: the term ends.
        let taken = c
            .take(&unread(b"put 0 0 9 2\r\nhi"), 3, false)
            .expect("kept");
        assert_eq!(taken.owner, 7);
        assert_eq!(taken.acked, 2);
        assert_eq!(taken.input, b"delete 1\r\nput 0 0 9 2\r\nhi");
        // Had it been written, only the put would be carried.
        let mut c2 = Carry::new(7, 1000);
        c2.pass_begins(&unread(b"delete 1\r\nput 0 0 9 2\r\nh"), 0, true);
        c2.answered(&unread(b"put 0 0 9 2\r\nh"), 1, true);
        c2.pass_ends(&unread(b"put 0 0 9 2\r\nh"));
        let taken = c2
            .take(&unread(b"put 0 0 9 2\r\nh"), 1, true)
            .expect("kept");
        assert_eq!(
            (taken.acked, &taken.input[..]),
            (1, &b"put 0 0 9 2\r\nh"[..])
        );
    }

    #[test]
    fn a_reserve_answered_between_passes_acknowledges_what_came_before_it() {
        let mut c = Carry::new(1, 1000);
        // One pass: a peek answered, a reserve waits; the peek's reply is written.
        c.pass_begins(&unread(b"peek 1\r\nreserve\r\n"), 0, true);
        c.answered(&unread(b"reserve\r\n"), 1, true);
        c.pass_ends(&unread(b""));
        // More input while it waits; then the reserve is answered.
        c.answered(&unread(b"stats-job 5\r\n"), 2, false);
        // The next pass begins before that answer is written, and runs the
        // stats-job; then the term ends with both replies unwritten.
        c.pass_begins(&unread(b"stats-job 5\r\n"), 2, false);
        c.answered(&unread(b""), 3, true);
        c.pass_ends(&unread(b""));
        let taken = c.take(&unread(b""), 3, false).expect("kept");
        assert_eq!(taken.acked, 1);
        assert_eq!(taken.input, b"reserve\r\nstats-job 5\r\n");
    }

    #[test]
    fn the_tubes_are_those_of_the_last_acknowledgement() {
        let mut c = Carry::new(1, 1000);
        c.pass_begins(&unread(b"peek 1\r\nuse b\r\n"), 0, true);
        assert!(!c.keeps_tubes(b"peek 1\r\nuse b\r\n"));
        c.answered(&unread(b"use b\r\n"), 1, true);
        assert!(c.keeps_tubes(b"use b\r\n"));
        c.keep_tubes(b"a".to_vec(), vec![b"default".to_vec()]);
        assert!(!c.keeps_tubes(b"watch c\r\n"), "kept once");
        c.answered(&unread(b""), 2, true);
        c.pass_ends(&unread(b""));
        let taken = c.take(&unread(b""), 2, false).expect("kept");
        assert_eq!(
            taken.tubes,
            Some((b"a".to_vec(), vec![b"default".to_vec()]))
        );
        // Written, the tubes are the connection's own (the caller's).
        let mut c = Carry::new(1, 1000);
        c.pass_begins(&unread(b"use b\r\n"), 0, true);
        c.keep_tubes(b"a".to_vec(), Vec::new());
        c.answered(&unread(b""), 1, true);
        c.pass_ends(&unread(b""));
        assert_eq!(c.take(&unread(b""), 1, true).expect("kept").tubes, None);
    }

    #[test]
    fn bytes_past_the_limit_are_given_up_until_a_pass_begins_between_commands() {
        let mut c = Carry::new(1, 0);
        let junk = vec![b'x'; c.limit + 1];
        c.pass_begins(&unread(&junk), 0, true);
        c.pass_ends(&unread(b""));
        assert!(c.take(&unread(b""), 0, true).is_none());
        // An answer later, then a pass between two commands: kept again.
        let mut c = Carry::new(1, 0);
        c.pass_begins(&unread(&junk), 0, true);
        c.answered(&unread(b"peek 1\r\n"), 1, true);
        c.pass_ends(&unread(b"peek 1\r\n"));
        c.pass_begins(&unread(b"peek 1\r\n"), 1, true);
        let taken = c
            .take(&unread(b"peek 1\r\n"), 1, false)
            .expect("kept again");
        assert_eq!((taken.acked, &taken.input[..]), (1, &b"peek 1\r\n"[..]));
    }
}
