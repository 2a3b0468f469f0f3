//! Sessions: client connections a follower of a replicated cluster forwards to
//! this leader, which outlive the leader (see `wal/session.rs` for what is
//! replicated and why).
//!
//! A session is a connection slot whose [`Session`] names its owner key. While no
//! forwarding connection is attached to it (after a change of leader, or when the
//! follower's connection broke) it is *detached*: it keeps its reservations,
//! tubes and recorded replies, and ends, giving its jobs back, when nobody
//! attaches within the grace time. Every reservation a session takes is
//! journaled with its owner and deadline (a hold record), its end too, and the
//! replies of its commands up to the last one that changed anything: that is
//! what lets the next leader give the session back its jobs and answer a resent
//! command from its first run instead of applying it twice.
//!
//! Nothing here runs for an ordinary connection: its `session` is `None`.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;

use super::job::JobState;
use super::timers::Timer;
use super::{ConnId, Store, Wakeup, SECOND};
use crate::wal::format::Record;
use crate::wal::session::{Kept, SessionReplies, REPLIES_KEPT};

/// A session's state in the store.
#[derive(Debug, Default)]
pub struct Session {
    pub owner: u64,
    /// The number of the last command answered.
    pub seq: u64,
    /// Replies recorded in the log.
    pub replies: SessionReplies,
    /// Replies of answered commands after the recorded ones, not yet journaled
    /// (the last `pending.len()` commands up to `seq`).
    pub pending: VecDeque<Kept>,
    /// The number of the command whose reply its put's job record records
    /// (see [`Store::put_by`]; 0 if none).
    pub implied: u64,
    /// While detached: the sequence its expiry timer names.
    pub detached: Option<u64>,
    /// Jobs it reserved: (job id, the reserving command's number), for the hold
    /// record a touch writes.
    pub grants: Vec<(u64, u64)>,
}

/// Why a session cannot be attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AttachError {
    /// The commands the follower lacks replies for are older than the replies
    /// kept.
    #[error("the session's replies from command {needed} on are no longer kept")]
    Lost { needed: u64 },
    /// Another connection is attached to it (the follower tries again once that
    /// one has gone).
    #[error("the session is attached elsewhere")]
    Busy,
}

/// What to answer a resent command with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replay {
    /// Its recorded reply.
    Reply(Vec<u8>),
    /// It reserved this job, which the session still holds.
    Reserved { id: u64, body: Bytes },
}

/// A detached session's stand-in wakeup: nobody to wake.
struct Nobody;

impl Wakeup for Nobody {
    fn wake(&self) {}
}

impl Store {
    /// Journal sessions' holds, outcomes and ends (a replicated cluster's
    /// leader); a detached session ends after `grace_ns`.
    pub fn enable_sessions(&mut self, grace_ns: u64) {
        self.sessions_on = true;
        self.session_grace = grace_ns;
    }

    /// The connection slot of session `owner`, if it exists.
    pub fn session_conn(&self, owner: u64) -> Option<ConnId> {
        self.sessions.get(&owner).copied()
    }

