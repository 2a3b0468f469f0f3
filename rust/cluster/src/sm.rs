//! The state machine openraft applies committed entries to ([`StateMachine`], a
//! `RaftStateMachine`): the engine's replica of the queue (`wal::replica`), fed
//! each entry's journal records by the engine's replay rules, with the
//! replicated clock and the membership; and its snapshots (`snapshot.rs`).
//!
//! The state is not written by `apply`: it is the last snapshot plus the log
//! entries after it, which openraft re-applies at start up to the committed
//! index the log store saved. Imports the engine's `wal::replica`, the cluster's
//! types, codec and snapshot file.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use anyerror::AnyError;
use beanpole_engine::wal::replica::Replica;
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{EntryPayload, RaftSnapshotBuilder, StorageIOError};

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
}

/// The state, shared by the state machine, its snapshot builders and whoever
/// looks at it (the leader's takeover, tests). A std mutex: held to apply one
/// batch of entries or to copy the state out, never across an await or I/O.
#[derive(Debug, Clone, Default)]
pub struct StateView {
    state: Arc<Mutex<State>>,
    /// The current snapshot's image bytes, readable without the lock (which a
    /// snapshot being built holds while it writes the image).
    image_bytes: Arc<AtomicU64>,
    /// The last log id of the snapshot file on disk (the current snapshot:
    /// its image is in its file only, read back for the rare follower that
    /// needs it, not kept in memory beside the state). An async mutex: held
    /// across the file's write, so a snapshot built from an older state never
    /// replaces a newer one saved meanwhile (an installed one).
    saved: Arc<tokio::sync::Mutex<Option<LogId>>>,
}

impl StateView {
    /// The state, locked.
    pub fn lock(&self) -> MutexGuard<'_, State> {
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
}

/// The state machine of one node.
#[derive(Debug)]
pub struct StateMachine {
    view: StateView,
    dir: PathBuf,
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
                saved: Arc::new(tokio::sync::Mutex::new(saved)),
            },
            dir: dir.to_path_buf(),
        })
    }

    /// A handle on the state that stays valid once openraft owns this machine.
    pub fn view(&self) -> StateView {
        self.view.clone()
    }
}

/// Builds a snapshot of the state as it is when asked.
#[derive(Debug)]
pub struct SnapshotBuilder {
    view: StateView,
    dir: PathBuf,
}

/// Write the snapshot file off the runtime's threads, unless the file on disk
/// is of a later state already; then record it as the current snapshot.
/// Gives the image back.
async fn save_file(
    view: &StateView,
    dir: PathBuf,
    meta: &SnapshotMeta,
    image: Vec<u8>,
) -> Result<Vec<u8>, StorageError> {
    let mut saved = view.saved.lock().await;
    // None orders first: any file on disk is newer than no log id.
    if *saved > meta.last_log_id {
        return Ok(image);
    }
    let head = snapshot::head(meta, &image);
    let signature = Some(meta.signature());
    let written = tokio::task::spawn_blocking(move || {
        let outcome = snapshot::save(&dir, &head, &image);
        (outcome, image)
    })
    .await;
    let error = match written {
        Ok((Ok(()), image)) => {
            *saved = meta.last_log_id;
            view.image_bytes
                .store(image.len() as u64, Ordering::Relaxed);
            return Ok(image);
        }
        Ok((Err(e), _)) => AnyError::new(&e),
        Err(e) => AnyError::new(&e),
    };
    Err(StorageIOError::write_snapshot(signature, error).into())
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let (meta, image) = {
            let mut state = self.view.lock();
            state.built += 1;
            let mut image = Vec::new();
            state.replica.write_image(state.clock, &mut image);
            let id = match state.applied {
                Some(l) => format!("{}-{}-{}", l.leader_id.term, l.index, state.built),
                None => format!("0-0-{}", state.built),
            };
            let meta = SnapshotMeta {
                last_log_id: state.applied,
                last_membership: state.membership.clone(),
                snapshot_id: id,
            };
            (meta, image)
        };
        let image = save_file(&self.view, self.dir.clone(), &meta, image).await?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(image)),
        })
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
        let mut state = self.view.lock();
        let mut replies = Vec::new();
        for entry in entries {
            let mut applied = Applied::default();
            match entry.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(batch) => {
                    let n = state
                        .replica
                        .apply_run(&batch.records)
                        .map_err(|e| StorageIOError::apply(entry.log_id, AnyError::new(&e)))?;
                    applied.records = n as u32;
                    state.clock = state.clock.max(batch.at);
                }
                EntryPayload::Membership(m) => {
                    state.membership = StoredMembership::new(Some(entry.log_id), m);
                }
            }
            state.applied = Some(entry.log_id);
            replies.push(applied);
        }
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> SnapshotBuilder {
        SnapshotBuilder {
            view: self.view.clone(),
            dir: self.dir.clone(),
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
        let (replica, clock) = Replica::read_image(&image)
            .map_err(|e| StorageIOError::read_snapshot(signature, AnyError::new(&e)))?;
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
        Ok(loaded.map(|(meta, image)| Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(image)),
        }))
    }
}
