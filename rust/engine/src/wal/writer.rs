//! The writer thread: everything slow about the log.
//!
//! Connection tasks write records themselves (`pipe/inline.rs`); this thread creates and
//! preallocates segments ahead of need, removes the ones compaction emptied, runs
//! fsync (with `-f 0` as soon as something is written, with `-f MS` at most MS
//! after the first unsynced write) and takes over writes that fail: it retries
//! them, rewriting unsynced data after a failed fsync (the kernel may have dropped
//! it), while [`LogPipe::failing`] makes the store refuse puts. Nothing is ever
//! acknowledged that is not written (and, with `-f 0`, synced).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::format::{Header, HEADER_LEN};
use super::fs::{LogDir, SegmentFile};
use super::fsync::FsyncPolicy;
use super::pipe::{Chunk, Core, Failure, LogPipe, Task};

/// How often an idle writer looks at the spare segments anyway.
const IDLE: Duration = Duration::from_millis(250);

/// The writer thread's state.
pub struct Writer {
    dir: Arc<dyn LogDir>,
    pipe: Arc<LogPipe>,
    segment_size: u64,
    next_id_hint: Arc<AtomicU64>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("segment_size", &self.segment_size)
            .finish_non_exhaustive()
    }
}

impl Writer {
    pub fn new(
        dir: Arc<dyn LogDir>,
        pipe: Arc<LogPipe>,
        segment_size: u64,
        next_id_hint: Arc<AtomicU64>,
    ) -> Writer {
        Writer {
            dir,
            pipe,
            segment_size,
            next_id_hint,
        }
    }

    /// Run until stopped; everything queued before the stop is written and synced.
    pub fn run(self) {
        let policy = self.pipe.policy;
        loop {
            let stop = self.pipe.sleep(self.sleep_for());
            self.drain();
            self.keep_spares();
            let due = match policy {
                FsyncPolicy::Always => self.pipe.written() > self.pipe.acked(),
                FsyncPolicy::Every(every) => self
                    .pipe
                    .lock_core()
                    .first_unsynced_at
                    .is_some_and(|t| t.elapsed() >= every),
                FsyncPolicy::Never => false,
            };
            if due {
                self.sync();
            }
            if stop {
                self.drain();
                if policy == FsyncPolicy::Never {
                    // A clean stop leaves everything on disk whatever the policy.
                    self.sync_open_files();
                } else {
                    self.sync();
                }
                return;
            }
        }
    }

    /// How long to sleep when nothing kicks: until the periodic fsync is due.
    fn sleep_for(&self) -> Duration {
        match self.pipe.policy {
            FsyncPolicy::Every(every) => match self.pipe.lock_core().first_unsynced_at {
                Some(t) => (t + every).saturating_duration_since(Instant::now()),
                None => IDLE,
            },
            FsyncPolicy::Always if self.pipe.written() > self.pipe.acked() => Duration::ZERO,
            _ => IDLE,
        }
    }

    /// Do everything queued, in order, retrying what fails.
    fn drain(&self) {
        let mut core = self.pipe.lock_core();
        loop {
            let tasks = self.pipe.take_queue();
            if tasks.is_empty() {
                return;
            }
            for task in tasks {
                self.perform(&mut core, task);
            }
        }
    }

    fn perform(&self, core: &mut Core, task: Task) {
        match task {
            Task::Create(header) => self.create(core, header),
            Task::Write {
                seq,
                offset,
                bytes,
                end,
            } => {
                if !core.files.contains_key(&seq) {
                    let next_id = self.next_id_hint.load(Ordering::Relaxed);
                    self.create(
                        core,
                        Header {
                            seq,
                            next_id,
                            created: wall_now(),
                        },
                    );
                }
                self.retry(|| match core.files.get(&seq) {
                    Some(file) => file.write_all_at(offset, &bytes),
                    None => Err(std::io::Error::other("segment missing")),
                });
                self.pipe.wrote(core, [(seq, offset, bytes)], end);
            }
            Task::Remove(seq) => {
                // The jobs compaction moved out of the segment must be durable
                // before the segment goes. Unsynced data may also be in an fsync
                // that a connection runs right now (with -f 0): taking the fsync
                // turn waits for that one, and what it left unsynced or failed to
                // sync is synced here.
                if self.pipe.policy != FsyncPolicy::Never {
                    self.sync_locked(core);
                }
                core.files.remove(&seq);
                if let Err(e) = self.dir.remove(seq) {
                    eprintln!("beanpole: log: cannot remove segment {seq}: {e}");
                }
            }
        }
    }

    fn create(&self, core: &mut Core, header: Header) {
        if core.files.contains_key(&header.seq) {
            return;
        }
        let (size, seq) = (self.segment_size, header.seq);
        let mut file = None;
        self.retry(|| {
            file = Some(new_segment(self.dir.as_ref(), seq, size, &header)?);
            Ok(())
        });
        if let Some(f) = file {
            core.files.insert(seq, Arc::from(f));
            self.pipe.segment_made(Some(seq));
        }
    }

