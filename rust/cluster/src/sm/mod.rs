//! The state machine openraft applies committed entries to ([`StateMachine`], a
//! `RaftStateMachine`): the engine's replica of the queue (`wal::replica`), fed
//! each entry's journal records by the engine's replay rules, with the
//! replicated clock and the membership; and its snapshots (`snapshot.rs`,
//! built by `build.rs`).
//!
//! The state is not written by `apply`: it is the last snapshot plus the log
//! entries after it, which openraft re-applies at start up to the committed
//! index the log store saved. Imports the engine's `wal::replica`, the cluster's
//! types, codec and snapshot file, and the log's reader (for the builds).

mod build;

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use anyerror::AnyError;
use beanpole_engine::wal::replica::Replica;
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{EntryPayload, StorageIOError};

use self::build::{save_file, snapshot_of};
pub use self::build::{Builds, SnapshotBuilder};
use crate::logstore::LogReader;
use crate::snapshot::{self, SnapshotError};
use crate::types::{
    Applied, Entry, LogId, SnapshotMeta, StorageError, StoredMembership, TypeConfig,
};

/// The applied state.
#[derive(Debug, Default)]
pub struct State {
    /// The queue's committed jobs.
    pub replica: Replica,
    pub applied: Option<LogId>,
    pub membership: StoredMembership,
    /// The replicated clock: the highest `at` of any applied entry (wall ns).
    /// A new leader's store starts its time at no less than this.
    pub clock: i64,
    /// Snapshots built, to make each one's id unique.
    built: u64,
    /// Committed entries openraft has handed to `apply`, not yet applied to
    /// the replica: [`StateView::lock`] applies them before anything looks at
    /// the state. A leader's proposer has them applied between its rounds, off
    /// the path of the replies its commit releases (`node/propose.rs`).
    pending: Vec<Entry>,
    /// The first entry whose records could not be applied, and why: nothing
    /// after it is applied, and the next `apply` fails with it.
    failed: Option<(LogId, AnyError)>,
}

impl State {
    /// Apply the pending entries, in order, up to one that fails.
    fn settle(&mut self) {
        if self.failed.is_some() {
            self.pending.clear();
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        for entry in pending {
            match entry.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(batch) => {
                    // A damaged run changes nothing (`Replica::apply_run`).
                    if let Err(e) = self.replica.apply_run(&batch.records) {
                        self.failed = Some((entry.log_id, AnyError::new(&e)));
                        return;
                    }
                    self.clock = self.clock.max(batch.at);
                }
                EntryPayload::Membership(m) => {
                    self.membership = StoredMembership::new(Some(entry.log_id), m);
                }
            }
            self.applied = Some(entry.log_id);
        }
    }

    /// The metadata of a snapshot of the state as it stands, under a new id,
    /// and its clock.
    fn point(&mut self) -> (SnapshotMeta, i64) {
        self.built += 1;
        let id = match self.applied {
            Some(l) => format!("{}-{}-{}", l.leader_id.term, l.index, self.built),
            None => format!("0-0-{}", self.built),
        };
        let meta = SnapshotMeta {
            last_log_id: self.applied,
            last_membership: self.membership.clone(),
            snapshot_id: id,
        };
        (meta, self.clock)
    }
}

/// The state, shared by the state machine, its snapshot builders and whoever
/// looks at it (the leader's takeover, tests). A std mutex: held to apply one
/// batch of entries or to copy the state out, never across an await or I/O.
#[derive(Debug, Clone, Default)]
pub struct StateView {
    state: Arc<Mutex<State>>,
    /// The current snapshot's image bytes, readable without the lock.
    image_bytes: Arc<AtomicU64>,
    /// The snapshot builds, for the tests.
    builds: Arc<Builds>,
    /// The last log id of the snapshot file on disk (the current snapshot:
    /// its image is in its file only, read back for the rare follower that
    /// needs it, not kept in memory beside the state). An async mutex: held
    /// across the file's write, so a snapshot built from an older state never
    /// replaces a newer one saved meanwhile (an installed one).
    saved: Arc<tokio::sync::Mutex<Option<LogId>>>,
}