    /// Attach a forwarding connection to session `owner` (made if new): it uses
    /// `use_tube` and watches `watch`, as the follower saw; `acked` commands of it
    /// have been answered. Returns the slot, and the number of the last command
    /// whose recorded reply answers a resent command.
    pub fn attach_session(
        &mut self,
        waker: Arc<dyn Wakeup>,
        owner: u64,
        acked: u64,
        use_tube: &[u8],
        watch: &[&[u8]],
    ) -> Result<(ConnId, u64), AttachError> {
        let conn = match self.sessions.get(&owner).copied() {
            Some(conn) => {
                let s = self
                    .session_of(conn)
                    .map(|s| (s.replies.first, s.replies.last(), s.detached.is_some()));
                if let Some((first, last, detached)) = s {
                    if !detached {
                        return Err(AttachError::Busy);
                    }
                    if last > acked && acked + 1 < first {
                        return Err(AttachError::Lost { needed: acked + 1 });
                    }
                }
                self.end_wait(conn);
                // A blocked reserve's answer that never went out: resent, it runs
                // again (its job, if it got one, is found by its number).
                if let Some(c) = self.conn_mut(conn) {
                    c.mailbox = None;
                    c.waker = waker;
                }
                conn
            }
            None => {
                let conn = self.connect(waker);
                if let Some(c) = self.conn_mut(conn) {
                    c.session = Some(Box::new(Session {
                        owner,
                        seq: acked,
                        ..Session::default()
                    }));
                }
                self.sessions.insert(owner, conn);
                conn
            }
        };
        self.use_tube(conn, use_tube);
        for name in watch {
            self.watch(conn, name);
        }
        let wanted: Vec<u32> = watch.iter().filter_map(|n| self.tubes.find(n)).collect();
        let extra: Vec<Vec<u8>> = self
            .conn(conn)
            .map(|c| {
                c.watch
                    .iter()
                    .filter(|t| !wanted.contains(t))
                    .map(|&t| self.tubes.get(t).name.to_vec())
                    .collect()
            })
            .unwrap_or_default();
        for name in extra {
            let _ = self.ignore(conn, &name);
        }
        let last = match self.session_mut(conn) {
            Some(s) => {
                s.detached = None;
                s.seq = acked;
                s.pending.clear();
                s.implied = 0;
                s.replies.last()
            }
            None => 0,
        };
        Ok((conn, last))
    }

    /// The forwarding connection of a session went away without the client
    /// quitting (the follower's link broke, or the leader changed): keep the
    /// session for the grace time.
    pub fn detach_session(&mut self, conn: ConnId, now: u64) {
        self.end_wait(conn);
        let seq = self.next_seq();
        let Some(c) = self.conn_mut(conn) else {
            return;
        };
        c.mailbox = None;
        c.waker = Arc::new(Nobody);
        if let Some(s) = c.session.as_mut() {
            s.detached = Some(seq);
        }
        let at = now.saturating_add(self.session_grace);
        self.timers.push(at, Timer::Session(conn, seq));
    }

    /// Whether `conn` is a detached session's slot.
    pub fn session_detached(&self, conn: ConnId) -> bool {
        self.session_of(conn).is_some_and(|s| s.detached.is_some())
    }

    /// Whether `conn` is a session's slot.
    pub fn is_session(&self, conn: ConnId) -> bool {
        self.session_of(conn).is_some()
    }

    fn session_of(&self, conn: ConnId) -> Option<&Session> {
        self.conn(conn)?.session.as_deref()
    }

    fn session_mut(&mut self, conn: ConnId) -> Option<&mut Session> {
        self.conn_mut(conn)?.session.as_deref_mut()
    }

    /// The answer to the session's command `seq` from its first run, if it ran.
    pub fn replay(&self, conn: ConnId, seq: u64) -> Option<Replay> {
        let s = self.session_of(conn)?;
        if let Some(&(id, _)) = s.grants.iter().find(|&&(_, g)| g == seq) {
            if let Some(body) = self.held_body(conn, id) {
                return Some(Replay::Reserved { id, body });
            }
        }
        let reply = s.replies.reply(seq)?;
        if reply.is_reserved() {
            // A reservation whose job the session no longer holds (its TTR ran
            // out): the client never saw it, so the reserve runs again.
            return None;
        }
        Some(Replay::Reply(reply.to_vec()))
    }

    /// The body of job `id` if `conn` holds it.
    fn held_body(&self, conn: ConnId, id: u64) -> Option<Bytes> {
        let slot = self.jobs.slot_of(id)?;
        let job = self.jobs.get(slot)?;
        (job.state == JobState::Reserved && self.holds(conn, slot, job.pos))
            .then(|| job.body.to_bytes())
    }

    /// The session's next command was answered with `reply` (for a reservation,
    /// its first line).
    pub fn note_reply(&mut self, conn: ConnId, reply: Kept) {
        let Some(s) = self.session_mut(conn) else {
            return;
        };
        s.seq += 1;
        if s.seq <= s.replies.last() {
            return;
        }
        if s.seq == s.implied {
            // Recorded by the job record its put made, after the replies
            // before it (a put's reply is noted in the pass that made it).
            debug_assert!(matches!(reply, Kept::Inserted(_)), "{reply:?}");
            s.replies.push(s.seq, reply);
            return;
        }
        s.pending.push_back(reply);
        if s.pending.len() > REPLIES_KEPT {
            s.pending.pop_front();
        }
    }

