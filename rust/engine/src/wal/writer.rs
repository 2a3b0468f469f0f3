//! The writer thread: group commit.
//!
//! The store encodes records while it changes state (under its lock) and hands each
//! batch to [`LogPipe::submit`]. The writer thread takes everything queued since its
//! last pass, writes it, syncs according to the [`FsyncPolicy`], and then raises the
//! acknowledged log position, which replies wait for. One write and at most one
//! fsync therefore cover every connection's records queued meanwhile.
//!
//! A failing write or fsync is retried until it succeeds (with the unsynced data
//! rewritten first, since a failed fsync may have dropped it from the page cache);
//! meanwhile [`LogPipe::failing`] is set, so puts are refused with OUT_OF_MEMORY, and
//! the error is reported. Nothing is ever acknowledged that is not written.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::format::{Header, HEADER_LEN};
use super::fs::{LogDir, SegmentFile};

/// When data is made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// `-F`: never; the OS writes back when it likes.
    Never,
    /// `-f 0`: before any reply that depends on it.
    Always,
    /// `-f MS`: at most every MS, and at the latest MS after a write.
    Every(Duration),
}

/// Work for the writer, in order.
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

#[derive(Debug, Default)]
struct Queue {
    tasks: Vec<Task>,
    stop: bool,
}

/// The hand-over between the store and the writer thread.
#[derive(Debug)]
pub struct LogPipe {
    /// Queued work. A std mutex: the store holds it only to append one batch, the
    /// writer only to take the whole queue; no I/O is ever done under it.
    queue: Mutex<Queue>,
    /// The writer sleeps on it while the queue is empty (with a timeout when an
    /// fsync is due), so it is a condvar on the same mutex.
    wake: Condvar,
    /// Log position up to which replies may be sent. A watch channel: many
    /// connection tasks wait for "at least N" and only the latest value matters.
    acked: watch::Sender<u64>,
    /// Set while writes or fsyncs fail; puts are refused meanwhile.
    failing: AtomicBool,
    /// Highest segment sequence number created (spares included).
    pub created: AtomicU64,
    /// How many segments beyond the current one the store wants ready.
    pub want_spares: AtomicU64,
    /// The segment the store writes into now.
    pub current: AtomicU64,
    /// Write or sync errors seen (for stats and tests).
    pub errors: AtomicU64,
}

impl LogPipe {
    pub fn new(acked_from: u64) -> LogPipe {
        LogPipe {
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            acked: watch::Sender::new(acked_from),
            failing: AtomicBool::new(false),
            created: AtomicU64::new(0),
            want_spares: AtomicU64::new(1),
            current: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        }
    }

    /// Queue a batch of tasks and wake the writer.
    pub fn submit(&self, tasks: impl IntoIterator<Item = Task>) {
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        let before = q.tasks.len();
        q.tasks.extend(tasks);
        if q.tasks.len() != before {
            self.wake.notify_one();
        }
    }

    /// Ask the writer to finish what is queued and exit.
    pub fn stop(&self) {
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .stop = true;
        self.wake.notify_one();
    }

    pub fn failing(&self) -> bool {
        self.failing.load(Ordering::Relaxed)
    }

    /// A receiver for the acknowledged log position.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.acked.subscribe()
    }

    pub fn acked(&self) -> u64 {
        *self.acked.borrow()
    }
}

/// The writer thread's state.
pub struct Writer {
    dir: Arc<dyn LogDir>,
    pipe: Arc<LogPipe>,
    policy: FsyncPolicy,
    segment_size: u64,
    files: BTreeMap<u64, Box<dyn SegmentFile>>,
    /// Written but not yet synced, kept to rewrite after a failed fsync.
    unsynced: Vec<(u64, u64, Vec<u8>)>,
    written: u64,
    first_unsynced_at: Option<Instant>,
    next_id_hint: Arc<AtomicU64>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("policy", &self.policy)
            .field("written", &self.written)
            .finish_non_exhaustive()
    }
}

