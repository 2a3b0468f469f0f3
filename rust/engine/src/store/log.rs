//! The store's side of the write-ahead log: which segment and offset each record
//! goes to, the space reserved for deletes, per-segment live counts for
//! compaction, and the batches queued for writing.
//!
//! Placement is decided here, under the store lock, because a job's segment (its
//! `file` in stats-job) must be known when its record is made. The writer thread
//! only writes bytes where it is told.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::wal::decode::JobRef;
use crate::wal::format::{encode_outcome, Header, Record, DELETE_RECORD_LEN, HEADER_LEN};
use crate::wal::pipe::{LogPipe, Task};
use crate::wal::writer::{segment_capacity, wall_now};
use crate::wal::OpenedLog;

/// Longest wait of a write for the writer thread to preallocate a segment.
const SPARE_WAIT: Duration = Duration::from_secs(1);
/// Bound of the capacity a new batch starts with, so one odd huge batch does not
/// make every later one hold that much memory.
const BATCH_HINT_MAX: usize = 1 << 20;

/// Bookkeeping for one log directory.
#[derive(Debug)]
pub struct StoreLog {
    pipe: Arc<LogPipe>,
    segment_size: u64,
    /// Segment records go to now, and the offset of the next record in it.
    current: u64,
    offset: u64,
    /// Bytes for `current` not yet handed to the writer, starting at `batch_at`.
    batch: Vec<u8>,
    batch_at: u64,
    /// Capacity a new batch starts with: the size of recent batches (the largest,
    /// decaying), so a batch is not grown by repeated reallocation.
    batch_hint: usize,
    tasks: Vec<Task>,
    /// Total bytes of records ever made: the log position replies wait for.
    position: u64,
    /// Segments on disk (oldest first) -> live jobs whose latest snapshot is there.
    live: BTreeMap<u64, u64>,
    /// Bytes kept free for the delete record of every live job.
    reserved: u64,
    /// Bytes of the latest snapshots of all live jobs.
    live_bytes: u64,
    pub records_written: u64,
    pub records_migrated: u64,
    /// Reserve and timeout records left out for lack of room (see journal.rs).
    pub records_dropped: u64,
    next_id_hint: Arc<AtomicU64>,
    /// Monotonic store time and wall time at the same instant, to convert.
    mono_base: u64,
    wall_base: i64,
    /// Where the compaction scan of the job table goes on from.
    pub scan_cursor: u32,
}

/// Not enough space is guaranteed on disk for this put (and its later delete).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoSpace;

impl StoreLog {
    pub fn new(opened: &OpenedLog, now: u64) -> StoreLog {
        let mut live = BTreeMap::new();
        for &(seq, _) in &opened.recovered.segments {
            live.insert(seq, 0);
        }
        live.insert(opened.first_seq, 0);
        let mut log = StoreLog {
            pipe: Arc::clone(&opened.pipe),
            segment_size: opened.segment_size,
            current: opened.first_seq,
            offset: HEADER_LEN as u64,
            batch: Vec::new(),
            batch_at: HEADER_LEN as u64,
            batch_hint: 4096,
            tasks: Vec::new(),
            position: 0,
            live,
            reserved: 0,
            live_bytes: 0,
            records_written: 0,
            records_migrated: 0,
            records_dropped: 0,
            next_id_hint: Arc::clone(&opened.next_id_hint),
            mono_base: now,
            wall_base: wall_now().max(opened.clock_floor),
            scan_cursor: 0,
        };
        let header = Header {
            seq: log.current,
            next_id: opened.recovered.next_id,
            created: log.wall_base,
        };
        log.tasks.push(Task::Create(header));
        log
    }

    /// Account for a job brought back by recovery (its snapshot already on disk,
    /// in segment `home`).
    pub fn recovered_job(&mut self, home: u64, snapshot_len: u64) {
        self.reserved += DELETE_RECORD_LEN as u64;
        self.live_bytes += snapshot_len;
        *self.live.entry(home).or_insert(0) += 1;
    }

    /// Wall-clock ns for a store time.
    pub fn wall(&self, mono: u64) -> i64 {
        let since = i64::try_from(mono).unwrap_or(i64::MAX) - self.mono_base as i64;
        self.wall_base.saturating_add(since)
    }