    /// Journal the replies noted since the last recorded one (at the end of a
    /// pass that journaled a change, so they commit with it).
    pub fn record_replies(&mut self, conn: ConnId) {
        let Some(s) = self.session_mut(conn) else {
            return;
        };
        if s.pending.is_empty() {
            return;
        }
        let owner = s.owner;
        let first = s.seq + 1 - s.pending.len() as u64;
        // Journaled from the borrowed replies, then moved into the kept ones:
        // no copy of a reply, and the queue keeps its room for the next pass.
        let mut pending = std::mem::take(&mut s.pending);
        if let Some(log) = self.log.as_mut() {
            for (i, reply) in pending.iter().enumerate() {
                reply.with_bytes(|b| log.append_outcome(owner, first + i as u64, b));
            }
        }
        if let Some(s) = self.session_mut(conn) {
            for (i, reply) in pending.drain(..).enumerate() {
                s.replies.push(first + i as u64, reply);
            }
            s.pending = pending;
        }
    }

    /// The session and command number a put by `conn` journals its job
    /// record with, if `conn` is a session's (a replicated cluster's leader):
    /// that record then records the put's reply, `INSERTED id`, in place of
    /// an outcome record. The replies noted before it are journaled first, so
    /// that the recorded ones stay one unbroken run.
    pub(super) fn put_by(&mut self, conn: ConnId) -> Option<(u64, u64)> {
        if !self.sessions_on {
            return None;
        }
        self.record_replies(conn);
        let s = self.session_mut(conn)?;
        s.implied = s.seq + 1;
        Some((s.owner, s.implied))
    }

    /// A job was just given to `conn` (`touched`: its TTR restarted instead):
    /// journal the hold if it is a session's. A touch keeps the number of the
    /// command that reserved the job; a new reservation takes the number of
    /// the command it answers, even of a job this session held before.
    pub(super) fn journal_hold(&mut self, conn: ConnId, id: u64, deadline: u64, touched: bool) {
        if !self.sessions_on {
            return;
        }
        let Some(s) = self.session_mut(conn) else {
            return;
        };
        let owner = s.owner;
        let earlier = s.grants.iter().position(|&(j, _)| j == id);
        let seq = match earlier {
            Some(at) if touched => s.grants[at].1,
            _ => {
                if let Some(at) = earlier {
                    s.grants.swap_remove(at);
                }
                let seq = s.seq + 1;
                s.grants.push((id, seq));
                seq
            }
        };
        let deadline = self.log.as_ref().map_or(0, |l| l.wall(deadline));
        self.journal_always(&Record::Hold {
            id,
            owner,
            deadline,
            seq,
        });
        self.prune_grants(conn);
    }

    /// A replicated cluster's leader journals a tube's pause, so the next
    /// leader keeps it (a single server does not: pauses do not survive a
    /// restart, as in beanstalkd).
    pub(super) fn journal_pause(&mut self, name: &[u8], delay: u32, now: u64) {
        if !self.sessions_on {
            return;
        }
        let until = match (&self.log, delay) {
            (Some(_), 0) | (None, _) => 0,
            (Some(log), d) => log.wall(now + u64::from(d) * SECOND),
        };
        self.journal_always(&Record::Pause {
            tube: name.to_vec(),
            delay,
            until,
        });
    }

    /// Pause again the tubes a replicated state holds paused (at a leader's
    /// takeover): those that exist, until their replicated end.
    pub(super) fn restore_pauses(&mut self, pauses: &[(Vec<u8>, u32, u64)], now: u64) {
        for (name, delay, until) in pauses {
            let Some(tube) = self.tubes.find(name) else {
                continue;
            };
            if *until <= now {
                continue;
            }
            let seq = self.next_seq();
            self.tubes.get_mut(tube).pause = Some(super::tube::Pause {
                length: u64::from(*delay) * SECOND,
                until: *until,
                seq,
            });
            self.timers.push(*until, Timer::Unpause(tube, seq));
        }
        self.compact_timers();
    }

