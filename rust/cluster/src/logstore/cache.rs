//! What the log keeps in memory, and reading entries for openraft: the newest
//! entries in memory, older committed ones read back from the segment files
//! (`frames.rs`).
//!
//! Every entry appended stays in memory until it is committed and on disk;
//! after that the oldest go once the entries in memory hold more records than
//! [`KEEP_BYTES`] (a node's `log_cache_bytes`), never the last one (whose id is
//! the log's end). What a follower that is behind or a restart's re-apply
//! asks for from before that is read from the files. So the log's memory is
//! bounded by that figure, the entries not yet committed and a few bytes for
//! each entry on disk only (`Older`), whatever the size of the log between
//! snapshots (which the snapshot policy bounds by the
//! state's size, `node/snapshots.rs`).

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, Mutex, MutexGuard};

use anyerror::AnyError;
use openraft::{RaftLogReader, StorageIOError};

use super::frames::Frames;
use crate::types::{Entry, LogId, StorageError, TypeConfig, Vote};

/// The records' bytes kept in memory by default before committed entries are
/// read back from disk instead.
pub const KEEP_BYTES: u64 = 16 << 20;
/// The most entries, and bytes of their frames, one replication read takes from
/// disk (but one entry, however large; openraft asks again for the rest).
const DISK_BATCH: usize = 256;
const DISK_BATCH_BYTES: u64 = 8 << 20;

/// What the log holds in memory.
#[derive(Debug)]
pub(super) struct Cache {
    pub entries: BTreeMap<u64, Entry>,
    /// The records' bytes of `entries`.
    pub bytes: u64,
    /// The entries after the purged one and before `entries`, on disk only.
    older: Older,
    /// The records' bytes `entries` keeps before its committed ones go.
    pub keep: u64,
    pub purged: Option<LogId>,
    pub vote: Option<Vote>,
    pub committed: Option<LogId>,
}

/// The records' bytes an entry holds in memory.
fn entry_bytes(entry: &Entry) -> u64 {
    match &entry.payload {
        openraft::EntryPayload::Normal(batch) => batch.records.len() as u64,
        _ => 0,
    }
}

impl Cache {
    /// The log read back at open, the entries after the purge in order.
    pub fn new(entries: Vec<Entry>, purged: Option<LogId>, vote: Option<Vote>) -> Cache {
        let mut cache = Cache {
            entries: BTreeMap::new(),
            bytes: 0,
            older: Older::default(),
            keep: KEEP_BYTES,
            purged,
            vote,
            committed: None,
        };
        for entry in entries {
            cache.insert(entry);
        }
        cache
    }

    /// Add (or replace) an entry.
    pub fn insert(&mut self, entry: Entry) {
        self.bytes += entry_bytes(&entry);
        if let Some(old) = self.entries.insert(entry.log_id.index, entry) {
            self.bytes -= entry_bytes(&old);
        }
    }

    /// The id of the log's last entry (or the purged one).
    pub fn last(&self) -> Option<LogId> {
        let in_memory = self.entries.values().next_back().map(|e| e.log_id);
        in_memory.or_else(|| self.older.last()).or(self.purged)
    }

    /// Drop the entries from `index` on.
    pub fn cut_from(&mut self, index: u64) {
        let cut = self.entries.split_off(&index);
        self.bytes -= cut.values().map(entry_bytes).sum::<u64>();
        self.older.cut_from(index);
    }

    /// Drop the entries up to `log_id`, which is now the purged one.
    pub fn purge(&mut self, log_id: LogId) {
        self.entries = self.entries.split_off(&(log_id.index + 1));
        self.bytes = self.entries.values().map(entry_bytes).sum();
        self.older.purge(log_id.index);
        self.purged = Some(log_id);
    }

    /// Leave the oldest entries on disk only while more than `keep` bytes of
    /// records are in memory: those committed and at or before `durable` (the
    /// last index on disk), never the last entry.
    pub fn trim(&mut self, durable: Option<u64>) {
        let Some(upto) = self.committed.map(|c| c.index).min(durable) else {
            return;
        };
        while self.bytes > self.keep && self.entries.len() > 1 {
            let Some(entry) = self.entries.first_entry() else {
                break;
            };
            if *entry.key() > upto {
                break;
            }
            let entry = entry.remove();
            let n = entry_bytes(&entry);
            self.bytes -= n;
            self.older.push(entry.log_id, n);
        }
    }

    /// The records' bytes of every entry after `index` (all for None), in
    /// memory or not.
    pub fn bytes_after(&self, index: Option<u64>) -> u64 {
        let Some(index) = index else {
            return self.bytes + self.older.bytes;
        };
        let in_memory: u64 = self
            .entries
            .range(index + 1..)
            .map(|(_, e)| entry_bytes(e))
            .sum();
        in_memory + self.older.bytes_after(index)
    }
}

