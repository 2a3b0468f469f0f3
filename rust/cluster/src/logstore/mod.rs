//! The Raft log storage openraft drives ([`LogStore`], a `RaftLogStorage`): the
//! newest entries kept in memory for reading and replication, older committed
//! ones read back from the files when asked for (`cache.rs`, `frames.rs`), and
//! all written to disk by the writer (`writer.rs`, files in `files.rs`): on its own
//! thread, or for a follower's append on Raft's (`ops.rs`).
//!
//! An append is readable as soon as `append` returns and reported durable by
//! the callback after the fsync that covers it (group commit). A vote is on disk
//! before `save_vote` returns. Truncation and purge are ordered after every
//! write before them, as the writer takes operations in order. The committed
//! id is written, unsynced, with whatever operation comes next (`Ops::later`).
//!
//! But for a leader's own appends. openraft 0.9's core waits for each append's
//! callback before it goes on, and a leader sends new entries to its followers
//! only after that: so its fsync and theirs would follow one another instead of
//! overlapping. An append made while this node's saved vote is a committed vote
//! for itself (it leads that term, and a follower's appends always come after
//! the save of another leader's vote) is reported at once, and becomes durable
//! with the next group commit. openraft may then count an entry committed with
//! only one follower's copy on disk; so nothing outside openraft may take
//! openraft's commit for this node's until the log is durable up to it
//! ([`LogStore::durable`]): a client's reply, a membership change's answer, and
//! the commit index sent to followers (`net/client.rs`), which decides what they
//! apply. Raft's own rule is kept: what anyone acts on as committed is on a
//! majority's disks (Ongaro's thesis, 10.2.1: the leader writes in parallel).
//!
//! Imports the codec, the types and openraft; nothing of the engine.

mod cache;
mod files;
mod frames;
mod ops;
pub mod writer;

use std::fmt::Debug;
use std::ops::RangeBounds;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::thread::JoinHandle;

use anyerror::AnyError;
use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{RaftLogReader, StorageIOError};

use self::cache::{Cache, Shared};
pub use self::cache::{CacheSize, LogReader, KEEP_BYTES};
use self::files::LogFiles;
pub use self::files::{LogError, ZEROS_AHEAD};
use self::ops::Ops;
pub use self::writer::{wait_durable, Durable, OnDisk};
use self::writer::{Op, Writer};
use crate::codec;
use crate::types::{Entry, LogId, NodeId, StorageError, TypeConfig, Vote};

/// The log's reads of committed entries back from its files (`frames.rs`), as
/// the tests steer and watch them.
#[derive(Debug, Clone)]
pub struct DiskReads(Arc<frames::Frames>);

impl DiskReads {
    /// The milliseconds each read is held back from now on (a slow disk),
    /// settable while the node runs.
    pub fn stall(&self) -> Arc<AtomicU64> {
        self.0.stall()
    }

    /// How many reads are under way now.
    pub fn under_way(&self) -> u64 {
        self.0.reading()
    }
}

/// The Raft log of one node.
#[derive(Debug)]
pub struct LogStore {
    reader: LogReader,
    /// Operations for the writer. Unbounded: openraft bounds the appends in
    /// flight, and the other operations are awaited one at a time, so the
    /// queue cannot grow without limit; a bounded one would only add a way to
    /// block the Raft core.
    ops: Arc<Ops>,
    /// The writer thread, joined on drop so a store opened again on the same
    /// directory never meets the old one still writing.
    writer: Option<JoinHandle<()>>,
    /// Torn tails cut when the log was opened.
    pub warnings: Vec<String>,
    /// Milliseconds the writer holds each group commit's fsync back (0, or
    /// what `BEANPOLE_SYNC_STALL_MS` says at open: `synced.rs`).
    stall: Arc<AtomicU64>,
    /// This node's id, once known: its own appends as leader are reported
    /// durable at once (above). None: every append waits for its fsync.
    own: Option<NodeId>,
    /// The last log id on disk, as the writer publishes it.
    durable: Durable,
}