impl Writer {
    pub fn new(
        dir: Arc<dyn LogDir>,
        pipe: Arc<LogPipe>,
        policy: FsyncPolicy,
        segment_size: u64,
        written: u64,
        next_id_hint: Arc<AtomicU64>,
    ) -> Writer {
        Writer {
            dir,
            pipe,
            policy,
            segment_size,
            files: BTreeMap::new(),
            unsynced: Vec::new(),
            written,
            first_unsynced_at: None,
            next_id_hint,
        }
    }

    /// Run until stopped; everything queued before the stop is written and synced.
    pub fn run(mut self) {
        loop {
            let (tasks, stop) = self.take();
            for task in tasks {
                self.perform(task);
            }
            self.keep_spares();
            // Without -f 0 a reply needs only its write: release the replies before
            // a periodic sync, not after it.
            if self.policy != FsyncPolicy::Always {
                self.pipe.acked.send_replace(self.written);
            }
            match self.policy {
                FsyncPolicy::Always => self.sync(),
                FsyncPolicy::Every(every) => {
                    if self.first_unsynced_at.is_some_and(|t| t.elapsed() >= every) {
                        self.sync();
                    }
                }
                FsyncPolicy::Never => {}
            }
            if stop {
                if self.policy != FsyncPolicy::Never {
                    self.sync();
                }
                return;
            }
        }
    }

