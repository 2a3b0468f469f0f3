//! The hand-over between the store and the disk: group commit.
//!
//! The store encodes records while it changes state (under its lock) and queues
//! them with [`LogPipe::submit`]. They are written by whoever needs them first:
//!
//! - a connection about to send replies calls [`LogPipe::write_through`], which
//!   writes everything queued so far, every connection's records together, straight
//!   from the connection's thread: no hand-over to another thread on the way to a
//!   reply (like beanstalkd, which writes before it replies, but one write covers
//!   the records of every connection queued meanwhile);
//! - the writer thread (`writer.rs`) does everything slow: creating and removing
//!   segments, fsync (with `-f 0` after every write, with `-f MS` on a timer), and
//!   writes that failed, which it retries while puts are refused.
//!
//! Replies wait for [`LogPipe::acked`]: with `-f 0` the synced position, otherwise the
//! written one. Nothing is ever acknowledged that is not written.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError, TryLockError};
use std::time::Instant;

use tokio::sync::{watch, Notify};

use super::buffers::BufferPool;
use super::format::Header;
use super::fs::SegmentFile;
use super::fsync::FsyncPolicy;
use crate::events::{level, EventHub, EventKind};

/// Work for the log, in order.
#[derive(Debug)]
pub enum Task {
    /// Create (preallocate) a segment and write its header.
    Create(Header),
    /// Write bytes into a segment. `end` is the log position after them.
    Write {
        seq: u64,
        offset: u64,
        bytes: Vec<u8>,
        end: u64,
    },
    /// Delete a segment compaction has emptied.
    Remove(u64),
}

/// Bytes written at an offset of a segment: (segment, offset, bytes).
pub(super) type Chunk = (u64, u64, Vec<u8>);

/// What only the current writer touches: the open segments and what is written.
pub(super) struct Core {
    pub files: BTreeMap<u64, Arc<dyn SegmentFile>>,
    /// Written but not yet synced, kept to rewrite after a failed fsync (empty
    /// with `-F`).
    pub unsynced: Vec<Chunk>,
    /// When the oldest unsynced write was made (drives `-f MS`).
    pub first_unsynced_at: Option<Instant>,
    /// Log position up to which every record is written.
    pub written: u64,
}

impl Core {
    /// Take everything written and not yet synced, for one fsync: the position
    /// it will cover, the chunks (kept to write again should it fail) and the
    /// files to sync.
    pub fn take_unsynced(&mut self) -> (u64, Vec<Chunk>, Vec<Arc<dyn SegmentFile>>) {
        let chunks = std::mem::take(&mut self.unsynced);
        self.first_unsynced_at = None;
        let mut seqs: Vec<u64> = chunks.iter().map(|c| c.0).collect();
        seqs.dedup();
        let files = seqs
            .iter()
            .filter_map(|s| self.files.get(s).cloned())
            .collect();
        (self.written, chunks, files)
    }
}

/// Where a replicated store's records go (`replicate.rs`: a cluster leader's
/// store).
pub trait Replicate: Send + Sync {
    /// The records one pass of the store made, back to back as a log segment
    /// holds them, ending at log position `end`. Called in log order with the
    /// store locked: it must hand the bytes on without blocking.
    fn propose(&self, records: Vec<u8>, end: u64);

    /// Whether no other leader can have been elected since this one last had a
    /// majority's acknowledgement (its lease). While it holds, a read needs no
    /// round of its own; once it has run out, a read-only pass journals a no-op
    /// record and replies after its commit (a read barrier).
    fn lease_valid(&self) -> bool {
        true
    }

    /// How long a reply may wait for its commit. Past it (no majority, or a
    /// stalled one) the connection is answered `INTERNAL_ERROR` in place of the
    /// pass's replies and closed: the outcome of its changes is unknown to it.
    fn commit_timeout(&self) -> Option<std::time::Duration> {
        None
    }
}

