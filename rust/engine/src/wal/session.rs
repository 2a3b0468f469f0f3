//! Sessions in a replicated cluster's state: which forwarded client connection
//! holds which reserved job until when, and the replies of each connection's last
//! commands (record kinds 9 to 12 and 14, `format.rs`).
//!
//! A follower forwards a client's commands to the leader as a session, numbering
//! them 1, 2, 3... When the leader changes, the follower attaches the session to
//! the new leader and sends again the commands it has no reply for. The new
//! leader answers those the old one already applied from their recorded replies
//! (so nothing is applied twice), and gives the session back the jobs it holds.
//!
//! The leader records the replies of every command of a session up to the last
//! one that changed anything, so the recorded commands of a session are always
//! one unbroken run of numbers, of which the last [`REPLIES_KEPT`] are kept: a
//! command numbered at most the last recorded one is answered from its reply,
//! one after it runs as new. A put's reply (`INSERTED id`) is recorded by its
//! job record, which then names the session and command (a `put` record, kind
//! 14), after the replies noted before it; any other reply by an `outcome`
//! record.

use std::collections::{HashMap, VecDeque};

use super::format::{encode_outcome, Record, ID_LIMIT};
use crate::protocol::encode::u64_digits;

/// Replies kept per session: a follower never has more commands of one session
/// unanswered than this.
pub const REPLIES_KEPT: usize = 1024;

/// A reservation held by a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    pub id: u64,
    pub owner: u64,
    /// When its TTR runs out (wall ns).
    pub deadline: i64,
    /// The session's command that reserved it.
    pub seq: u64,
}

/// A recorded reply as kept. Most replies of a busy session are a put's
/// `INSERTED id`: kept as the id alone, with nothing on the heap to make,
/// keep or free for each (every node keeps the last [`REPLIES_KEPT`] of
/// every session); any other reply as its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kept {
    /// `INSERTED id\r\n`.
    Inserted(u64),
    Other(Box<[u8]>),
}

impl Kept {
    /// Keep `reply` (a `Vec`'s bytes are taken, not copied, when kept as
    /// they are).
    pub fn new(reply: impl AsRef<[u8]> + Into<Box<[u8]>>) -> Kept {
        match inserted_id(reply.as_ref()) {
            Some(id) => Kept::Inserted(id),
            None => Kept::Other(reply.into()),
        }
    }

    /// `f` of the reply's bytes (a put's written on the stack).
    pub fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            Kept::Inserted(id) => {
                // "INSERTED ", at most 20 digits, CRLF.
                let mut buf = [0u8; 31];
                buf[..9].copy_from_slice(b"INSERTED ");
                let (digits, at) = u64_digits(*id);
                let len = digits.len() - at;
                buf[9..9 + len].copy_from_slice(&digits[at..]);
                buf[9 + len..11 + len].copy_from_slice(b"\r\n");
                f(&buf[..11 + len])
            }
            Kept::Other(bytes) => f(bytes),
        }
    }

    /// The reply's bytes.
    pub fn to_vec(&self) -> Vec<u8> {
        self.with_bytes(<[u8]>::to_vec)
    }

    /// Whether the reply is a reservation's.
    pub fn is_reserved(&self) -> bool {
        matches!(self, Kept::Other(b) if b.starts_with(b"RESERVED "))
    }
}

/// The id of `INSERTED id\r\n` written as a put's reply is (decimal, no
/// leading zero, an id a job can have), so that the id written back gives the
/// same bytes.
fn inserted_id(reply: &[u8]) -> Option<u64> {
    let digits = reply.strip_prefix(b"INSERTED ")?.strip_suffix(b"\r\n")?;
    if digits.is_empty() || (digits[0] == b'0' && digits.len() > 1) {
        return None;
    }
    let id = digits.iter().try_fold(0u64, |n, &d| {
        if !d.is_ascii_digit() {
            return None;
        }
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })?;
    (id < ID_LIMIT).then_some(id)
}

/// In [`SessionReplies::codes`]: the reply is in `others`.
const OTHER: u64 = u64::MAX;

/// A session's recorded replies: commands `first ..= first + len - 1`.
///
/// Kept as one number per command (a put's id, or [`OTHER`]) with the other
/// replies beside them, so that recording a reply touches no older one: the
/// oldest, dropped as each new one comes, is never read (it is cold by then,
/// a few thousand replies of other sessions later, and reading it had been
/// most of what recording a reply cost).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionReplies {
    pub owner: u64,
    /// The number of the oldest kept reply (when there is one).
    pub first: u64,
    codes: VecDeque<u64>,
    /// The replies that are not a put's, by command number, oldest first.
    others: VecDeque<(u64, Box<[u8]>)>,
}

impl SessionReplies {
    /// No replies yet, of session `owner`.
    pub fn new(owner: u64) -> SessionReplies {
        SessionReplies {
            owner,
            ..SessionReplies::default()
        }
    }

