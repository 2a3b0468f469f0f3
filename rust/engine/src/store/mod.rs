//! The queue state: jobs, tubes, connections' reservations and waits, deadlines.
//!
//! Synchronous and free of I/O: every method takes the current time (`now`, in
//! nanoseconds of the server's monotonic clock) and returns what to reply. A
//! connection blocked in `reserve` is served by leaving a [`Delivery`] in its
//! mailbox and queueing its [`Wakeup`]; the caller calls [`Store::take_wakeups`] after
//! releasing its lock and wakes them. The server keeps one `Store` behind one mutex.
//!
//! Invariant kept after every method: no unpaused tube has both ready jobs and a
//! waiting connection, so serving one tube after a change is all that is needed.

mod admin_ops;
mod arena;
mod body;
mod check;
mod conn;
mod heap;
pub(crate) mod job;
mod journal;
mod log;
mod ops;
pub mod session;
mod tick;
mod timers;
mod tube;
mod wait;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use bytes::Bytes;

pub use self::admin_ops::{NotDeleted, Which};
pub use self::conn::ConnState;
use self::heap::{DelayEntry, Entry};
use self::job::JobTable;
pub use self::job::{Body, BodyIn, Job, JobState};
pub use self::journal::LogStats;
pub use self::log::StoreLog;
use self::timers::{Timer, Timers};
use self::tube::Tubes;
use crate::events::{Event, EventHub, EventKind};
use crate::protocol::{Op, URGENT_THRESHOLD};

/// One second in nanoseconds: the TTR safety margin, and the unit of the protocol's
/// durations.
pub const SECOND: u64 = 1_000_000_000;

/// How a blocked connection is told its mailbox has something.
pub trait Wakeup: Send + Sync {
    fn wake(&self);
}

/// A connection's handle in the store.
pub type ConnId = u32;

/// What a blocked reserve is finally answered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    Reserved { id: u64, body: Bytes },
    DeadlineSoon,
    TimedOut,
}

/// The answer to a reserve command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReserveOutcome {
    /// Answered now.
    Now(Delivery),
    /// The connection waits; the answer will come through its mailbox.
    Waiting,
}

/// Why a put is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PutRefused {
    /// The server is draining: DRAINING.
    #[error("DRAINING")]
    Draining,
    /// The log cannot guarantee space for the job (full disk, failing writes), or
    /// the jobs would take more than `--max-memory`: OUT_OF_MEMORY, and nothing
    /// changes.
    #[error("OUT_OF_MEMORY")]
    NoSpace,
}

/// `ignore` of the last watched tube.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("NOT_IGNORED")]
pub struct NotIgnored;

/// Global job and connection counts kept up to date by every change.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Counts {
    pub urgent: u64,
    pub ready: u64,
    pub reserved: u64,
    pub delayed: u64,
    pub buried: u64,
    pub job_timeouts: u64,
    pub total_jobs: u64,
    pub connections: u64,
    pub total_connections: u64,
    pub producers: u64,
    pub workers: u64,
    pub waiting: u64,
}

/// The queue state of one server.
pub struct Store {
    jobs: JobTable,
    tubes: Tubes,
    conns: Vec<Option<ConnState>>,
    free_conns: Vec<u32>,
    timers: Timers,
    default_tube: u32,
    next_id: u64,
    /// Source of wait, pause and bury sequence numbers.
    seq: u64,
    ops: [u64; Op::COUNT],
    counts: Counts,
    max_job_size: u32,
    draining: bool,
    /// `--max-memory`: the most bytes the jobs may take (see [`job::job_cost`]); 0
    /// means no limit.
    max_memory: u64,
    wakeups: Vec<Arc<dyn Wakeup>>,
    /// Waiting connections that watch more than [`conn::WIDE`] tubes, oldest first:
    /// (connection, wait sequence).
    wide_waiters: Vec<(ConnId, u64)>,
    /// Tubes whose ready heap is not empty, in no order (each tube knows its index),
    /// so a reserve watching many tubes looks only at tubes that have a job.
    ready_tubes: Vec<u32>,
    /// The write-ahead log's bookkeeping, when the server has one.
    log: Option<StoreLog>,
    /// Where job events go (admin hooks); produces nothing unless asked.
    events: Arc<EventHub>,
    /// Sessions by owner key (replicated clusters only; see `session.rs`).
    sessions: std::collections::HashMap<u64, ConnId>,
    /// Whether sessions' holds, replies and ends are journaled.
    sessions_on: bool,
    /// How long a detached session lasts.
    session_grace: u64,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("jobs", &self.jobs.len())
            .field("tubes", &self.tubes.len())
            .field("next_id", &self.next_id)
            .finish_non_exhaustive()
    }
}