    /// Wait for work (or for an fsync that falls due) and take the whole queue.
    fn take(&mut self) -> (Vec<Task>, bool) {
        let mut q = self
            .pipe
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        loop {
            if !q.tasks.is_empty() || q.stop {
                return (std::mem::take(&mut q.tasks), q.stop);
            }
            let due = match (self.policy, self.first_unsynced_at) {
                (FsyncPolicy::Every(every), Some(t)) => {
                    Some((t + every).saturating_duration_since(Instant::now()))
                }
                _ => None,
            };
            match due {
                Some(d) if d.is_zero() => return (Vec::new(), false),
                Some(d) => {
                    q = self
                        .pipe
                        .wake
                        .wait_timeout(q, d)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
                // Wake up now and then anyway to keep spare segments topped up.
                None => {
                    q = self
                        .pipe
                        .wake
                        .wait_timeout(q, Duration::from_millis(250))
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                    if q.tasks.is_empty() && !q.stop {
                        return (Vec::new(), false);
                    }
                }
            }
        }
    }

    fn perform(&mut self, task: Task) {
        match task {
            Task::Create(header) => self.create(header),
            Task::Write {
                seq,
                offset,
                bytes,
                end,
            } => {
                if !self.files.contains_key(&seq) {
                    let next_id = self.next_id_hint.load(Ordering::Relaxed);
                    self.create(Header {
                        seq,
                        next_id,
                        created: wall_now(),
                    });
                }
                self.retry(|w| {
                    let file = w
                        .files
                        .get_mut(&seq)
                        .ok_or_else(|| std::io::Error::other("segment missing"))?;
                    file.write_all_at(offset, &bytes)
                });
                if self.policy != FsyncPolicy::Never {
                    self.first_unsynced_at.get_or_insert_with(Instant::now);
                    self.unsynced.push((seq, offset, bytes));
                }
                self.written = self.written.max(end);
            }
            Task::Remove(seq) => {
                // The jobs compaction moved out of the segment must be durable
                // before the segment goes.
                if !self.unsynced.is_empty() {
                    self.sync();
                }
                self.files.remove(&seq);
                if let Err(e) = self.dir.remove(seq) {
                    eprintln!("beanpole: log: cannot remove segment {seq}: {e}");
                }
            }
        }
    }

    fn create(&mut self, header: Header) {
        if self.files.contains_key(&header.seq) {
            return;
        }
        let size = self.segment_size;
        let seq = header.seq;
        let mut file = None;
        self.retry(|w| {
            file = Some(new_segment(w.dir.as_ref(), seq, size, &header)?);
            Ok(())
        });
        if let Some(f) = file {
            self.files.insert(seq, f);
            self.pipe.created.fetch_max(seq, Ordering::Relaxed);
        }
    }

    /// Keep the number of preallocated segments ahead of the current one that the
    /// store asks for, so that rolling over never has to allocate (and deletes
    /// always find the space reserved for them).
    fn keep_spares(&mut self) {
        let current = self.pipe.current.load(Ordering::Relaxed);
        let want = current + self.pipe.want_spares.load(Ordering::Relaxed);
        let mut created = self.pipe.created.load(Ordering::Relaxed);
        while created < want {
            let seq = created + 1;
            let next_id = self.next_id_hint.load(Ordering::Relaxed);
            let header = Header {
                seq,
                next_id,
                created: wall_now(),
            };
            match new_segment(self.dir.as_ref(), seq, self.segment_size, &header) {
                Ok(f) => {
                    self.files.insert(seq, f);
                    self.pipe.created.store(seq, Ordering::Relaxed);
                    created = seq;
                    self.clear_failure();
                }
                Err(e) => {
                    // A full disk: the store refuses puts until a spare exists.
                    self.report(&format!("cannot preallocate segment {seq}: {e}"));
                    return;
                }
            }
        }
    }

    fn sync(&mut self) {
        if self.unsynced.is_empty() && self.first_unsynced_at.is_none() {
            if self.policy == FsyncPolicy::Always {
                self.pipe.acked.send_replace(self.written);
            }
            return;
        }
        loop {
            let seqs: Vec<u64> = {
                let mut s: Vec<u64> = self.unsynced.iter().map(|(seq, _, _)| *seq).collect();
                s.dedup();
                s
            };
            let mut failed = None;
            for seq in seqs {
                if let Some(f) = self.files.get_mut(&seq) {
                    if let Err(e) = f.sync() {
                        failed = Some(e);
                        break;
                    }
                }
            }
            match failed {
                None => break,
                Some(e) => {
                    // The kernel may have dropped the dirty pages: write them again.
                    self.report(&format!("fsync failed: {e}"));
                    std::thread::sleep(Duration::from_millis(50));
                    let chunks = std::mem::take(&mut self.unsynced);
                    for (seq, offset, bytes) in &chunks {
                        self.retry(|w| match w.files.get_mut(seq) {
                            Some(f) => f.write_all_at(*offset, bytes),
                            None => Ok(()),
                        });
                    }
                    self.unsynced = chunks;
                }
            }
        }
        self.clear_failure();
        self.unsynced.clear();
        self.first_unsynced_at = None;
        self.pipe.acked.send_replace(self.written);
    }

    /// Run `op` until it succeeds, reporting failures and backing off between tries.
    fn retry(&mut self, mut op: impl FnMut(&mut Writer) -> std::io::Result<()>) {
        let mut pause = Duration::from_millis(10);
        loop {
            match op(self) {
                Ok(()) => {
                    self.clear_failure();
                    return;
                }
                Err(e) => {
                    self.report(&format!("write failed: {e}; retrying"));
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
            }
        }
    }

    fn report(&self, what: &str) {
        self.pipe.errors.fetch_add(1, Ordering::Relaxed);
        if !self.pipe.failing.swap(true, Ordering::Relaxed) {
            eprintln!(
                "beanpole: log in {}: {what}; puts are refused until it recovers",
                self.dir.path().display()
            );
        }
    }

    fn clear_failure(&self) {
        if self.pipe.failing.swap(false, Ordering::Relaxed) {
            eprintln!("beanpole: log in {}: recovered", self.dir.path().display());
        }
    }
}

/// Create segment `seq` with its header written and synced. If the header cannot
/// be written, the file is removed again, so that the next try can create it.
fn new_segment(
    dir: &dyn LogDir,
    seq: u64,
    size: u64,
    header: &Header,
) -> std::io::Result<Box<dyn SegmentFile>> {
    let mut f = dir.create(seq, size)?;
    match f.write_all_at(0, &header.encode()).and_then(|()| f.sync()) {
        Ok(()) => Ok(f),
        Err(e) => {
            drop(f);
            let _ = dir.remove(seq);
            Err(e)
        }
    }
}

/// Wall-clock nanoseconds since 1970 (stored in the log, never used for timers).
pub fn wall_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// Bytes available for records in a segment of `segment_size` bytes.
pub fn segment_capacity(segment_size: u64) -> u64 {
    segment_size.saturating_sub(HEADER_LEN as u64)
}