impl LogStore {
    /// Report this node's appends as leader (of `id`) at once, before their
    /// fsync: whoever takes a commit for this node's must then wait for
    /// [`LogStore::durable`] to reach it.
    pub fn lead_without_waiting(&mut self, id: NodeId) {
        self.own = Some(id);
    }

    /// The last log id on disk, published after every group commit.
    pub fn durable(&self) -> Durable {
        self.durable.clone()
    }

    /// A reader of this log's entries, for the state machine's snapshot builds.
    pub fn reader(&self) -> LogReader {
        self.reader.clone()
    }

    /// A handle on the size of what the log holds in memory.
    pub fn cache_size(&self) -> CacheSize {
        CacheSize(Arc::clone(&self.reader.shared))
    }

    /// Keep at most about `bytes` of records in memory: committed entries
    /// before those are read back from disk when asked for (`cache.rs`;
    /// [`KEEP_BYTES`] unless set).
    pub fn keep_in_memory(&self, bytes: u64) {
        let mut cache = self.reader.shared.lock();
        cache.keep = bytes;
        cache.trim(self.durable.borrow().last.map(|l| l.index));
    }

    /// Fault injection for tests: the milliseconds each group commit's fsync
    /// is held back from now on (a slow disk), settable while the node runs;
    /// [`writer::FAIL_SYNCS`] makes them fail (a dead disk).
    pub fn sync_stall(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.stall)
    }

    /// Fault injection for tests on the reads back from disk ([`DiskReads`]).
    pub fn disk_reads(&self) -> DiskReads {
        DiskReads(Arc::clone(&self.reader.frames))
    }

    /// Open (creating) the log in `dir`, read it back, and start its writer
    /// thread (which ends once this store is dropped).
    pub fn open(dir: &Path) -> Result<LogStore, LogError> {
        LogStore::open_with(dir, true)
    }

    /// [`LogStore::open`]; with `fsync` false appends are reported durable once
    /// written to the operating system, not synced (a machine's crash can then
    /// lose what a majority acknowledged; votes are still synced).
    pub fn open_with(dir: &Path, fsync: bool) -> Result<LogStore, LogError> {
        let (mut files, loaded) = LogFiles::open(dir)?;
        let io_err = |source| LogError::Io {
            dir: dir.display().to_string(),
            source,
        };
        // What was read back may be in the page cache only (a process that
        // died without a power loss): on disk before it is published durable.
        files.sync().map_err(io_err)?;
        let mut cache = Cache::new(loaded.entries, loaded.purged, loaded.vote);
        let last = cache.last();
        // A leader saves a commit its log may not have synced yet (above): one
        // beyond the log after a power loss is taken as the log's end.
        cache.committed = match (loaded.committed, last) {
            (Some(c), Some(l)) if c.index > l.index => Some(l),
            (Some(_), None) => None,
            (c, _) => c,
        };
        // Everything read back is synced (above): what is committed of it may
        // stay on disk only.
        cache.trim(last.map(|l| l.index));
        let frames = files.frames();
        let stall = Arc::new(AtomicU64::new(crate::synced::stall_at_open()));
        let (durable_tx, durable) = tokio::sync::watch::channel(OnDisk { last, failed: None });
        let writer = Writer::new(files, Arc::clone(&stall), fsync, durable_tx);
        let ops = Arc::new(Ops::new(writer));
        let thread_ops = Arc::clone(&ops);
        let handle = std::thread::Builder::new()
            .name("beanpole-raft-log".into())
            .spawn(move || thread_ops.run())
            .map_err(|source| LogError::Io {
                dir: dir.display().to_string(),
                source,
            })?;
        Ok(LogStore {
            reader: LogReader {
                shared: Arc::new(Shared::new(cache)),
                frames,
            },
            ops,
            writer: Some(handle),
            warnings: loaded.warnings,
            stall,
            own: None,
            durable,
        })
    }

    /// Send an operation to the writer and wait for its answer.
    async fn ask(
        &self,
        make: impl FnOnce(writer::Reply) -> Op,
        err: fn(AnyError) -> StorageIOError<u64>,
    ) -> Result<(), StorageError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.ops
            .send(make(tx))
            .map_err(|e| err(AnyError::new(&e)))?;
        match rx.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(err(AnyError::new(&e)).into()),
            // The writer thread ended without answering.
            Err(_) => Err(err(AnyError::new(&ops::Stopped)).into()),
        }
    }
}