/// The entries on disk only (after the purged one, before those in memory),
/// in little memory: each one's records' bytes, and where each leader's run of
/// them starts (an entry's id is its leader's and its index).
#[derive(Debug, Default)]
struct Older {
    /// Index of the first.
    first: u64,
    /// Each one's records' bytes (a frame holds less than 4 GiB).
    sizes: VecDeque<u32>,
    /// The id of the first entry of each run with one leader.
    runs: VecDeque<LogId>,
    /// The sum of `sizes`.
    bytes: u64,
}

impl Older {
    /// The first one's index.
    fn first(&self) -> Option<u64> {
        (!self.sizes.is_empty()).then_some(self.first)
    }

    /// The index after the last one.
    fn end(&self) -> u64 {
        self.first + self.sizes.len() as u64
    }

    /// The last one's id.
    fn last(&self) -> Option<LogId> {
        let run = self.runs.back().filter(|_| !self.sizes.is_empty())?;
        Some(LogId::new(run.leader_id, self.end() - 1))
    }

    /// Add the entry after the last one (the first, when empty).
    fn push(&mut self, id: LogId, bytes: u64) {
        if self.sizes.is_empty() {
            self.first = id.index;
            self.runs.clear();
        }
        if self
            .runs
            .back()
            .map_or(true, |run| run.leader_id != id.leader_id)
        {
            self.runs.push_back(id);
        }
        self.sizes
            .push_back(u32::try_from(bytes).unwrap_or(u32::MAX));
        self.bytes += bytes;
    }

    /// Drop those from `index` on.
    fn cut_from(&mut self, index: u64) {
        while self.end() > index.max(self.first) {
            if let Some(n) = self.sizes.pop_back() {
                self.bytes -= u64::from(n);
            }
        }
        while self.runs.back().is_some_and(|run| run.index >= index) {
            self.runs.pop_back();
        }
    }

    /// Drop those up to `index`.
    fn purge(&mut self, index: u64) {
        while !self.sizes.is_empty() && self.first <= index {
            if let Some(n) = self.sizes.pop_front() {
                self.bytes -= u64::from(n);
            }
            self.first += 1;
        }
        while self.runs.len() > 1 && self.runs[1].index <= self.first {
            self.runs.pop_front();
        }
    }

    /// The records' bytes of those after `index`, summed from the nearer end.
    fn bytes_after(&self, index: u64) -> u64 {
        if index < self.first {
            return self.bytes;
        }
        let upto = usize::try_from(index + 1 - self.first).unwrap_or(usize::MAX);
        if upto >= self.sizes.len() {
            return 0;
        }
        if upto <= self.sizes.len() / 2 {
            let before: u64 = self.sizes.iter().take(upto).map(|&n| u64::from(n)).sum();
            self.bytes - before
        } else {
            self.sizes.iter().skip(upto).map(|&n| u64::from(n)).sum()
        }
    }
}

/// The in-memory side, shared by the store and its readers (replication tasks).
/// A std mutex: held only to copy entries in or out, never across an await or
/// any I/O, so an async lock would only add cost.
#[derive(Debug)]
pub(super) struct Shared {
    cache: Mutex<Cache>,
}