/// The log's shared state.
pub struct LogPipe {
    pub(super) policy: FsyncPolicy,
    /// Records not yet written, in log order. A std mutex: the store holds it only
    /// to append one batch, a writer only to take the whole queue; no I/O is ever
    /// done under it.
    queue: Mutex<Vec<Task>>,
    /// The writer's state. A std mutex held for the writes themselves, which is
    /// what keeps them in log order. Connection tasks only ever `try_lock` it (a
    /// connection that finds it held leaves the writing to the holder and waits
    /// for the acknowledgement), so no tokio worker blocks on it; the writer
    /// thread may hold it while it retries a failing write.
    core: Mutex<Core>,
    /// Set by anyone who needs the writer thread; it sleeps on `wake` when idle.
    kicked: AtomicBool,
    /// True while the writer thread sleeps (or is about to): only then does a kick
    /// take `signal` and notify, so a busy writer costs kickers two atomics.
    sleeping: AtomicBool,
    /// The writer thread's stop flag. A mutex + condvar pair because the thread
    /// sleeps with a timeout (the next periodic fsync) as well as on kicks.
    signal: Mutex<bool>,
    wake: Condvar,
    /// Signalled when the writer thread has made a segment (or given up on one).
    /// A condvar because a store short of preallocated space waits for it on a
    /// plain thread (see `StoreLog::admit`).
    made_lock: Mutex<()>,
    made: Condvar,
    /// Mirror of `Core::written` readable without the lock.
    written: AtomicU64,
    /// Position that replies may go out at (see the module doc), as an atomic for
    /// the fast check and as a watch channel for those who wait: many connection
    /// tasks wait for "at least N" and only the latest value matters. The channel
    /// is only sent to while somebody waits (`waiters`).
    acked: AtomicU64,
    acked_tx: watch::Sender<u64>,
    waiters: AtomicUsize,
    /// Set by [`LogPipe::close`]: waits end unacknowledged.
    closed: AtomicBool,
    /// Held while an fsync runs (on a connection's thread or the writer's): two
    /// at once could acknowledge data of a segment the other one was syncing. A
    /// std mutex: connections only `try_lock` it; the writer thread sleeps on it
    /// until a connection's fsync is done (spinning would take a core from the
    /// connections meanwhile).
    sync_turn: Mutex<()>,
    /// Set when an fsync made on a connection's thread failed: the writer thread
    /// rewrites the unsynced data before its next fsync (the kernel may have
    /// dropped the pages). The chunks that fsync covered wait in `failed`, a std
    /// mutex of its own so the failing connection never blocks on the core.
    pub(super) rewrite: AtomicBool,
    failed: Mutex<Vec<Chunk>>,
    /// The [`Failure`]s present now, one bit each; puts are refused while any is.
    /// Kept per cause so that one thing working again (an fsync) does not clear
    /// another that still fails (no room for a new segment).
    failing: AtomicU8,
    /// Highest segment sequence number created (spares included).
    pub created: AtomicU64,
    /// How many segments beyond the current one the store wants ready.
    pub want_spares: AtomicU64,
    /// The segment the store writes into now.
    pub current: AtomicU64,
    /// Write or sync errors seen (for stats and tests).
    pub errors: AtomicU64,
    /// The server's events, once a server has adopted this log (tools that open a
    /// log without a server print to stderr instead). Set once, read lock-free.
    events: OnceLock<Arc<EventHub>>,
    /// The directory, for messages.
    pub(super) dir_name: String,
    /// Buffers of durable records, for the store's next batches.
    pub buffers: BufferPool,
    /// A cluster leader's sink (`replicate.rs`): records go there instead of to
    /// segments, and the cluster acknowledges them once committed.
    replicate: Option<Arc<dyn Replicate>>,
    /// For a replicated pipe, wakes [`LogPipe::relay_acks`] on the server's
    /// runtime, which sends the acknowledged position to the waiting
    /// connections. A `Notify`: one task waits, and a wake that comes while it
    /// is busy is kept for its next wait.
    relay: Option<Notify>,
}

impl std::fmt::Debug for LogPipe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogPipe")
            .field("policy", &self.policy)
            .field("written", &self.written)
            .field("acked", &self.acked)
            .finish_non_exhaustive()
    }
}

