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
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Instant;

use tokio::sync::{watch, Notify};

use super::buffers::BufferPool;
use super::format::Header;
use super::fs::SegmentFile;
use super::fsync::FsyncPolicy;
use crate::events::EventHub;

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
    /// For a replicated pipe: the highest position handed to the sink, and the
    /// highest one given up on, not committed within the commit timeout of
    /// being handed over (`acks.rs`, [`LogPipe::relay_acks`]).
    proposed: AtomicU64,
    expired: AtomicU64,
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
            proposed: AtomicU64::new(0),
            expired: AtomicU64::new(0),
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
                    self.proposed.fetch_max(end, Ordering::AcqRel);
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

mod acks;

pub use acks::Acked;
mod inline;
mod thread;

#[cfg(test)]
mod tests;