impl Shared {
    pub fn new(cache: Cache) -> Shared {
        Shared {
            cache: Mutex::new(cache),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, Cache> {
        // A panic while holding it leaves plain data: go on with it.
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// How many bytes of records the log holds, readable while openraft owns the
/// store (the node snapshots when it grows too large).
#[derive(Debug, Clone)]
pub struct CacheSize(pub(super) Arc<Shared>);

impl CacheSize {
    /// The records' bytes held in memory.
    pub fn bytes(&self) -> u64 {
        self.0.lock().bytes
    }

    /// The bytes of records of the entries after `index` (all of them for
    /// None), in memory or on disk only: what a snapshot at `index` does not
    /// cover. Those at or before it are few once openraft has purged behind a
    /// snapshot.
    pub fn bytes_after(&self, index: Option<u64>) -> u64 {
        self.0.lock().bytes_after(index)
    }
}

/// Reads entries for replication and for the state machine's apply.
#[derive(Debug, Clone)]
pub struct LogReader {
    pub(super) shared: Arc<Shared>,
    pub(super) frames: Arc<Frames>,
}

impl LogReader {
    /// The entries of `from..to` there are, from disk as far as they are no
    /// longer in memory; at most `disk_limit` of those, and `disk_bytes` of
    /// their frames (but one).
    ///
    /// The disk is read on the runtime's blocking pool, not on the thread that
    /// asks: that is the node's Raft thread, which also sends every follower's
    /// heartbeats and, on a leader, serves its clients; a follower far behind
    /// on a slow disk would otherwise stall them all for each read.
    async fn read(
        &self,
        from: u64,
        to: u64,
        disk_limit: usize,
        disk_bytes: u64,
    ) -> std::io::Result<Vec<Entry>> {
        let (disk, in_memory) = {
            let cache = self.shared.lock();
            let memory_from = match cache.entries.keys().next() {
                Some(&first) => first,
                None => cache.last().map_or(0, |l| l.index + 1),
            };
            let disk = cache.older.first().map(|first| {
                let stop = to.min(memory_from);
                let start = from.max(first);
                (start, stop.min(start.saturating_add(disk_limit as u64)))
            });
            let start = from.max(memory_from);
            let in_memory: Vec<Entry> = if start < to {
                cache
                    .entries
                    .range(start..to)
                    .map(|(_, e)| e.clone())
                    .collect()
            } else {
                Vec::new()
            };
            (disk.filter(|(start, stop)| start < stop), in_memory)
        };
        let Some((start, stop)) = disk else {
            return Ok(in_memory);
        };
        let frames = Arc::clone(&self.frames);
        let mut out = tokio::task::spawn_blocking(move || frames.read(start, stop, disk_bytes))
            .await
            .map_err(std::io::Error::other)??;
        // Whatever follows goes only after the whole run from disk: a run cut
        // short (by the limit, or a purge meanwhile) ends the answer.
        let whole = out.last().map(|e| e.log_id.index + 1) == Some(stop);
        let follows = in_memory.first().map(|e| e.log_id.index) == Some(stop);
        if whole && follows {
            out.extend(in_memory);
        }
        Ok(out)
    }
}

/// The first index and the index past the last of `range`.
fn bounds<RB: RangeBounds<u64>>(range: &RB) -> (u64, u64) {
    let from = match range.start_bound() {
        Bound::Included(&i) => i,
        Bound::Excluded(&i) => i.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let to = match range.end_bound() {
        Bound::Included(&i) => i.saturating_add(1),
        Bound::Excluded(&i) => i,
        Bound::Unbounded => u64::MAX,
    };
    (from, to)
}

fn read_failed(e: std::io::Error) -> StorageError {
    StorageIOError::read_logs(AnyError::new(&e)).into()
}

impl RaftLogReader<TypeConfig> for LogReader {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let (from, to) = bounds(&range);
        self.read(from, to, usize::MAX, u64::MAX)
            .await
            .map_err(read_failed)
    }

    async fn limited_get_log_entries(
        &mut self,
        start: u64,
        end: u64,
    ) -> Result<Vec<Entry>, StorageError> {
        self.read(start, end, DISK_BATCH, DISK_BATCH_BYTES)
            .await
            .map_err(read_failed)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use openraft::{CommittedLeaderId, EntryPayload};

    use super::super::files::LogFiles;
    use super::*;
    use crate::codec;
    use crate::types::Batch;

    fn log_id(index: u64) -> LogId {
        LogId::new(CommittedLeaderId::new(2, 1), index)
    }

    /// Entry `index`, its records computed from the index (1,000 bytes).
    fn entry(index: u64) -> Entry {
        let records: Vec<u8> = (0..1000u64).map(|i| (i * 7 + index) as u8).collect();
        Entry {
            log_id: log_id(index),
            payload: EntryPayload::Normal(Batch {
                at: index as i64,
                records: Bytes::from(records),
            }),
        }
    }

    /// A log of entries 1..=n written to segment files (synced), and a reader
    /// over them with all of them in memory, committed up to `committed`.
    fn written(
        dir: &std::path::Path,
        n: u64,
        committed: u64,
    ) -> Result<LogReader, Box<dyn std::error::Error>> {
        let (mut files, _) = LogFiles::open(dir)?;
        for i in 1..=n {
            files.append_with(i, |out| codec::put_entry(out, &entry(i)))?;
        }
        files.sync()?;
        let mut cache = Cache::new((1..=n).map(entry).collect(), None, None);
        cache.committed = Some(log_id(committed));
        Ok(LogReader {
            shared: Arc::new(Shared::new(cache)),
            frames: files.frames(),
        })
    }

    fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
        let rt = tokio::runtime::Builder::new_current_thread().build();
        rt.expect("a runtime").block_on(f)
    }

    fn indexes(entries: &[Entry]) -> Vec<u64> {
        entries.iter().map(|e| e.log_id.index).collect()
    }

    #[test]
    fn committed_entries_past_the_bound_are_read_back_from_disk_as_written(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let reader = written(dir.path(), 50, 40)?;
        {
            let mut cache = reader.shared.lock();
            cache.keep = 5_000;
            // Nothing is on disk as far as the node knows: nothing goes.
            cache.trim(None);
            assert_eq!(cache.bytes, 50_000);
            cache.trim(Some(30));
            assert_eq!(
                cache.entries.keys().next(),
                Some(&31),
                "up to the disk's end"
            );
            cache.trim(Some(50));
            // Down to the bound, but never past the commit.
            assert_eq!(cache.entries.keys().next(), Some(&41));
            assert_eq!(cache.bytes, 10_000);
            assert_eq!(cache.bytes_after(None), 50_000, "memory and disk");
            assert_eq!(cache.bytes_after(Some(35)), 15_000);
            assert_eq!(cache.last(), Some(log_id(50)));
        }
        let mut reader = reader;
        let all = block_on(reader.try_get_log_entries(..))?;
        assert_eq!(indexes(&all), (1..=50).collect::<Vec<_>>());
        for (got, i) in all.iter().zip(1..) {
            assert_eq!(got, &entry(i), "entry {i} as written");
        }
        let some = block_on(reader.try_get_log_entries(38..=42))?;
        assert_eq!(indexes(&some), [38, 39, 40, 41, 42], "across the edge");
        let limited = block_on(reader.limited_get_log_entries(1, 51))?;
        assert_eq!(
            indexes(&limited),
            indexes(&all),
            "within one batch from disk"
        );
        let short = block_on(reader.read(1, 51, 10, u64::MAX))?;
        assert_eq!(
            indexes(&short),
            (1..=10).collect::<Vec<_>>(),
            "from disk alone, when the run from disk is limited"
        );
        // Each frame is 1,000 bytes of records and its headers: 3,500 bytes
        // take 3 frames, and a limit below one frame still takes one.
        let by_bytes = block_on(reader.read(1, 51, usize::MAX, 3_500))?;
        assert_eq!(indexes(&by_bytes), [1, 2, 3], "limited by bytes");
        let one = block_on(reader.read(7, 51, usize::MAX, 1))?;
        assert_eq!(indexes(&one), [7], "never none");
        Ok(())
    }

    #[test]
    fn what_is_on_disk_only_keeps_each_ones_id_and_size_in_a_few_bytes() {
        let id = |term: u64, index: u64| LogId::new(CommittedLeaderId::new(term, 1), index);
        let mut older = Older::default();
        assert_eq!((older.first(), older.last()), (None, None));
        // Entries 5..=14: terms 2, 2, 3 (x5), 4 (x3); entry i holds 10 * i bytes.
        let term = |i: u64| match i {
            5..=6 => 2,
            7..=11 => 3,
            _ => 4,
        };
        for i in 5..=14 {
            older.push(id(term(i), i), 10 * i);
        }
        assert_eq!(older.runs.len(), 3, "one run per leader");
        assert_eq!((older.first(), older.last()), (Some(5), Some(id(4, 14))));
        let after = |k: u64| (k + 1..=14).map(|i| 10 * i).sum::<u64>();
        for k in 0..=15 {
            assert_eq!(older.bytes_after(k), after(k.max(4)), "after {k}");
        }
        older.cut_from(12);
        assert_eq!(
            older.last(),
            Some(id(3, 11)),
            "the cut reaches back into term 3"
        );
        older.cut_from(7);
        assert_eq!(older.last(), Some(id(2, 6)));
        older.push(id(5, 7), 70);
        assert_eq!(older.last(), Some(id(5, 7)));
        older.purge(6);
        assert_eq!((older.first(), older.last()), (Some(7), Some(id(5, 7))));
        assert_eq!(older.runs.len(), 1, "runs before the first are dropped");
        assert_eq!(older.bytes, 70);
        older.purge(9);
        assert_eq!((older.first(), older.last(), older.bytes), (None, None, 0));
        older.push(id(6, 10), 1);
        assert_eq!((older.first(), older.last()), (Some(10), Some(id(6, 10))));
    }

    #[test]
    fn a_purge_and_a_cut_reach_what_is_on_disk_only() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let mut reader = written(dir.path(), 30, 30)?;
        {
            let mut cache = reader.shared.lock();
            cache.keep = 0;
            cache.trim(Some(30));
            assert_eq!(cache.entries.len(), 1, "the last entry stays");
            cache.purge(log_id(10));
            assert_eq!(cache.bytes_after(None), 20_000);
        }
        let after = block_on(reader.try_get_log_entries(..))?;
        assert_eq!(indexes(&after), (11..=30).collect::<Vec<_>>());
        {
            let mut cache = reader.shared.lock();
            cache.cut_from(21);
            assert_eq!(cache.last(), Some(log_id(20)), "the end is on disk only");
            assert!(cache.entries.is_empty());
            assert_eq!(cache.bytes_after(Some(15)), 5_000);
            cache.purge(log_id(20));
            assert_eq!(cache.last(), Some(log_id(20)), "the purged id");
            assert_eq!(cache.bytes_after(None), 0);
        }
        Ok(())
    }
}