impl LogPipe {
    pub fn new(policy: FsyncPolicy, dir_name: String) -> LogPipe {
        LogPipe {
            policy,
            queue: Mutex::new(Vec::new()),
            core: Mutex::new(Core {
                files: BTreeMap::new(),
                unsynced: Vec::new(),
                first_unsynced_at: None,
                written: 0,
            }),
            kicked: AtomicBool::new(false),
            sleeping: AtomicBool::new(false),
            signal: Mutex::new(false),
            wake: Condvar::new(),
            made_lock: Mutex::new(()),
            made: Condvar::new(),
            written: AtomicU64::new(0),
            acked: AtomicU64::new(0),
            acked_tx: watch::Sender::new(0),
            waiters: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            sync_turn: Mutex::new(()),
            rewrite: AtomicBool::new(false),
            failed: Mutex::new(Vec::new()),
            failing: AtomicU8::new(0),
            created: AtomicU64::new(0),
            want_spares: AtomicU64::new(1),
            current: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            events: OnceLock::new(),
            dir_name,
            buffers: BufferPool::default(),
            replicate: None,
            relay: None,
        }
    }

    /// A pipe whose records go to `sink` (see `replicate.rs`): nothing is written
    /// here; [`LogPipe::acknowledge`] is called by whoever learns a position is
    /// committed.
    pub fn replicated(sink: Arc<dyn Replicate>, name: String) -> LogPipe {
        LogPipe {
            replicate: Some(sink),
            relay: Some(Notify::new()),
            ..LogPipe::new(FsyncPolicy::Never, name)
        }
    }

    /// For a replicated pipe, whether the leader's lease holds (see
    /// `Replicate::lease_valid`); always true otherwise.
    pub fn lease_valid(&self) -> bool {
        self.replicate.as_ref().map_or(true, |s| s.lease_valid())
    }

    /// For a replicated pipe, how long a reply may wait for its commit.
    pub fn commit_timeout(&self) -> Option<std::time::Duration> {
        self.replicate.as_ref().and_then(|s| s.commit_timeout())
    }

    /// Whether records go to a cluster rather than to segment files.
    pub fn is_replicated(&self) -> bool {
        self.replicate.is_some()
    }

    /// Queue a batch of tasks; tasks only the writer thread can do wake it.
    /// Writes stay separate here (no copying under the queue's lock): whoever
    /// writes them writes those that follow each other in a segment with one
    /// vectored write.
    pub fn submit(&self, tasks: impl IntoIterator<Item = Task>) {
        if let Some(sink) = &self.replicate {
            // No segments: only the records matter, in the order submitted.
            for task in tasks {
                if let Task::Write { bytes, end, .. } = task {
                    sink.propose(bytes, end);
                }
            }
            return;
        }
        let mut needs_thread = false;
        {
            let mut q = lock(&self.queue);
            for task in tasks {
                needs_thread |= !matches!(task, Task::Write { .. });
                q.push(task);
            }
        }
        if needs_thread {
            self.kick();
        }
    }

    /// Make sure everything queued up to `position` gets written, writing it from
    /// this thread if no other writer is at work. Returns true if a reply waiting
    /// for `position` may go out now; otherwise wait with [`LogPipe::wait_acked`].
    pub fn write_through(&self, position: u64) -> bool {
        if self.acked.load(Ordering::SeqCst) >= position {
            return true;
        }
        if self.replicate.is_some() {
            // Nothing to write here: the cluster acknowledges the commit.
            return false;
        }
        if self.written.load(Ordering::SeqCst) < position {
            if self.failing() {
                self.kick();
                return false;
            }
            match self.core.try_lock() {
                Ok(mut core) => {
                    if !self.drain_inline(&mut core) {
                        self.kick();
                    }
                }
                Err(TryLockError::Poisoned(p)) => {
                    if !self.drain_inline(&mut p.into_inner()) {
                        self.kick();
                    }
                }
                // Somebody else is writing; what it leaves is the thread's.
                Err(TryLockError::WouldBlock) => {
                    self.kick();
                    return false;
                }
            }
        }
        if self.policy == FsyncPolicy::Always {
            // Sync here if no fsync is running (no hand-over to the writer thread
            // and back on the way to the reply); otherwise the running one's
            // owner, or the writer thread after it, acknowledges.
            if self.written.load(Ordering::SeqCst) >= position && !self.failing() {
                self.sync_inline();
            }
            if self.acked.load(Ordering::SeqCst) >= position {
                return true;
            }
            self.kick();
            return false;
        }
        self.acked.load(Ordering::SeqCst) >= position
    }

