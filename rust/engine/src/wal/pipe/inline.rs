//! Writing from the caller's thread: a connection about to reply writes what is
//! queued (every connection's records together) and, with `-f 0`, syncs it,
//! unless another writer is at work; and the bookkeeping of a completed write
//! that the writer thread shares.

use std::sync::atomic::Ordering;
use std::sync::{MutexGuard, TryLockError};
use std::time::Instant;

use super::{lock, Chunk, Core, Failure, LogPipe, Task};
use crate::wal::fsync::FsyncPolicy;

impl LogPipe {
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
    pub(in crate::wal) fn take_failed(&self) -> Vec<Chunk> {
        std::mem::take(&mut *lock(&self.failed))
    }

    /// Hold the fsync turn, as a connection's fsync does while it runs.
    #[cfg(test)]
    pub(in crate::wal) fn hold_sync_turn(&self) -> MutexGuard<'_, ()> {
        lock(&self.sync_turn)
    }

    /// Run `f` as the only fsync (waiting for one that runs on a connection's
    /// thread to finish first). For the writer thread.
    pub(in crate::wal) fn exclusive_sync<T>(&self, f: impl FnOnce() -> T) -> T {
        let _turn = lock(&self.sync_turn);
        f()
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
    pub(in crate::wal) fn wrote(
        &self,
        core: &mut Core,
        chunks: impl IntoIterator<Item = Chunk>,
        end: u64,
    ) {
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
    pub(in crate::wal) fn recycle(&self, chunks: impl IntoIterator<Item = Chunk>) {
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
    pub(in crate::wal) fn take_queue(&self) -> Vec<Task> {
        std::mem::take(&mut *lock(&self.queue))
    }

    pub(in crate::wal) fn lock_core(&self) -> MutexGuard<'_, Core> {
        lock(&self.core)
    }

    pub(in crate::wal) fn written(&self) -> u64 {
        self.written.load(Ordering::SeqCst)
    }
}