    /// Forget grants of jobs `conn` no longer holds (kept small).
    pub(super) fn prune_grants(&mut self, conn: ConnId) {
        let held: Vec<u64> = match self.conn(conn) {
            Some(c) => c
                .reserved
                .iter()
                .filter_map(|&s| self.jobs.get(s).map(|j| j.id))
                .collect(),
            None => return,
        };
        if let Some(s) = self.session_mut(conn) {
            if s.grants.len() > 2 * held.len() + 8 {
                s.grants.retain(|(id, _)| held.contains(id));
            }
        }
    }

    /// A session ends (its client quit or hung up, or it stayed detached past
    /// the grace time): its jobs are given back, and its end is journaled.
    pub(super) fn end_session(&mut self, conn: ConnId) {
        let Some(owner) = self.session_of(conn).map(|s| s.owner) else {
            return;
        };
        if self.sessions_on {
            let held: Vec<u64> = self
                .conn(conn)
                .map(|c| {
                    c.reserved
                        .iter()
                        .filter_map(|&s| self.jobs.get(s).map(|j| j.id))
                        .collect()
                })
                .unwrap_or_default();
            for id in held {
                self.journal_always(&Record::Return { id });
            }
            self.journal_always(&Record::End { owner });
        }
        self.sessions.remove(&owner);
    }

    /// A detached session's grace time is over.
    pub(super) fn session_expires(&mut self, conn: ConnId, seq: u64, now: u64) {
        let due = self
            .session_of(conn)
            .is_some_and(|s| s.detached == Some(seq));
        if due {
            self.disconnect(conn, now);
        }
    }

    /// Rebuild the sessions a replicated state holds (at a leader's takeover):
    /// each detached, ending after the grace time unless attached. `held` are
    /// (job slot, owner, deadline on this store's clock, reserving command).
    pub(super) fn restore_sessions(
        &mut self,
        replies: Vec<SessionReplies>,
        held: Vec<(u32, u64, u64, u64)>,
        now: u64,
    ) {
        for r in replies {
            let conn = self.restored_session(r.owner, now);
            if let Some(s) = self.session_mut(conn) {
                s.seq = r.last();
                s.replies = r;
            }
        }
        for (slot, owner, deadline, seq) in held {
            let conn = self.restored_session(owner, now);
            let Some(id) = self.jobs.get(slot).map(|j| j.id) else {
                continue;
            };
            if let Some(s) = self.session_mut(conn) {
                s.grants.push((id, seq));
            }
            self.restore_reserved(slot, conn, deadline.max(now));
        }
    }

    /// The slot of session `owner`, made detached if new.
    fn restored_session(&mut self, owner: u64, now: u64) -> ConnId {
        if let Some(conn) = self.session_conn(owner) {
            return conn;
        }
        let conn = self.connect(Arc::new(Nobody));
        if let Some(c) = self.conn_mut(conn) {
            c.session = Some(Box::new(Session {
                owner,
                ..Session::default()
            }));
        }
        self.sessions.insert(owner, conn);
        self.detach_session(conn, now);
        conn
    }

    /// Give a restored job to `conn` as the reservation it was, without a new
    /// record or count.
    fn restore_reserved(&mut self, slot: u32, conn: ConnId, deadline: u64) {
        let Some(at_pos) = self.conn(conn).map(|c| c.reserved.len() as u32) else {
            return;
        };
        let Some(job) = self.jobs.get_mut(slot) else {
            return;
        };
        job.state = JobState::Reserved;
        job.deadline = deadline;
        job.pos = at_pos;
        let (id, tube) = (job.id, job.tube);
        self.jobs.counters_mut(slot).reserver = conn;
        if let Some(c) = self.conn_mut(conn) {
            c.reserved.push(slot);
        }
        self.set_worker(conn);
        self.tubes.get_mut(tube).reserved_ct += 1;
        self.counts.reserved += 1;
        self.timers.push(deadline, Timer::Ttr(id));
        self.compact_timers();
    }
}

/// The default grace time of a detached session, in nanoseconds
/// (`ServerConfig::session_grace`, `--session-grace-ms`).
pub const SESSION_GRACE: u64 = 5 * SECOND;