    /// Keep the number of preallocated segments ahead of the current one that the
    /// store asks for, so that rolling over never has to allocate (and deletes
    /// always find the space reserved for them). Segments are made without holding
    /// the core, so connections keep writing meanwhile.
    fn keep_spares(&self) {
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
                    self.pipe.lock_core().files.insert(seq, Arc::from(f));
                    self.pipe.segment_made(Some(seq));
                    created = seq;
                    self.pipe.clear_failure(&[Failure::Space]);
                }
                Err(e) => {
                    // A full disk: the store refuses puts until a spare exists.
                    self.pipe.report(
                        Failure::Space,
                        &format!("cannot preallocate segment {seq}: {e}"),
                    );
                    return;
                }
            }
        }
    }

    /// fsync what is written, without holding the core (connections go on
    /// writing meanwhile), then acknowledge it with `-f 0`.
    fn sync(&self) {
        self.pipe.exclusive_sync(|| loop {
            let (target, chunks, files) = {
                let mut core = self.pipe.lock_core();
                self.rewrite_failed(&mut core);
                core.take_unsynced()
            };
            match files.iter().try_for_each(|f| f.sync()) {
                Ok(()) => {
                    self.synced(target);
                    self.pipe.recycle(chunks);
                    return;
                }
                Err(e) => {
                    let mut core = self.pipe.lock_core();
                    self.resync_failed(&mut core, &e, chunks);
                }
            }
        });
    }

    /// With `-F`, at a clean stop: sync every open segment once (nothing tracks
    /// what is unsynced under that policy). A failure is reported, not retried:
    /// the process is ending.
    fn sync_open_files(&self) {
        let files: Vec<_> = self.pipe.lock_core().files.values().cloned().collect();
        for f in files {
            if let Err(e) = f.sync() {
                self.pipe
                    .report(Failure::Sync, &format!("final fsync failed: {e}"));
            }
        }
    }

    /// After an fsync failed on a connection's thread: write what it covered again,
    /// ahead of what is unsynced since.
    fn rewrite_failed(&self, core: &mut Core) {
        if !self.pipe.rewrite.swap(false, Ordering::SeqCst) {
            return;
        }
        let mut chunks = self.pipe.take_failed();
        for (seq, offset, bytes) in &chunks {
            self.retry(|| match core.files.get(seq) {
                Some(f) => f.write_all_at(*offset, bytes),
                None => Ok(()),
            });
        }
        chunks.append(&mut core.unsynced);
        core.unsynced = chunks;
        core.first_unsynced_at.get_or_insert_with(Instant::now);
    }

    /// [`Writer::sync`] with the core held (before removing a segment).
    fn sync_locked(&self, core: &mut Core) {
        self.pipe.exclusive_sync(|| loop {
            self.rewrite_failed(core);
            let (target, chunks, files) = core.take_unsynced();
            match files.iter().try_for_each(|f| f.sync()) {
                Ok(()) => {
                    self.synced(target);
                    self.pipe.recycle(chunks);
                    return;
                }
                Err(e) => self.resync_failed(core, &e, chunks),
            }
        });
    }

    fn synced(&self, target: u64) {
        // What was written is on disk: writes and fsyncs work.
        self.pipe.clear_failure(&[Failure::Write, Failure::Sync]);
        if self.pipe.policy == FsyncPolicy::Always {
            self.pipe.acknowledge(target);
        }
    }

    /// After a failed fsync the kernel may have dropped the dirty pages: write them
    /// again and keep them as unsynced, ahead of anything written since.
    fn resync_failed(&self, core: &mut Core, e: &std::io::Error, chunks: Vec<Chunk>) {
        self.pipe
            .report(Failure::Sync, &format!("fsync failed: {e}"));
        std::thread::sleep(Duration::from_millis(50));
        for (seq, offset, bytes) in &chunks {
            self.retry(|| match core.files.get(seq) {
                Some(f) => f.write_all_at(*offset, bytes),
                None => Ok(()),
            });
        }
        let later = std::mem::replace(&mut core.unsynced, chunks);
        core.unsynced.extend(later);
        core.first_unsynced_at.get_or_insert_with(Instant::now);
    }

    /// Run `op` until it succeeds, reporting failures and backing off between tries.
    fn retry(&self, mut op: impl FnMut() -> std::io::Result<()>) {
        let mut pause = Duration::from_millis(10);
        loop {
            match op() {
                Ok(()) => {
                    self.pipe.clear_failure(&[Failure::Write]);
                    return;
                }
                Err(e) => {
                    self.pipe
                        .report(Failure::Write, &format!("write failed: {e}; retrying"));
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
            }
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
    let f = dir.create(seq, size)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::fs::{segment_name, FsDir};
    use std::sync::mpsc;

    #[test]
    fn a_segment_is_removed_only_after_a_running_fsync_ends() {
        let path = std::env::temp_dir().join(format!("beanpole-writer-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("temp dir");
        let dir: Arc<dyn LogDir> = Arc::new(FsDir::new(&path));
        let pipe = Arc::new(LogPipe::new(FsyncPolicy::Always, "test".into()));
        for seq in [1, 2] {
            let file = dir.create(seq, 8192).expect("segment");
            pipe.lock_core().files.insert(seq, Arc::from(file));
        }
        let writer = Writer::new(
            Arc::clone(&dir),
            Arc::clone(&pipe),
            8192,
            Arc::new(AtomicU64::new(1)),
        );
        // A connection's fsync is running: it holds the turn and has taken the
        // unsynced data (a job compaction moved out of segment 1) with it.
        let turn = pipe.hold_sync_turn();
        let (tx, rx) = mpsc::channel();
        let remover = {
            let pipe = Arc::clone(&pipe);
            std::thread::spawn(move || {
                let mut core = pipe.lock_core();
                writer.perform(&mut core, Task::Remove(1));
                let _ = tx.send(());
            })
        };
        assert!(
            rx.recv_timeout(Duration::from_millis(300)).is_err(),
            "segment 1 was removed while the fsync covering its moved jobs ran"
        );
        assert!(path.join(segment_name(1)).exists());
        drop(turn);
        rx.recv_timeout(Duration::from_secs(30))
            .expect("removed once the fsync ended");
        remover.join().expect("remover");
        assert!(!path.join(segment_name(1)).exists());
        let _ = std::fs::remove_dir_all(&path);
    }
}