    /// The number of the last recorded command (0 if none).
    pub fn last(&self) -> u64 {
        if self.codes.is_empty() {
            self.first.saturating_sub(1)
        } else {
            self.first + self.codes.len() as u64 - 1
        }
    }

    /// The recorded reply of command `seq`, if kept.
    pub fn reply(&self, seq: u64) -> Option<Kept> {
        let at = seq.checked_sub(self.first)?;
        match *self.codes.get(at as usize)? {
            OTHER => {
                let i = self.others.partition_point(|&(s, _)| s < seq);
                let (s, bytes) = self.others.get(i)?;
                (*s == seq).then(|| Kept::Other(bytes.clone()))
            }
            id => Some(Kept::Inserted(id)),
        }
    }

    /// The recorded replies, oldest first, with their command numbers.
    pub fn iter(&self) -> impl Iterator<Item = (u64, Kept)> + '_ {
        (self.first..=self.last()).filter_map(|seq| Some((seq, self.reply(seq)?)))
    }

    /// Record command `seq`'s reply. A number that does not follow the last one
    /// starts the run afresh there (older replies no longer apply).
    pub fn push(&mut self, seq: u64, reply: Kept) {
        if self.codes.is_empty() || seq != self.last() + 1 {
            self.codes.clear();
            self.others.clear();
            self.first = seq;
        }
        match reply {
            // Ids are below 2^63: never OTHER.
            Kept::Inserted(id) => self.codes.push_back(id),
            Kept::Other(bytes) => {
                self.codes.push_back(OTHER);
                self.others.push_back((seq, bytes));
            }
        }
        if self.codes.len() > REPLIES_KEPT {
            let drop = self.codes.len() - REPLIES_KEPT;
            self.codes.drain(..drop);
            self.first += drop as u64;
            while self.others.front().is_some_and(|&(s, _)| s < self.first) {
                self.others.pop_front();
            }
        }
    }
}

/// The sessions part of a replicated state.
#[derive(Debug, Default)]
pub struct Sessions {
    held: HashMap<u64, Held>,
    replies: HashMap<u64, SessionReplies>,
}

impl Sessions {
    /// Session `owner`'s command `seq` was answered `reply` (an outcome
    /// record's).
    pub fn outcome(&mut self, owner: u64, seq: u64, reply: Kept) {
        let s = self
            .replies
            .entry(owner)
            .or_insert_with(|| SessionReplies::new(owner));
        s.push(seq, reply);
    }

    /// Apply one record (the live set has already applied it).
    pub fn apply(&mut self, record: &Record) {
        match *record {
            Record::Hold {
                id,
                owner,
                deadline,
                seq,
            } => {
                self.held.insert(
                    id,
                    Held {
                        id,
                        owner,
                        deadline,
                        seq,
                    },
                );
            }
            Record::Release { id, .. }
            | Record::Bury { id, .. }
            | Record::Kick { id }
            | Record::Timeout { id }
            | Record::Delete { id }
            | Record::Return { id } => {
                self.held.remove(&id);
            }
            Record::Outcome {
                owner,
                seq,
                ref reply,
            } => self.outcome(owner, seq, Kept::new(reply.as_slice())),
            Record::End { owner } => {
                self.replies.remove(&owner);
                self.held.retain(|_, h| h.owner != owner);
            }
            Record::Job(_)
            | Record::Reserve { .. }
            | Record::NextId { .. }
            | Record::Pause { .. } => {}
        }
    }

    /// Holds of jobs for which `reserved` is true, by id.
    pub fn held(&self, reserved: impl Fn(u64) -> bool) -> Vec<Held> {
        let mut held: Vec<Held> = self
            .held
            .values()
            .filter(|h| reserved(h.id))
            .copied()
            .collect();
        held.sort_unstable_by_key(|h| h.id);
        held
    }

    /// Every session's replies, by owner.
    pub fn replies(&self) -> Vec<SessionReplies> {
        let mut all: Vec<SessionReplies> = self.replies.values().cloned().collect();
        all.sort_unstable_by_key(|s| s.owner);
        all
    }