impl Store {
    pub fn new(max_job_size: u32) -> Store {
        let mut tubes = Tubes::default();
        let default_tube = tubes.find_or_create(b"default");
        Store {
            jobs: JobTable::default(),
            tubes,
            conns: Vec::new(),
            free_conns: Vec::new(),
            timers: Timers::default(),
            default_tube,
            next_id: 1,
            seq: 0,
            ops: [0; Op::COUNT],
            counts: Counts::default(),
            max_job_size,
            draining: false,
            max_memory: 0,
            wakeups: Vec::new(),
            wide_waiters: Vec::new(),
            ready_tubes: Vec::new(),
            log: None,
            events: Arc::new(EventHub::new(0)),
            sessions: std::collections::HashMap::new(),
            sessions_on: false,
            session_grace: session::SESSION_GRACE,
        }
    }

    /// Send job events to `hub` (the server's).
    pub fn set_events(&mut self, hub: Arc<EventHub>) {
        self.events = hub;
    }

    /// Produce an event of `kind` about the job in `slot`, if that kind is wanted.
    #[inline]
    fn emit(&self, kind: EventKind, slot: u32) {
        if self.events.wants(kind) {
            self.emit_slow(kind, slot, None);
        }
    }

    #[cold]
    fn emit_slow(&self, kind: EventKind, slot: u32, detail: Option<String>) {
        let Some(job) = self.jobs.get(slot) else {
            return;
        };
        let tube = Arc::clone(&self.tubes.get(job.tube).name);
        self.events.send(Event {
            kind,
            job_id: Some(job.id),
            tube: Some(tube),
            priority: Some(job.pri),
            at: crate::events::unix_now_coarse(),
            detail,
        });
    }

    pub fn max_job_size(&self) -> u32 {
        self.max_job_size
    }

    pub fn draining(&self) -> bool {
        self.draining
    }

    /// `--max-memory`: beyond `bytes` taken by jobs (bodies plus a fixed overhead
    /// each), puts are answered OUT_OF_MEMORY; 0 means no limit.
    pub fn set_max_memory(&mut self, bytes: u64) {
        self.max_memory = bytes;
    }

    /// The bytes the live jobs take, as `--max-memory` counts them.
    pub fn job_bytes(&self) -> u64 {
        self.jobs.bytes()
    }

    /// Enter drain mode: from now on every put is answered DRAINING.
    pub fn set_draining(&mut self, on: bool) {
        if on && !self.draining {
            self.events.server_event(EventKind::Drain, || None);
        }
        self.draining = on;
    }

    /// Count one command in the stats.
    pub fn count(&mut self, op: Op) {
        self.ops[op.index()] += 1;
    }

    /// Hand out the next job id (a put takes its id as soon as its command line is
    /// accepted, even if its body then never arrives).
    pub fn alloc_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// The earliest deadline the clock must wake up for.
    pub fn next_deadline(&self) -> Option<u64> {
        self.timers.next()
    }

    /// Wakeups queued by the last changes; call after releasing the lock.
    pub fn take_wakeups(&mut self) -> Vec<Arc<dyn Wakeup>> {
        std::mem::take(&mut self.wakeups)
    }

    /// Queue the wakeup of every connection (the server is stopping).
    pub fn wake_all(&mut self) {
        let wakers = self.conns.iter().flatten().map(|c| Arc::clone(&c.waker));
        self.wakeups.extend(wakers);
    }

    /// Whether there are wakeups to take.
    pub fn has_wakeups(&self) -> bool {
        !self.wakeups.is_empty()
    }