impl StateView {
    /// The state, locked, with every entry handed to `apply` applied.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        let mut state = self.locked();
        if !state.pending.is_empty() {
            state.settle();
        }
        state
    }

    /// Apply the entries handed to `apply` and not yet applied.
    pub fn settle(&self) {
        drop(self.lock());
    }

    /// The state, locked as it is.
    fn locked(&self) -> MutexGuard<'_, State> {
        // Apply leaves the state whole between records: go on after a panic.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Snapshots built since the machine was opened.
    pub fn snapshots_built(&self) -> u64 {
        self.lock().built
    }

    /// The size of the current snapshot's image (0: none yet): what the next
    /// one will about cost to build.
    pub fn image_bytes(&self) -> u64 {
        self.image_bytes.load(Ordering::Relaxed)
    }

    /// The bytes the live jobs would take in a snapshot built now (entries
    /// handed to `apply` and not yet applied left out): nearly all of an image.
    pub fn jobs_image_bytes(&self) -> u64 {
        self.locked().replica.jobs_image_bytes()
    }

    /// Fault injection and a watch on the snapshot builds, for tests.
    pub fn builds(&self) -> Arc<Builds> {
        Arc::clone(&self.builds)
    }
}

/// The state machine of one node.
#[derive(Debug)]
pub struct StateMachine {
    view: StateView,
    dir: PathBuf,
    /// The node's log, which snapshots are built from (`build.rs`).
    log: Option<LogReader>,
}

impl StateMachine {
    /// Open (creating) the state machine's directory and start from its
    /// snapshot, if it has one.
    pub fn open(dir: &Path) -> Result<StateMachine, SnapshotError> {
        std::fs::create_dir_all(dir).map_err(|source| SnapshotError::Io {
            path: dir.display().to_string(),
            source,
        })?;
        let mut state = State::default();
        let mut image_bytes = 0;
        let mut saved = None;
        if let Some((meta, image)) = snapshot::load(dir)? {
            let (replica, clock) = Replica::read_image(&image)?;
            state.replica = replica;
            state.clock = clock;
            state.applied = meta.last_log_id;
            state.membership = meta.last_membership.clone();
            saved = meta.last_log_id;
            image_bytes = image.len() as u64;
        }
        Ok(StateMachine {
            view: StateView {
                state: Arc::new(Mutex::new(state)),
                image_bytes: Arc::new(AtomicU64::new(image_bytes)),
                builds: Arc::default(),
                saved: Arc::new(tokio::sync::Mutex::new(saved)),
            },
            dir: dir.to_path_buf(),
            log: None,
        })
    }

    /// A handle on the state that stays valid once openraft owns this machine.
    pub fn view(&self) -> StateView {
        self.view.clone()
    }