    /// With `-f 0`: fsync what is written and acknowledge it, unless an fsync is
    /// running already. A failure is left to the writer thread (which rewrites
    /// the data and retries) with the data kept as unsynced.
    fn sync_inline(&self) {
        let _turn = match self.sync_turn.try_lock() {
            Ok(turn) => turn,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return,
        };
        // A held core or data to write again first: the writer thread's job.
        let taken = match self.core.try_lock() {
            Ok(mut core) if !self.rewrite.load(Ordering::SeqCst) => Some(core.take_unsynced()),
            _ => None,
        };
        let Some((target, chunks, files)) = taken else {
            return;
        };
        match files.iter().try_for_each(|f| f.sync()) {
            Ok(()) => {
                self.acknowledge(target);
                self.recycle(chunks);
            }
            Err(e) => {
                lock(&self.failed).extend(chunks);
                self.rewrite.store(true, Ordering::SeqCst);
                self.report(Failure::Sync, &format!("fsync failed: {e}"));
            }
        }
    }

    /// Chunks whose fsync failed on a connection's thread, oldest first, to be
    /// written again ahead of everything unsynced since.
    pub(super) fn take_failed(&self) -> Vec<Chunk> {
        std::mem::take(&mut *lock(&self.failed))
    }

    /// Hold the fsync turn, as a connection's fsync does while it runs.
    #[cfg(test)]
    pub(super) fn hold_sync_turn(&self) -> MutexGuard<'_, ()> {
        lock(&self.sync_turn)
    }

    /// Run `f` as the only fsync (waiting for one that runs on a connection's
    /// thread to finish first). For the writer thread.
    pub(super) fn exclusive_sync<T>(&self, f: impl FnOnce() -> T) -> T {
        let _turn = lock(&self.sync_turn);
        f()
    }

    /// Wait until `position` is acknowledged. False if the log has stopped.
    pub async fn wait_acked(&self, rx: &mut watch::Receiver<u64>, position: u64) -> bool {
        // Register first, then look: a writer that advances the position after
        // this look sees the registration and sends.
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let done = self.acked.load(Ordering::SeqCst) >= position
            || (rx
                .wait_for(|&a| a >= position || self.closed.load(Ordering::SeqCst))
                .await
                .is_ok()
                && self.acked.load(Ordering::SeqCst) >= position);
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        done
    }

    /// No position is acknowledged any more (a cluster leader's term has ended):
    /// every wait ends now, unacknowledged, and so do later ones.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.acked_tx
            .send_replace(self.acked.load(Ordering::SeqCst));
    }

    /// A receiver for the acknowledged log position.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.acked_tx.subscribe()
    }

    /// The acknowledged log position.
    pub fn acked(&self) -> u64 {
        self.acked.load(Ordering::SeqCst)
    }

    /// Raise the acknowledged position (written or synced, by policy; for a
    /// replicated pipe, committed by the cluster).
    ///
    /// A replicated pipe's commits are learnt on another runtime's thread, and
    /// waking each waiting connection from there costs a system call each (a
    /// task woken from outside a single-thread runtime wakes its thread), so
    /// they wake only the relay, which wakes the connections from the server's
    /// own thread.
    pub fn acknowledge(&self, position: u64) {
        if self.acked.fetch_max(position, Ordering::SeqCst) < position
            && self.waiters.load(Ordering::SeqCst) > 0
        {
            match &self.relay {
                Some(relay) => relay.notify_one(),
                None => {
                    self.acked_tx.send_replace(position);
                }
            }
        }
    }

    /// For a replicated pipe, run on the server's runtime while it serves:
    /// passes each acknowledged position on to the waiting connections. Returns
    /// at once for any other pipe.
    pub async fn relay_acks(&self) {
        let Some(relay) = &self.relay else { return };
        loop {
            relay.notified().await;
            self.acked_tx
                .send_replace(self.acked.load(Ordering::SeqCst));
        }
    }

    /// Write queued records from the caller's thread until the queue is empty or a
    /// task needs the writer thread (a segment to create or remove, or a write that
    /// failed). Returns false if something was left for the thread.
    fn drain_inline(&self, core: &mut Core) -> bool {
        loop {
            let tasks = std::mem::take(&mut *lock(&self.queue));
            if tasks.is_empty() {
                return true;
            }
            let mut rest = tasks.into_iter().peekable();
            while let Some(task) = rest.next() {
                let Task::Write {
                    seq,
                    offset,
                    bytes,
                    end,
                } = task
                else {
                    self.requeue(task, rest);
                    return false;
                };
                // The writes that continue this one in its segment go out with it.
                let mut run = vec![(offset, bytes, end)];
                let mut next = offset + run[0].1.len() as u64;
                while let Some(Task::Write {
                    seq: s, offset: o, ..
                }) = rest.peek()
                {
                    if *s != seq || *o != next {
                        break;
                    }
                    let Some(Task::Write {
                        offset, bytes, end, ..
                    }) = rest.next()
                    else {
                        break;
                    };
                    next = offset + bytes.len() as u64;
                    run.push((offset, bytes, end));
                }
                let result = match core.files.get(&seq) {
                    Some(file) => {
                        let parts: Vec<&[u8]> = run.iter().map(|(_, b, _)| b.as_slice()).collect();
                        file.write_all_vectored_at(offset, &parts)
                    }
                    None => Err(std::io::Error::other("segment not created yet")),
                };
                let end = run.last().map_or(0, |r| r.2);
                if let Err(e) = result {
                    if core.files.contains_key(&seq) {
                        self.report(Failure::Write, &format!("write failed: {e}; retrying"));
                    }
                    // Positioned writes: the whole run is written again later.
                    let mut run = run.into_iter().map(|(offset, bytes, end)| Task::Write {
                        seq,
                        offset,
                        bytes,
                        end,
                    });
                    if let Some(first) = run.next() {
                        self.requeue(first, run.chain(rest));
                    }
                    return false;
                }
                let chunks = run
                    .into_iter()
                    .map(|(offset, bytes, _)| (seq, offset, bytes));
                self.wrote(core, chunks, end);
            }
        }
    }

    /// Book a completed write (by a connection or the writer thread): publish the
    /// written position, acknowledge it unless `-f 0` waits for the fsync, and
    /// keep the bytes until they are synced.
    pub(super) fn wrote(&self, core: &mut Core, chunks: impl IntoIterator<Item = Chunk>, end: u64) {
        if self.failing.load(Ordering::Relaxed) & Failure::Write as u8 != 0 {
            self.clear_failure(&[Failure::Write]);
        }
        core.written = core.written.max(end);
        self.written.store(core.written, Ordering::SeqCst);
        if self.policy != FsyncPolicy::Always {
            self.acknowledge(core.written);
        }
        if self.policy == FsyncPolicy::Never {
            self.recycle(chunks);
        } else {
            let first = core.first_unsynced_at.is_none();
            core.first_unsynced_at.get_or_insert_with(Instant::now);
            core.unsynced.extend(chunks);
            if first && matches!(self.policy, FsyncPolicy::Every(_)) {
                // The periodic fsync's timer starts now.
                self.kick();
            }
        }
    }

    /// Chunks whose records are durable: their buffers go back to the pool.
    pub(super) fn recycle(&self, chunks: impl IntoIterator<Item = Chunk>) {
        self.buffers.give(chunks.into_iter().map(|c| c.2));
    }

    /// Put `task` and `rest` back at the front of the queue, before anything
    /// queued meanwhile.
    fn requeue(&self, task: Task, rest: impl Iterator<Item = Task>) {
        let mut q = lock(&self.queue);
        let later = std::mem::take(&mut *q);
        q.push(task);
        q.extend(rest);
        q.extend(later);
    }

    /// Take the whole queue (the caller holds the core).
    pub(super) fn take_queue(&self) -> Vec<Task> {
        std::mem::take(&mut *lock(&self.queue))
    }

    pub(super) fn lock_core(&self) -> MutexGuard<'_, Core> {
        lock(&self.core)
    }

    pub(super) fn written(&self) -> u64 {
        self.written.load(Ordering::SeqCst)
    }

    /// Wake the writer thread (cheap when it is busy anyway).
    pub fn kick(&self) {
        self.kicked.store(true, Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) {
            let _g = lock(&self.signal);
            self.wake.notify_one();
        }
    }

    /// Sleep until kicked or stopped, or for at most `timeout`. Returns the stop flag.
    pub(super) fn sleep(&self, timeout: std::time::Duration) -> bool {
        let mut stop = lock(&self.signal);
        let deadline = Instant::now() + timeout;
        loop {
            self.sleeping.store(true, Ordering::SeqCst);
            if *stop || self.kicked.swap(false, Ordering::SeqCst) {
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            stop = self
                .wake
                .wait_timeout(stop, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        self.sleeping.store(false, Ordering::SeqCst);
        *stop
    }

    /// Wait (at most `timeout`) until a segment beyond `created` exists. False if
    /// none came, or the log is failing.
    pub fn wait_for_segment(&self, created: u64, timeout: std::time::Duration) -> bool {
        self.kick();
        let deadline = Instant::now() + timeout;
        let mut guard = lock(&self.made_lock);
        loop {
            if self.created.load(Ordering::SeqCst) > created {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if self.failing() || left.is_zero() {
                return false;
            }
            guard = self
                .made
                .wait_timeout(guard, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// The writer made segment `seq` (or failed to: `report` calls this too).
    pub(super) fn segment_made(&self, seq: Option<u64>) {
        if let Some(seq) = seq {
            self.created.fetch_max(seq, Ordering::SeqCst);
        }
        let _g = lock(&self.made_lock);
        self.made.notify_all();
    }

    /// Ask the writer to finish what is queued, sync, and exit.
    pub fn stop(&self) {
        *lock(&self.signal) = true;
        self.wake.notify_one();
    }

    pub fn failing(&self) -> bool {
        self.failing.load(Ordering::Relaxed) != 0
    }

    /// Report log errors and recoveries to the server's events from now on.
    pub fn set_events(&self, hub: Arc<EventHub>) {
        let _ = self.events.set(hub);
    }

    pub(super) fn report(&self, cause: Failure, what: &str) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if self.failing.fetch_or(cause as u8, Ordering::SeqCst) == 0 {
            self.segment_made(None);
            let line = format!(
                "log in {}: {what}; puts are refused until it recovers",
                self.dir_name
            );
            match self.events.get() {
                Some(hub) => {
                    hub.server_event(EventKind::LogError, || Some(what.to_owned()));
                    hub.log(level::ERROR, || line);
                }
                None => eprintln!("beanpole: {line}"),
            }
        }
    }

    /// `causes` work again; the log recovers once nothing fails.
    pub(super) fn clear_failure(&self, causes: &[Failure]) {
        let bits = causes.iter().fold(0, |b, c| b | *c as u8);
        let before = self.failing.fetch_and(!bits, Ordering::SeqCst);
        if before != 0 && before & !bits == 0 {
            let line = format!("log in {}: recovered", self.dir_name);
            match self.events.get() {
                Some(hub) => {
                    hub.server_event(EventKind::LogRecovered, || None);
                    hub.log(level::WARNING, || line);
                }
                None => eprintln!("beanpole: {line}"),
            }
        }
    }
}

/// What can make the log fail (a bit each in `LogPipe::failing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Failure {
    Write = 1,
    Sync = 2,
    /// No room to preallocate the next segment.
    Space = 4,
}

/// Lock a std mutex, ignoring poisoning: every holder leaves the data consistent
/// before anything can panic.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