impl Drop for LogStore {
    fn drop(&mut self) {
        // The writer finishes what is queued (it is all already written or
        // small) and ends; a writer that has gone already makes the send fail.
        let _ = self.ops.send(Op::Stop);
        if let Some(handle) = self.writer.take() {
            let _ = handle.join();
        }
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        self.reader.try_get_log_entries(range).await
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogReader;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let cache = self.reader.shared.lock();
        Ok(LogState {
            last_purged_log_id: cache.purged,
            last_log_id: cache.last(),
        })
    }

    async fn get_log_reader(&mut self) -> LogReader {
        self.reader.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let mut bytes = Vec::new();
        codec::put_vote(&mut bytes, vote);
        self.ask(
            |done| Op::Meta {
                name: "vote",
                bytes,
                done: Some(done),
            },
            StorageIOError::write_vote,
        )
        .await?;
        self.reader.shared.lock().vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(self.reader.shared.lock().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        let mut bytes = Vec::new();
        codec::put_log_id(&mut bytes, committed.as_ref());
        let op = Op::Meta {
            name: "committed",
            bytes,
            done: None,
        };
        self.ops
            .later(op)
            .map_err(|e| StorageIOError::write(AnyError::new(&e)))?;
        let durable = self.durable.borrow().last.map(|l| l.index);
        let mut cache = self.reader.shared.lock();
        cache.committed = committed;
        cache.trim(durable);
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.reader.shared.lock().committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        if let Some(why) = self.durable.borrow().failed.clone() {
            // An earlier append (a leader's, reported at once) did not reach the disk.
            return Err(StorageIOError::write_logs(AnyError::error(why)).into());
        }
        let mut encoded = Vec::new();
        let mut last = None;
        let leading;
        {
            let mut cache = self.reader.shared.lock();
            leading = matches!((cache.vote, self.own), (Some(v), Some(own))
                if v.committed && v.leader_id().node_id == own);
            for entry in entries {
                last = Some(entry.log_id);
                // A clone shares the records' bytes: the writer encodes it.
                encoded.push(entry.clone());
                cache.insert(entry);
            }
        }
        let Some(last) = last else {
            // Nothing to write: durable already.
            callback.log_io_completed(Ok(()));
            return Ok(());
        };
        let done = if leading {
            callback.log_io_completed(Ok(()));
            None
        } else {
            Some(callback)
        };
        // A follower's append is written and synced here: its core waits for
        // the callback anyway, and the writer thread would cost two hand-offs.
        let here = done.is_some();
        let op = Op::Append {
            entries: encoded,
            last,
            done,
        };
        let queued = if here {
            self.ops.append_here(op).await
        } else {
            self.ops.send(op)
        };
        queued.map_err(|e| StorageIOError::write_logs(AnyError::new(&e)).into())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let keep = {
            let mut cache = self.reader.shared.lock();
            cache.cut_from(log_id.index);
            cache.last()
        };
        let index = log_id.index;
        self.ask(
            |done| Op::Truncate { index, keep, done },
            StorageIOError::write_logs,
        )
        .await
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        {
            self.reader.shared.lock().purge(log_id);
        }
        let mut id_bytes = Vec::new();
        codec::put_log_id(&mut id_bytes, Some(&log_id));
        let index = log_id.index;
        self.ask(
            |done| Op::Purge {
                index,
                id_bytes,
                done,
            },
            StorageIOError::write_logs,
        )
        .await
    }
}