    /// Build snapshots from the snapshot on disk and the entries of `log` after
    /// it, not by encoding the live state under its lock (`build.rs`). `log`
    /// must be the log this machine's entries are applied from.
    pub fn build_from(&mut self, log: LogReader) {
        self.log = Some(log);
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let state = self.view.lock();
        Ok((state.applied, state.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Applied>, StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        // The entries are kept to be applied the next time anything looks at
        // the state, or the next time this is called: what openraft learns
        // from the answer (how many records each carries) needs none of it.
        let mut state = self.view.locked();
        state.settle();
        if let Some((at, why)) = &state.failed {
            return Err(StorageIOError::apply(*at, why.clone()).into());
        }
        let mut replies = Vec::new();
        for entry in entries {
            let records = match &entry.payload {
                EntryPayload::Normal(batch) => Replica::count_run(&batch.records),
                _ => 0,
            };
            replies.push(Applied {
                records: u32::try_from(records).unwrap_or(u32::MAX),
            });
            state.pending.push(entry);
        }
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> SnapshotBuilder {
        SnapshotBuilder {
            view: self.view.clone(),
            dir: self.dir.clone(),
            log: self.log.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let image = snapshot.into_inner();
        let signature = Some(meta.signature());
        // Decoded on the blocking pool: the whole queue, not a Raft thread's
        // moment.
        let decoded = tokio::task::spawn_blocking(move || {
            let decoded = Replica::read_image(&image).map_err(|e| AnyError::new(&e));
            (decoded, image)
        })
        .await;
        let (replica, clock, image) = match decoded {
            Ok((Ok((replica, clock)), image)) => (replica, clock, image),
            Ok((Err(e), _)) => return Err(StorageIOError::read_snapshot(signature, e).into()),
            Err(e) => {
                return Err(StorageIOError::read_snapshot(signature, AnyError::new(&e)).into())
            }
        };
        save_file(&self.view, self.dir.clone(), meta, image).await?;
        let mut state = self.view.lock();
        state.replica = replica;
        state.clock = state.clock.max(clock);
        state.applied = meta.last_log_id;
        state.membership = meta.last_membership.clone();
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        // Read back from its file, whole and checked; under the lock saves
        // take, so it is the one last saved (which may be newer than the one
        // the state recorded a moment ago: each file is consistent in itself).
        let _saved = self.view.saved.lock().await;
        let dir = self.dir.clone();
        let loaded = tokio::task::spawn_blocking(move || snapshot::load(&dir))
            .await
            .map_err(|e| StorageIOError::read_snapshot(None, AnyError::new(&e)))?
            .map_err(|e| StorageIOError::read_snapshot(None, AnyError::new(&e)))?;
        Ok(loaded.map(|(meta, image)| snapshot_of(meta, image)))
    }
}

#[cfg(test)]
mod tests {
    use beanpole_engine::wal::format::Record;
    use bytes::Bytes;
    use openraft::CommittedLeaderId;

    use super::*;
    use crate::types::Batch;

    fn log_id(index: u64) -> LogId {
        LogId::new(CommittedLeaderId::new(1, 1), index)
    }

    /// Entry `index`, raising the id floor to each of `floors` in turn.
    fn batch(index: u64, floors: &[u64]) -> Entry {
        let mut bytes = Vec::new();
        for &next_id in floors {
            Record::NextId { next_id }.encode(&mut bytes);
        }
        Entry {
            log_id: log_id(index),
            payload: EntryPayload::Normal(Batch {
                at: i64::try_from(index * 1_000).unwrap_or(i64::MAX),
                records: Bytes::from(bytes),
            }),
        }
    }

    #[tokio::test]
    async fn entries_are_applied_when_the_state_is_next_looked_at(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let mut sm = StateMachine::open(dir.path())?;
        let view = sm.view();
        let answered = sm.apply([batch(1, &[5, 7]), batch(2, &[9])]).await?;
        let counts: Vec<u32> = answered.iter().map(|a| a.records).collect();
        assert_eq!(counts, [2, 1], "counted before they are applied");
        {
            let kept = view.locked();
            assert_eq!((kept.pending.len(), kept.applied), (2, None));
            assert_eq!(kept.replica.next_id(), 1);
        }
        // Looking applies them; so does the next apply, for what it finds kept.
        assert_eq!(view.lock().applied, Some(log_id(2)));
        assert_eq!(view.locked().replica.next_id(), 9);
        sm.apply([batch(3, &[11])]).await?;
        assert_eq!(view.locked().applied, Some(log_id(2)));
        sm.apply([batch(4, &[13])]).await?;
        assert_eq!(view.locked().applied, Some(log_id(3)));
        view.settle();
        let state = view.locked();
        assert_eq!((state.applied, state.clock), (Some(log_id(4)), 4_000));
        assert!(state.pending.is_empty());
        assert_eq!(state.replica.next_id(), 13);
        Ok(())
    }
}