    /// Append the records that rebuild this state (for jobs where `reserved`).
    pub fn encode(&self, reserved: impl Fn(u64) -> bool, out: &mut Vec<u8>) {
        for h in self.held(reserved) {
            Record::Hold {
                id: h.id,
                owner: h.owner,
                deadline: h.deadline,
                seq: h.seq,
            }
            .encode(out);
        }
        for s in self.replies() {
            for (seq, reply) in s.iter() {
                reply.with_bytes(|b| encode_outcome(out, s.owner, seq, b));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_stay_one_unbroken_run_of_the_latest() {
        let mut s = SessionReplies::default();
        assert_eq!(s.last(), 0);
        for seq in 1..=(REPLIES_KEPT as u64 + 10) {
            s.push(seq, Kept::new(seq.to_string().as_bytes()));
        }
        assert_eq!(s.last(), REPLIES_KEPT as u64 + 10);
        assert_eq!(s.first, 11);
        assert_eq!(s.reply(10), None);
        assert_eq!(s.reply(11).map(|r| r.to_vec()), Some(b"11".to_vec()));
        assert_eq!(s.iter().count(), REPLIES_KEPT);
        assert_eq!(s.reply(s.last() + 1), None);
        // A gap starts afresh.
        s.push(5000, Kept::new(&b"x"[..]));
        assert_eq!((s.first, s.last()), (5000, 5000));
        assert_eq!(s.reply(11), None);
    }

    #[test]
    fn puts_and_other_replies_are_kept_side_by_side() {
        let reply = |seq: u64| -> Vec<u8> {
            match seq % 3 {
                0 => format!("INSERTED {}\r\n", seq * 7).into_bytes(),
                1 => format!("RESERVED {seq} 1\r\n").into_bytes(),
                _ => b"DELETED\r\n".to_vec(),
            }
        };
        let mut s = SessionReplies::new(4);
        let end = 3 * REPLIES_KEPT as u64 + 2;
        for seq in 1..=end {
            s.push(seq, Kept::new(reply(seq)));
        }
        assert_eq!(s.first, end + 1 - REPLIES_KEPT as u64);
        for seq in s.first..=end {
            assert_eq!(s.reply(seq).map(|r| r.to_vec()), Some(reply(seq)), "{seq}");
        }
        assert_eq!(s.reply(s.first - 1), None);
        // Only the other replies of the kept commands are held beside them.
        assert_eq!(
            s.others.len(),
            s.iter().filter(|(seq, _)| seq % 3 != 0).count()
        );
        assert!(s.others.iter().all(|&(seq, _)| seq >= s.first));
        // The largest id a job can have is kept as an id, one past it as bytes.
        let top = format!("INSERTED {}\r\n", ID_LIMIT - 1);
        assert_eq!(Kept::new(top.as_bytes()), Kept::Inserted(ID_LIMIT - 1));
        let past = format!("INSERTED {ID_LIMIT}\r\n");
        assert!(matches!(Kept::new(past.as_bytes()), Kept::Other(_)));
        s.push(end + 1, Kept::new(past.as_bytes()));
        assert_eq!(
            s.reply(end + 1).map(|r| r.to_vec()),
            Some(past.into_bytes())
        );
    }

    #[test]
    fn a_kept_reply_gives_back_its_bytes() {
        let replies: [&[u8]; 11] = [
            b"INSERTED 1\r\n",
            b"INSERTED 0\r\n",
            b"INSERTED 18446744073709551615\r\n",
            b"INSERTED 18446744073709551616\r\n",
            b"INSERTED 007\r\n",
            b"INSERTED \r\n",
            b"INSERTED 12",
            b"INSERTED 1x\r\n",
            b"BURIED 5\r\n",
            b"RESERVED 5 3\r\n",
            b"",
        ];
        for reply in replies {
            assert_eq!(Kept::new(reply).to_vec(), reply, "{reply:?}");
            assert_eq!(Kept::new(reply.to_vec()).to_vec(), reply);
        }
        assert_eq!(Kept::new(&b"INSERTED 42\r\n"[..]), Kept::Inserted(42));
        assert!(matches!(
            Kept::new(&b"INSERTED 007\r\n"[..]),
            Kept::Other(_)
        ));
        assert!(Kept::new(&b"RESERVED 5 3\r\n"[..]).is_reserved());
        assert!(!Kept::new(&b"INSERTED 5\r\n"[..]).is_reserved());
    }

    #[test]
    fn holds_end_with_the_reservation_or_the_session() {
        let mut s = Sessions::default();
        for (id, owner) in [(1, 7), (2, 7), (3, 8)] {
            s.apply(&Record::Hold {
                id,
                owner,
                deadline: 100,
                seq: id,
            });
        }
        s.apply(&Record::Outcome {
            owner: 7,
            seq: 1,
            reply: b"RESERVED 1 1\r\n".to_vec(),
        });
        s.apply(&Record::Timeout { id: 1 });
        assert_eq!(
            s.held(|_| true).iter().map(|h| h.id).collect::<Vec<_>>(),
            [2, 3]
        );
        assert_eq!(s.held(|id| id != 2).len(), 1);
        s.apply(&Record::End { owner: 7 });
        assert_eq!(
            s.held(|_| true).iter().map(|h| h.id).collect::<Vec<_>>(),
            [3]
        );
        assert!(s.replies().is_empty());
        let mut bytes = Vec::new();
        s.encode(|_| true, &mut bytes);
        let mut back = Sessions::default();
        let mut at = 0;
        while let Ok(Some((r, n))) = Record::decode(&bytes[at..]) {
            back.apply(&r);
            at += n;
        }
        assert_eq!(at, bytes.len());
        assert_eq!(back.held(|_| true), s.held(|_| true));
    }
}
