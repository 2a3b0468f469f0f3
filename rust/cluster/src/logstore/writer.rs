//! The log writer: every write to the Raft log's files, in the order openraft
//! asked for them, carried out by the writer thread off the runtime's threads,
//! so a slow fsync never holds back a leader's heartbeats or replication, or by
//! a follower's append on the thread that makes it (`ops.rs`).
//!
//! Group commit: whoever carries out the queue takes everything queued, writes
//! it, and covers every append in it with one fsync before telling openraft
//! they are durable (a leader's own appends were reported at once: `mod.rs`).
//! After each fsync it publishes the last log id now on disk ([`Durable`]). A vote,
//! a truncation or a purge first makes the appends before it durable, then is
//! done and synced on its own and answered. After a failed write or fsync every
//! later operation fails too: openraft then stops the node, and nothing is ever
//! reported durable that might not be.
//!
//! Imports the files layer and openraft's callback type; nothing of the engine.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use openraft::storage::LogFlushed;
use tokio::sync::watch;

use super::files::LogFiles;
use crate::codec;
use crate::types::{Entry, LogId, TypeConfig};

/// How far a node's log is on disk, as the writer publishes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OnDisk {
    /// The last log id fsynced (with `-F`: written).
    pub last: Option<LogId>,
    /// Why a write or fsync failed, once one has: nothing more will be durable.
    pub failed: Option<Arc<str>>,
}

/// Where [`OnDisk`] is published. A watch channel: readers want the latest
/// value, and to wait until it reaches an index.
pub type Durable = watch::Receiver<OnDisk>;

/// Wait until `durable` covers `index`; false if the log failed or its writer
/// stopped first (then it never will).
pub async fn wait_durable(durable: &mut Durable, index: u64) -> bool {
    match durable
        .wait_for(|d| d.failed.is_some() || d.last.is_some_and(|l| l.index >= index))
        .await
    {
        Ok(d) => d.failed.is_none(),
        Err(_) => false,
    }
}

/// A stall (`LogStore::sync_stall`) of this value makes every later group
/// commit's fsync fail instead (fault injection: a dead disk).
pub const FAIL_SYNCS: u64 = u64::MAX;

/// One operation for the writer.
pub enum Op {
    /// Entries (encoded as they are written), the last one's log id, and the
    /// callback that says they are durable (None: already called, for a
    /// leader's own entries).
    Append {
        entries: Vec<Entry>,
        last: LogId,
        done: Option<LogFlushed<TypeConfig>>,
    },
    /// Remove entries from this index on; `keep` is the log id before it.
    Truncate {
        index: u64,
        keep: Option<LogId>,
        done: Reply,
    },
    /// Save the purged log id (durably), then drop the segments it covers.
    Purge {
        index: u64,
        id_bytes: Vec<u8>,
        done: Reply,
    },
    /// Save a small file: the vote (durable, answered) or the committed id
    /// (neither: a lost one only means less is re-applied at start).
    Meta {
        name: &'static str,
        bytes: Vec<u8>,
        done: Option<Reply>,
    },
    /// Make what is written durable and end the thread (the store is dropped).
    Stop,
}

/// Where an operation's outcome goes. A oneshot: exactly one answer, awaited
/// by the async caller without blocking a runtime thread.
pub type Reply = tokio::sync::oneshot::Sender<io::Result<()>>;

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Op::Append { entries, .. } => write!(f, "Append({} entries)", entries.len()),
            Op::Truncate { index, .. } => write!(f, "Truncate({index})"),
            Op::Purge { index, .. } => write!(f, "Purge({index})"),
            Op::Meta { name, .. } => write!(f, "Meta({name})"),
            Op::Stop => write!(f, "Stop"),
        }
    }
}

/// The thread's state.
pub struct Writer {
    files: LogFiles,
    /// Milliseconds each group commit's fsync is held back (fault injection:
    /// a slow disk; 0 in use).
    stall: Arc<AtomicU64>,
    /// Whether appends are fsynced before they are reported durable (false:
    /// `-F`, reported once written to the operating system).
    fsync: bool,
    /// Callbacks of the appends written and not yet covered by an fsync.
    unsynced: Vec<LogFlushed<TypeConfig>>,
    /// The last log id written, if not yet covered by an fsync.
    written: Option<LogId>,
    /// Where the last log id on disk is published.
    durable: watch::Sender<OnDisk>,
    /// The first failure; every later operation reports it.
    failed: Option<String>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("files", &self.files)
            .field("unsynced", &self.unsynced.len())
            .field("failed", &self.failed)
            .finish()
    }
}