    /// Store time for a wall-clock ns (may lie before the server started). The
    /// times come from the log, so any value is possible: one too far back is the
    /// store's time 0, one too far ahead its largest.
    pub fn mono(&self, wall: i64) -> u64 {
        let since = wall.saturating_sub(self.wall_base);
        (self.mono_base as i64).saturating_add(since).max(0) as u64
    }

    pub fn current(&self) -> u64 {
        self.current
    }

    pub fn oldest(&self) -> u64 {
        self.live.keys().next().copied().unwrap_or(self.current)
    }

    pub fn segment_size(&self) -> u64 {
        self.segment_size
    }

    pub fn note_next_id(&self, next_id: u64) {
        self.next_id_hint.store(next_id, Ordering::Relaxed);
    }

    /// Whether a put needing `len` bytes can be accepted: the log is healthy and
    /// the space for it and for the delete of every live job (itself included) is
    /// preallocated.
    pub fn admit(&self, len: usize) -> Result<(), NoSpace> {
        let needed = self.reserved + (len + DELETE_RECORD_LEN) as u64;
        // Ask for the next spare half a segment before it is needed, so a burst of
        // puts never finds the writer still preallocating it.
        let cap = segment_capacity(self.segment_size).max(1);
        let want = 1 + (needed + cap / 2) / cap;
        if self.pipe.want_spares.swap(want, Ordering::Relaxed) < want {
            self.pipe.kick();
        }
        if self.wait_for_room(needed) {
            Ok(())
        } else {
            Err(NoSpace)
        }
    }

    /// Whether `len` more bytes fit in preallocated space without touching the space
    /// reserved for deletes (and the log is healthy); never waits.
    pub fn room_for(&self, len: usize) -> bool {
        self.free_bytes()
            .is_some_and(|free| free >= self.reserved + len as u64)
    }

    /// [`StoreLog::room_for`], waiting for the writer to preallocate what is missing.
    pub fn room_for_waiting(&self, len: usize) -> bool {
        self.wait_for_room(self.reserved + len as u64)
    }

    /// Whether `needed` bytes are preallocated. Preallocation can fall behind a
    /// burst of writes (records are written by the connections, segments made by
    /// the writer thread): then wait for it, at most [`SPARE_WAIT`] and with the
    /// store locked, which holds every client back as a server that allocates its
    /// files inline would. A failing log (a full disk) is not waited for.
    fn wait_for_room(&self, needed: u64) -> bool {
        let mut deadline = None;
        loop {
            match self.free_bytes() {
                None => return false,
                Some(free) if free >= needed => return true,
                Some(free) => {
                    let cap = segment_capacity(self.segment_size).max(1);
                    let created = self.pipe.created.load(Ordering::SeqCst);
                    let spares = created.saturating_sub(self.current);
                    self.pipe
                        .want_spares
                        .fetch_max(spares + (needed - free).div_ceil(cap), Ordering::Relaxed);
                    let deadline = *deadline.get_or_insert_with(|| Instant::now() + SPARE_WAIT);
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() || !self.pipe.wait_for_segment(created, left) {
                        return false;
                    }
                }
            }
        }
    }

    /// Preallocated bytes still free (the rest of the current segment, once it
    /// exists, and the spares), or None while the log is failing.
    fn free_bytes(&self) -> Option<u64> {
        if self.pipe.failing() {
            return None;
        }
        let created = self.pipe.created.load(Ordering::Relaxed);
        if created < self.current {
            // After a start the current segment is made by the writer thread like
            // a spare; until then none of it is preallocated. A put let in before
            // would wait for its reply for as long as making the segment fails
            // (on a full disk, until there is room) instead of being refused.
            return Some(0);
        }
        let spares = created - self.current;
        Some(
            self.segment_size.saturating_sub(self.offset)
                + spares * segment_capacity(self.segment_size),
        )
    }

    /// Append a record; returns the segment it went to.
    pub fn append(&mut self, record: &Record) -> u64 {
        let start = self.start_record();
        let len = record.encode(&mut self.batch);
        self.place(start, len)
    }

    /// Append a session's outcome record (`Record::Outcome` without owning
    /// the reply); returns the segment it went to.
    pub fn append_outcome(&mut self, owner: u64, seq: u64, reply: &[u8]) -> u64 {
        let start = self.start_record();
        let len = encode_outcome(&mut self.batch, owner, seq, reply);
        self.place(start, len)
    }

    /// Append a job snapshot; returns the segment it went to.
    fn append_job(&mut self, job: &JobRef<'_>) -> u64 {
        let start = self.start_record();
        let len = job.encode(&mut self.batch);
        self.place(start, len)
    }

