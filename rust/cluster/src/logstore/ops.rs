//! The log writer's queue of operations, and who carries them out: the writer
//! thread, or, for a follower's append, the thread that makes it.
//!
//! openraft 0.9's core waits for each append's callback before it goes on. On a
//! follower, handing the append to the writer thread and its callback back to
//! Raft's thread cost two thread wake-ups on the path of every commit (45-100 µs
//! each on two busy cores: docs/cluster.md, "What is left"). So a follower's
//! append is written and synced by the thread that makes it, which carries out
//! first whatever was queued before it. The order is kept: operations are taken
//! from the queue only by whoever holds the writer, and carried out before it
//! is let go. The writer thread carries out everything else as before: a
//! leader's appends (reported at once, so that their fsync overlaps the
//! followers'), votes, truncations, purges and the committed id.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::writer::{Op, Writer};

/// The writer thread has stopped: nothing more will be written.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the raft log writer thread has stopped")]
pub struct Stopped;

#[derive(Debug, Default)]
struct Queue {
    ops: VecDeque<Op>,
    /// A stop was carried out: later operations are refused.
    stopped: bool,
}

/// Operations on one log, and its writer.
#[derive(Debug)]
pub struct Ops {
    /// Operations not taken yet, in the order they were made. A std mutex:
    /// held only to push or take them.
    queue: Mutex<Queue>,
    /// Wakes the writer thread when an operation is queued for it.
    ready: Condvar,
    /// The writer. A std mutex held while operations are carried out, file
    /// I/O and fsync included: only by the writer thread and by a follower's
    /// append, whose caller waits for that I/O in any case.
    writer: Mutex<Writer>,
    /// The last group commit of appends, carried out by whichever thread,
    /// took longer than [`SLOW_SYNC`]: a follower's next append goes to the
    /// writer thread ([`Ops::append_here`]). An atomic: set by whoever holds
    /// the writer, read by the Raft core's thread.
    disk_slow: AtomicBool,
}

/// An append whose write and fsync took longer than this held a follower's
/// runtime long enough to matter: three of the leader's heartbeat intervals
/// (50 ms), a fifth of the shortest wait before a follower stands (the 500 ms
/// lease plus at least 250). Under the durable-put bench a loaded disk's
/// group commits here take up to ~50 ms.
const SLOW_SYNC: Duration = Duration::from_millis(150);

/// After such an append, how long the follower's runtime is left to read what
/// its leader sent meanwhile (the leader sends again after an unanswered
/// heartbeat interval) before the Raft core goes on.
const SETTLE: Duration = Duration::from_millis(100);

impl Ops {
    pub fn new(writer: Writer) -> Ops {
        Ops {
            queue: Mutex::new(Queue::default()),
            ready: Condvar::new(),
            writer: Mutex::new(writer),
            disk_slow: AtomicBool::new(false),
        }
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        // Plain data: go on after a panic elsewhere.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, op: Op) -> Result<(), Stopped> {
        let mut queue = self.queue();
        if queue.stopped {
            return Err(Stopped);
        }
        queue.ops.push_back(op);
        Ok(())
    }

    /// Queue `op` for the writer thread.
    pub fn send(&self, op: Op) -> Result<(), Stopped> {
        self.push(op)?;
        self.ready.notify_one();
        Ok(())
    }

    /// Queue `op` to be carried out with the next operation queued for the
    /// writer thread or carried out here, or at the stop, whichever comes
    /// first: for a write nothing waits for (the committed id, saved on every
    /// commit and read back only at a restart, where an older one only means
    /// less applied before the leader sends the rest). Waking the writer
    /// thread for it cost a thread wake-up per commit on every node.
    pub fn later(&self, op: Op) -> Result<(), Stopped> {
        self.push(op)
    }

    /// Queue `op` and carry it out on this thread, after whatever was queued
    /// before it; returns once it is written and synced (its callback called).
    pub fn run_here(&self, op: Op) -> Result<(), Stopped> {
        self.push(op)?;
        self.carry_out();
        Ok(())
    }

    /// A follower's append: carried out here ([`Ops::run_here`]) without
    /// letting a slow disk hold up the rest of the runtime this is called on.
    ///
    /// That runtime's one thread also runs the peer server and Raft's timer.
    /// Held through a long fsync, it reads nothing the leader sends meanwhile,
    /// and once the fsync ends the timer's tick can reach the Raft core before
    /// the leader's next heartbeat does: the follower would stand for election
    /// though its leader is alive (no election while a disk is merely slow:
    /// `tests/slow_disk.rs`). So an append that turned out slow is followed by
    /// a pause in which the runtime reads what came, which the core then takes
    /// before its timer; and while the disk stays slow, appends go to the
    /// writer thread like a leader's, their callback telling the core when
    /// they are synced (the hand-over to that thread and back costs too much
    /// to pay on every append of a fast disk). The writer thread, timing the
    /// group commits it carries out, says when the disk is fast again.
    pub async fn append_here(&self, op: Op) -> Result<(), Stopped> {
        if self.disk_slow.load(Ordering::Relaxed) {
            return self.send(op);
        }
        let started = Instant::now();
        let done = self.run_here(op);
        if started.elapsed() > SLOW_SYNC && tokio::runtime::Handle::try_current().is_ok() {
            tokio::time::sleep(SETTLE).await;
        }
        done
    }