    /// The mailbox of a connection that was blocked in reserve.
    pub fn take_delivery(&mut self, conn: ConnId) -> Option<Delivery> {
        self.conn_mut(conn).and_then(|c| c.mailbox.take())
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn conn(&self, conn: ConnId) -> Option<&ConnState> {
        self.conns.get(conn as usize)?.as_ref()
    }

    fn conn_mut(&mut self, conn: ConnId) -> Option<&mut ConnState> {
        self.conns.get_mut(conn as usize)?.as_mut()
    }

    // ----- moving jobs between states -------------------------------------------

    /// Take a job out of whatever queue or list holds it, keeping counts right.
    /// The job stays in the table.
    fn detach(&mut self, slot: u32) {
        let Some(job) = self.jobs.get(slot) else {
            return;
        };
        let (state, tube, pos, pri, deadline) =
            (job.state, job.tube, job.pos, job.pri, job.deadline);
        let jobs = &mut self.jobs;
        match state {
            JobState::Ready => {
                let t = self.tubes.get_mut(tube);
                t.ready.remove(pos as usize, &mut |s, p| jobs.set_pos(s, p));
                self.counts.ready -= 1;
                if pri < URGENT_THRESHOLD {
                    self.counts.urgent -= 1;
                    t.urgent_ct -= 1;
                }
                if t.ready.is_empty() {
                    self.ready_tube_emptied(tube);
                }
            }
            JobState::Delayed => {
                let t = self.tubes.get_mut(tube);
                t.delayed
                    .remove(pos as usize, &mut |s, p| jobs.set_pos(s, p));
                self.counts.delayed -= 1;
            }
            JobState::Buried => {
                self.tubes.get_mut(tube).buried.remove(&deadline);
                self.counts.buried -= 1;
            }
            JobState::Reserved => {
                let reserver = jobs.take_reserver(slot);
                if let Some(c) = self
                    .conns
                    .get_mut(reserver as usize)
                    .and_then(Option::as_mut)
                {
                    let pos = pos as usize;
                    if pos < c.reserved.len() {
                        c.reserved.swap_remove(pos);
                        if let Some(&moved) = c.reserved.get(pos) {
                            jobs.set_pos(moved, pos as u32);
                        }
                    }
                }
                self.tubes.get_mut(tube).reserved_ct -= 1;
                self.counts.reserved -= 1;
            }
        }
    }

    /// Make a detached job ready and give it to a waiting connection if one can take it.
    fn make_ready(&mut self, slot: u32, now: u64) {
        let Some(job) = self.jobs.get_mut(slot) else {
            return;
        };
        job.state = JobState::Ready;
        let (tube, entry) = (
            job.tube,
            Entry {
                pri: job.pri,
                id: job.id,
                slot,
            },
        );
        let urgent = job.pri < URGENT_THRESHOLD;
        let jobs = &mut self.jobs;
        let t = self.tubes.get_mut(tube);
        t.ready.push(entry, &mut |s, p| jobs.set_pos(s, p));
        let first = t.ready.len() == 1;
        if urgent {
            t.urgent_ct += 1;
            self.counts.urgent += 1;
        }
        if first {
            t.ready_at = self.ready_tubes.len() as u32;
            self.ready_tubes.push(tube);
        }
        self.counts.ready += 1;
        self.serve_tube(tube, now);
    }

    fn make_delayed(&mut self, slot: u32, at: u64) {
        let Some(job) = self.jobs.get_mut(slot) else {
            return;
        };
        job.state = JobState::Delayed;
        job.deadline = at;
        let (tube, id) = (job.tube, job.id);
        let jobs = &mut self.jobs;
        self.tubes
            .get_mut(tube)
            .delayed
            .push(DelayEntry { key: at, id, slot }, &mut |s, p| {
                jobs.set_pos(s, p)
            });
        self.counts.delayed += 1;
        self.timers.push(at, Timer::Delay(id));
        self.compact_timers();
    }

    fn make_buried(&mut self, slot: u32) {
        let seq = self.next_seq();
        let Some(job) = self.jobs.get_mut(slot) else {
            return;
        };
        job.state = JobState::Buried;
        job.deadline = seq;
        let tube = job.tube;
        let c = self.jobs.counters_mut(slot);
        c.buries = c.buries.wrapping_add(1);
        self.tubes.get_mut(tube).buried.insert(seq, slot);
        self.counts.buried += 1;
        self.journal_bury(slot);
    }

    /// Give a detached job to `conn` as a reservation.
    fn make_reserved(&mut self, slot: u32, conn: ConnId, now: u64) -> Option<Delivery> {
        let at_pos = self.conn(conn)?.reserved.len() as u32;
        let job = self.jobs.get_mut(slot)?;
        job.state = JobState::Reserved;
        job.deadline = now + u64::from(job.ttr) * SECOND;
        job.pos = at_pos;
        let (id, tube, deadline, body) = (job.id, job.tube, job.deadline, job.body.to_bytes());
        let counters = self.jobs.counters_mut(slot);
        counters.reserves = counters.reserves.wrapping_add(1);
        counters.reserver = conn;
        if let Some(c) = self.conn_mut(conn) {
            c.reserved.push(slot);
        }
        self.tubes.get_mut(tube).reserved_ct += 1;
        self.counts.reserved += 1;
        self.journal(crate::wal::format::Record::Reserve { id });
        self.journal_hold(conn, id, deadline, false);
        self.emit(EventKind::Reserve, slot);
        self.timers.push(deadline, Timer::Ttr(id));
        self.compact_timers();
        Some(Delivery::Reserved { id, body })
    }

    /// Remove a detached job from the table and drop its tube if now unused.
    fn free_job(&mut self, slot: u32) {
        self.journal_delete(slot);
        if let Some(tube) = self.jobs.remove(slot) {
            self.tubes.get_mut(tube).jobs_ct -= 1;
            self.drop_tube_if_unused(tube);
            // A deleted delayed or reserved job leaves a stale timer behind.
            self.compact_timers();
        }
    }

    fn drop_tube_if_unused(&mut self, tube: u32) {
        if tube != self.default_tube && self.tubes.get(tube).unreferenced() {
            self.tubes.remove(tube);
            // A dropped paused tube leaves a stale unpause timer behind.
            self.compact_timers();
        }
    }

    // ----- waiting reservers ----------------------------------------------------

    /// While `tube` is unpaused and has both ready jobs and waiting connections,
    /// give its best job to its longest-waiting connection.
    fn serve_tube(&mut self, tube: u32, now: u64) {
        loop {
            let t = self.tubes.get(tube);
            if (t.waiting_ct == 0 && self.wide_waiters.is_empty()) || t.paused(now) {
                return;
            }
            let Some(top) = t.ready.peek().copied() else {
                return;
            };
            let Some(conn) = self.pop_waiter(tube) else {
                return;
            };
            self.end_wait(conn);
            self.detach(top.slot);
            if let Some(delivery) = self.make_reserved(top.slot, conn, now) {
                self.deliver(conn, delivery);
            }
        }
    }

    /// Stop a connection's wait: it no longer counts as waiting anywhere.
    fn end_wait(&mut self, conn: ConnId) {
        let Some(c) = self.conns.get_mut(conn as usize).and_then(Option::as_mut) else {
            return;
        };
        let Some(wait) = c.wait.take() else {
            return;
        };
        self.counts.waiting -= 1;
        if wait.wide {
            let entry = (conn, wait.seq);
            if let Some(i) = self.wide_waiters.iter().position(|&w| w == entry) {
                self.wide_waiters.remove(i);
            }
            return;
        }
        let conns = &self.conns;
        let Some(c) = conns.get(conn as usize).and_then(Option::as_ref) else {
            return;
        };
        for &tube in &c.watch {
            let t = self.tubes.get_mut(tube);
            t.waiting_ct -= 1;
            t.prune_waiting(|conn, seq| {
                conns
                    .get(conn as usize)
                    .and_then(Option::as_ref)
                    .and_then(|c| c.wait.as_ref())
                    .is_some_and(|w| w.seq == seq)
            });
        }
    }

    fn deliver(&mut self, conn: ConnId, delivery: Delivery) {
        if let Some(c) = self.conn_mut(conn) {
            c.mailbox = Some(delivery);
            let waker = Arc::clone(&c.waker);
            self.wakeups.push(waker);
        }
    }

    /// The earliest TTR deadline among a connection's reservations.
    fn soonest_deadline(&self, conn: ConnId) -> Option<u64> {
        let c = self.conn(conn)?;
        c.reserved
            .iter()
            .filter_map(|&s| self.jobs.get(s))
            .map(|j| j.deadline)
            .min()
    }

    /// A reservation of `conn` is within the safety margin of its deadline.
    fn deadline_soon(&self, conn: ConnId, now: u64) -> bool {
        self.soonest_deadline(conn)
            .is_some_and(|d| now >= d.saturating_sub(SECOND))
    }

    fn compact_timers(&mut self) {
        let live = (self.counts.delayed + self.counts.reserved + self.counts.waiting) as usize
            + self.tubes.len()
            + self.sessions.len();
        let (jobs, conns, tubes) = (&self.jobs, &self.conns, &self.tubes);
        self.timers.compact(live, |at, timer| match timer {
            // A job's deadline field outlives the state it was set for (a released
            // job keeps its last TTR deadline): the entry applies only in that state.
            Timer::Delay(id) => jobs
                .slot_of(id)
                .and_then(|s| jobs.get(s))
                .is_some_and(|j| j.state == JobState::Delayed && j.deadline == at),
            Timer::Ttr(id) => jobs
                .slot_of(id)
                .and_then(|s| jobs.get(s))
                .is_some_and(|j| j.state == JobState::Reserved && j.deadline == at),
            Timer::Wait(conn, seq) => conns
                .get(conn as usize)
                .and_then(Option::as_ref)
                .and_then(|c| c.wait.as_ref())
                .is_some_and(|w| w.seq == seq),
            Timer::Unpause(tube, seq) => tubes
                .try_get(tube)
                .and_then(|t| t.pause)
                .is_some_and(|p| p.seq == seq),
            Timer::Session(conn, seq) => conns
                .get(conn as usize)
                .and_then(Option::as_ref)
                .and_then(|c| c.session.as_ref())
                .is_some_and(|s| s.detached == Some(seq)),
        });
    }
}