    /// Where the next record starts in the batch; gives a new batch its capacity.
    fn start_record(&mut self) -> usize {
        if self.batch.capacity() == 0 {
            self.batch = self.pipe.buffers.take(self.batch_hint);
        }
        self.batch.len()
    }

    /// Place the record of `len` bytes just appended at `start` of the batch: in
    /// the current segment, or at the start of the next one if it does not fit.
    fn place(&mut self, start: usize, len: usize) -> u64 {
        let len = len as u64;
        if self.offset + len > self.segment_size {
            let bytes = self.batch.split_off(start);
            self.seal_batch();
            self.current += 1;
            self.pipe.current.store(self.current, Ordering::Relaxed);
            // A spare was just taken: have the writer make the next one.
            self.pipe.kick();
            self.live.entry(self.current).or_insert(0);
            self.offset = HEADER_LEN as u64;
            self.batch_at = self.offset;
            self.batch = bytes;
        }
        self.offset += len;
        self.position += len;
        self.records_written += 1;
        self.current
    }

    /// A new job's snapshot: reserves its delete's space and counts it live.
    pub fn add_job(&mut self, job: &JobRef<'_>) -> u64 {
        let before = self.position;
        let home = self.append_job(job);
        self.reserved += DELETE_RECORD_LEN as u64;
        self.live_bytes += self.position - before;
        *self.live.entry(home).or_insert(0) += 1;
        home
    }

    /// A job is deleted: its delete record uses the space reserved for it.
    pub fn delete_job(&mut self, id: u64, home: u64, snapshot_len: u64) {
        self.append(&Record::Delete { id });
        self.reserved = self.reserved.saturating_sub(DELETE_RECORD_LEN as u64);
        self.live_bytes = self.live_bytes.saturating_sub(snapshot_len);
        if let Some(n) = self.live.get_mut(&home) {
            *n = n.saturating_sub(1);
        }
    }

    /// A live job's snapshot is written again (compaction); returns its new home.
    pub fn move_job(&mut self, job: &JobRef<'_>, old_home: u64) -> u64 {
        let home = self.append_job(job);
        self.records_migrated += 1;
        if let Some(n) = self.live.get_mut(&old_home) {
            *n = n.saturating_sub(1);
        }
        *self.live.entry(home).or_insert(0) += 1;
        home
    }

    fn seal_batch(&mut self) {
        if !self.batch.is_empty() {
            let bytes = std::mem::take(&mut self.batch);
            // The next batch (allocated by its first record) starts with room for
            // about as much as the recent ones.
            let decayed = self.batch_hint - self.batch_hint / 4;
            self.batch_hint = bytes.len().max(decayed).min(BATCH_HINT_MAX);
            let end = self.position;
            self.tasks.push(Task::Write {
                seq: self.current,
                offset: self.batch_at,
                bytes,
                end,
            });
        }
        self.batch_at = self.offset;
    }

    /// Drop segments that hold no live job and are older than every other one.
    /// Returns the oldest segment that should be emptied by moving its jobs, if the
    /// directory has grown past twice the live data plus one segment.
    pub fn compact(&mut self) -> Option<u64> {
        let mut noted = false;
        while let Some((&seq, &n)) = self.live.iter().next() {
            if seq >= self.current || n > 0 {
                break;
            }
            if !noted {
                // The removed segments may hold the records of the highest ids; the
                // id floor goes on in the current segment so ids are never reused.
                let next_id = self.next_id_hint.load(Ordering::Relaxed);
                self.append(&Record::NextId { next_id });
                noted = true;
            }
            self.live.remove(&seq);
            self.tasks.push(Task::Remove(seq));
        }
        let on_disk = self.live.len() as u64 * self.segment_size;
        let oldest = self.oldest();
        (oldest < self.current && on_disk > 2 * self.live_bytes + self.segment_size)
            .then_some(oldest)
    }

    /// Hand everything made since the last flush to the writer; returns the log
    /// position the replies of this batch must wait for, if anything was made.
    pub fn flush(&mut self) -> Option<u64> {
        self.seal_batch();
        if self.tasks.is_empty() {
            return None;
        }
        self.pipe.submit(self.tasks.drain(..));
        Some(self.position)
    }

    pub fn position(&self) -> u64 {
        self.position
    }

    pub fn pipe(&self) -> &Arc<LogPipe> {
        &self.pipe
    }
}