    /// Carry out everything queued, with one fsync for the appends among it
    /// (group commit); false once a stop was carried out.
    fn carry_out(&self) -> bool {
        let mut writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let started = Instant::now();
        let mut appends = false;
        loop {
            let ops = std::mem::take(&mut self.queue().ops);
            if ops.is_empty() {
                break;
            }
            for op in ops {
                if matches!(op, Op::Stop) {
                    writer.sync_appends();
                    self.queue().stopped = true;
                    return false;
                }
                appends |= matches!(op, Op::Append { .. });
                writer.handle(op);
            }
        }
        writer.sync_appends();
        if appends {
            let slow = started.elapsed() > SLOW_SYNC;
            self.disk_slow.store(slow, Ordering::Relaxed);
        }
        true
    }

    /// The writer thread: carry out what is queued until a stop.
    pub fn run(&self) {
        loop {
            {
                let mut queue = self.queue();
                while queue.ops.is_empty() {
                    queue = self.ready.wait(queue).unwrap_or_else(|e| e.into_inner());
                }
            }
            if !self.carry_out() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    use openraft::{CommittedLeaderId, EntryPayload};

    use super::super::files::LogFiles;
    use super::super::writer::OnDisk;
    use super::*;
    use crate::codec;
    use crate::types::{Entry, LogId};

    fn log_id(index: u64) -> LogId {
        LogId::new(CommittedLeaderId::new(1, 1), index)
    }

    fn append(index: u64) -> Op {
        let entry = Entry {
            log_id: log_id(index),
            payload: EntryPayload::Blank,
        };
        Op::Append {
            entries: vec![entry],
            last: log_id(index),
            done: None,
        }
    }

    #[test]
    fn an_append_carried_out_here_comes_after_what_was_queued_and_is_synced_when_it_returns(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let (files, _) = LogFiles::open(dir.path())?;
        let (tx, durable) = tokio::sync::watch::channel(OnDisk::default());
        let ops = Ops::new(Writer::new(files, Arc::new(AtomicU64::new(0)), true, tx));
        // Queued for the writer thread, which does not run here.
        ops.send(append(1))?;
        let mut committed = Vec::new();
        codec::put_log_id(&mut committed, Some(&log_id(1)));
        ops.send(Op::Meta {
            name: "committed",
            bytes: committed,
            done: None,
        })?;
        assert_eq!(durable.borrow().last, None);
        ops.run_here(append(2))?;
        assert_eq!(
            durable.borrow().last,
            Some(log_id(2)),
            "written and synced, with what was queued before it, when it returns"
        );
        assert!(ops.queue().ops.is_empty());
        ops.run_here(Op::Stop)?;
        assert!(
            ops.send(append(3)).is_err(),
            "nothing is taken after a stop"
        );
        drop(ops);
        let (_, loaded) = LogFiles::open(dir.path())?;
        let indexes: Vec<u64> = loaded.entries.iter().map(|e| e.log_id.index).collect();
        assert_eq!(indexes, [1, 2]);
        assert_eq!(loaded.committed, Some(log_id(1)));
        Ok(())
    }

    #[test]
    fn a_later_operation_goes_with_the_next_one_or_the_stop(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let committed = |index| {
            let mut bytes = Vec::new();
            codec::put_log_id(&mut bytes, Some(&log_id(index)));
            Op::Meta {
                name: "committed",
                bytes,
                done: None,
            }
        };
        let dir = tempfile::tempdir()?;
        let (files, _) = LogFiles::open(dir.path())?;
        let (tx, _durable) = tokio::sync::watch::channel(OnDisk::default());
        let ops = Ops::new(Writer::new(files, Arc::new(AtomicU64::new(0)), true, tx));
        ops.later(committed(1))?;
        assert_eq!(ops.queue().ops.len(), 1, "queued, not carried out");
        ops.run_here(append(1))?;
        assert!(ops.queue().ops.is_empty(), "carried out with the append");
        let (_, loaded) = LogFiles::open(dir.path())?;
        assert_eq!(loaded.committed, Some(log_id(1)));
        ops.later(committed(2))?;
        ops.run_here(Op::Stop)?;
        drop(ops);
        let (_, loaded) = LogFiles::open(dir.path())?;
        assert_eq!(loaded.committed, Some(log_id(2)), "carried out at the stop");
        Ok(())
    }
}