impl Writer {
    /// A writer of `files`; `durable` starts at the last log id they hold.
    pub fn new(
        files: LogFiles,
        stall: Arc<AtomicU64>,
        fsync: bool,
        durable: watch::Sender<OnDisk>,
    ) -> Writer {
        Writer {
            files,
            stall,
            fsync,
            unsynced: Vec::new(),
            written: None,
            durable,
            failed: None,
        }
    }

    /// Carry out one operation (appends are written, not yet synced).
    pub(super) fn handle(&mut self, op: Op) {
        match op {
            Op::Append {
                entries,
                last,
                done,
            } => {
                if self.failed.is_none() {
                    for entry in &entries {
                        let put = |out: &mut Vec<u8>| codec::put_entry(out, entry);
                        if let Err(e) = self.files.append_with(entry.log_id.index, put) {
                            self.fail(&e);
                            break;
                        }
                    }
                }
                self.written = Some(last);
                self.unsynced.extend(done);
            }
            Op::Truncate { index, keep, done } => {
                self.sync_appends();
                let result = self.checked(|files| files.truncate(index));
                if result.is_ok() {
                    self.durable.send_if_modified(|d| match d.last {
                        Some(last) if last.index >= index => {
                            d.last = keep;
                            true
                        }
                        _ => false,
                    });
                }
                let _ = done.send(result);
            }
            Op::Purge {
                index,
                id_bytes,
                done,
            } => {
                self.sync_appends();
                let result = self.checked(|files| {
                    files.save_meta("purged", &id_bytes, true)?;
                    files.purge(index)
                });
                let _ = done.send(result);
            }
            Op::Stop => {}
            Op::Meta { name, bytes, done } => {
                self.sync_appends();
                let durable = done.is_some();
                let result = self.checked(|files| files.save_meta(name, &bytes, durable));
                if let Some(done) = done {
                    let _ = done.send(result);
                }
            }
        }
    }

    /// Run `f` unless the log has failed; a failure of `f` fails the log.
    fn checked(&mut self, f: impl FnOnce(&mut LogFiles) -> io::Result<()>) -> io::Result<()> {
        if let Some(why) = &self.failed {
            return Err(io::Error::other(why.clone()));
        }
        let result = f(&mut self.files);
        if let Err(e) = &result {
            self.fail(e);
        }
        result
    }

    fn fail(&mut self, e: &io::Error) {
        if self.failed.is_none() {
            self.failed = Some(format!("raft log write failed earlier: {e}"));
            // A leader's appends were reported before their write: the node
            // stops its Raft when it sees this (`node/mod.rs`).
            let why: Arc<str> = Arc::from(format!("raft log: {e}"));
            self.durable.send_modify(|d| d.failed = Some(why));
        }
    }

    /// One fsync for every append written since the last, then their callbacks.
    pub(super) fn sync_appends(&mut self) {
        let Some(written) = self.written.take() else {
            return;
        };
        let mut stall = self.stall.load(Ordering::Relaxed);
        if stall > 0 && stall != FAIL_SYNCS && self.fsync {
            std::thread::sleep(std::time::Duration::from_millis(stall));
            // A disk that was slow may have died meanwhile.
            stall = self.stall.load(Ordering::Relaxed);
        }
        let result = if stall == FAIL_SYNCS {
            let e = io::Error::other("fsync failed (injected)");
            self.checked(|_| Err(e))
        } else if self.fsync {
            self.checked(LogFiles::sync)
        } else {
            self.checked(|_| Ok(()))
        };
        if result.is_ok() {
            self.durable.send_modify(|d| d.last = Some(written));
        }
        for done in self.unsynced.drain(..) {
            let outcome = match &result {
                Ok(()) => Ok(()),
                Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
            };
            done.log_io_completed(outcome);
        }
    }
}
