//! Building a snapshot ([`SnapshotBuilder`]) without holding the state while
//! its image is made.
//!
//! The live state is locked only to read where it stands: the last applied log
//! id, the membership and the replicated clock. The image of the state at that
//! id is then made the way a restart makes the state: the snapshot file on disk
//! read back, the log's entries after it up to that id applied to it, in a
//! replica of the build's own, on the runtime's blocking pool. Encoding the
//! live state instead held its lock, and with it every apply and the node's
//! Raft thread (which sends the heartbeats and, on a leader, serves the
//! clients), for as long as the whole queue took to encode: a second per
//! million jobs or so, and past the followers' election timeout with a few
//! million (`bench/README.md`). That costs a replay's CPU and, while it runs,
//! a second copy of the state; it holds no one up.
//!
//! Where the log cannot give those entries (a machine opened without a log, as
//! some tests open one, or entries a snapshot installed meanwhile purged), the
//! live state is encoded under its lock as before.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyerror::AnyError;
use beanpole_engine::wal::replica::Replica;
use openraft::storage::Snapshot;
use openraft::{EntryPayload, RaftLogReader, RaftSnapshotBuilder, StorageIOError};

use super::StateView;
use crate::logstore::LogReader;
use crate::snapshot;
use crate::types::{LogId, SnapshotMeta, StorageError, TypeConfig};

/// The snapshot builds of a node, as the tests steer and watch them.
#[derive(Debug, Default)]
pub struct Builds {
    /// Milliseconds each build is held back while it makes its image (a slow
    /// build), settable while the node runs.
    stall: Arc<AtomicU64>,
    /// Builds under way now.
    under_way: AtomicU64,
    /// Builds made by replaying the log (not by encoding the live state).
    replayed: AtomicU64,
}

impl Builds {
    /// The milliseconds each build is held back from now on.
    pub fn stall(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.stall)
    }

    /// How many builds are under way now.
    pub fn under_way(&self) -> u64 {
        self.under_way.load(Ordering::SeqCst)
    }

    /// How many builds were made by replaying the log onto the snapshot on
    /// disk.
    pub fn replayed(&self) -> u64 {
        self.replayed.load(Ordering::SeqCst)
    }

    fn hold(&self) {
        let ms = self.stall.load(Ordering::Relaxed);
        if ms > 0 {
            std::thread::sleep(Duration::from_millis(ms));
        }
    }
}

/// Counts a build under way for as long as it lives.
struct UnderWay(Arc<Builds>);

impl UnderWay {
    fn new(builds: &Arc<Builds>) -> UnderWay {
        builds.under_way.fetch_add(1, Ordering::SeqCst);
        UnderWay(Arc::clone(builds))
    }
}

impl Drop for UnderWay {
    fn drop(&mut self) {
        self.0.under_way.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Builds a snapshot of the state as it is when asked.
#[derive(Debug)]
pub struct SnapshotBuilder {
    pub(super) view: StateView,
    pub(super) dir: PathBuf,
    /// The node's log, to replay what follows the snapshot on disk (None: the
    /// live state is encoded under its lock).
    pub(super) log: Option<LogReader>,
}

/// Why a build falls back to encoding the live state.
#[derive(Debug)]
struct NoReplay;

/// What a replay gave.
enum Replayed {
    /// The image of the state at the asked id.
    Image(Vec<u8>),
    /// The snapshot on disk is of that state or a later one already.
    Saved(SnapshotMeta, Vec<u8>),
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let builds = Arc::clone(&self.view.builds);
        let _under_way = UnderWay::new(&builds);
        if let Some(log) = self.log.clone() {
            let (meta, clock) = self.view.lock().point();
            if let Some(upto) = meta.last_log_id {
                match replay(&self.dir, log, upto, clock, Arc::clone(&builds)).await {
                    Ok(Replayed::Image(image)) => {
                        builds.replayed.fetch_add(1, Ordering::SeqCst);
                        return finish(&self.view, self.dir.clone(), meta, image).await;
                    }
                    Ok(Replayed::Saved(meta, image)) => {
                        return Ok(Snapshot {
                            meta,
                            snapshot: Box::new(Cursor::new(image)),
                        })
                    }
                    Err(NoReplay) => {}
                }
            }
        }
        let (meta, image) = {
            let mut state = self.view.lock();
            let (meta, clock) = state.point();
            let mut image = Vec::new();
            state.replica.write_image(clock, &mut image);
            builds.hold();
            (meta, image)
        };
        finish(&self.view, self.dir.clone(), meta, image).await
    }
}

/// The image of the state at `upto` with clock `clock`: the snapshot file in
/// `dir` and the entries of `log` after it, applied off the runtime's threads.
async fn replay(
    dir: &Path,
    mut log: LogReader,
    upto: LogId,
    clock: i64,
    builds: Arc<Builds>,
) -> Result<Replayed, NoReplay> {
    let dir = dir.to_path_buf();
    let base = tokio::task::spawn_blocking(move || -> Result<_, NoReplay> {
        match snapshot::load(&dir).map_err(|_| NoReplay)? {
            Some((meta, image)) if meta.last_log_id >= Some(upto) => Ok(Err((meta, image))),
            Some((meta, image)) => {
                let (replica, _) = Replica::read_image(&image).map_err(|_| NoReplay)?;
                Ok(Ok((replica, meta.last_log_id)))
            }
            None => Ok(Ok((Replica::new(), None))),
        }
    })
    .await
    .map_err(|_| NoReplay)??;
    let (mut replica, mut last) = match base {
        Ok(base) => base,
        Err((meta, image)) => return Ok(Replayed::Saved(meta, image)),
    };
    let mut next = last.map_or(0, |l| l.index + 1);
    while next <= upto.index {
        // At most a bounded run read from disk at a time.
        let entries = log
            .limited_get_log_entries(next, upto.index + 1)
            .await
            .map_err(|_| NoReplay)?;
        if entries.first().map(|e| e.log_id.index) != Some(next) {
            return Err(NoReplay);
        }
        let applied = tokio::task::spawn_blocking(move || -> Result<_, NoReplay> {
            for (at, entry) in (next..).zip(&entries) {
                if entry.log_id.index != at {
                    return Err(NoReplay);
                }
                if let EntryPayload::Normal(batch) = &entry.payload {
                    replica.apply_run(&batch.records).map_err(|_| NoReplay)?;
                }
            }
            let last = entries.last().map(|e| e.log_id);
            Ok((replica, last))
        })
        .await
        .map_err(|_| NoReplay)??;
        (replica, last) = applied;
        next = last.map_or(next, |l| l.index + 1);
    }
    // The entries replayed are those the state applied, not others that took
    // their places in the log since.
    if last != Some(upto) {
        return Err(NoReplay);
    }
    let image = tokio::task::spawn_blocking(move || {
        let mut image = Vec::new();
        replica.write_image(clock, &mut image);
        drop(replica);
        builds.hold();
        image
    })
    .await
    .map_err(|_| NoReplay)?;
    Ok(Replayed::Image(image))
}

/// Save `image` as the snapshot `meta` and hand it to openraft.
async fn finish(
    view: &StateView,
    dir: PathBuf,
    meta: SnapshotMeta,
    image: Vec<u8>,
) -> Result<Snapshot<TypeConfig>, StorageError> {
    let image = save_file(view, dir, &meta, image).await?;
    Ok(Snapshot {
        meta,
        snapshot: Box::new(Cursor::new(image)),
    })
}

/// Write the snapshot file off the runtime's threads, unless the file on disk
/// is of a later state already; then record it as the current snapshot.
/// Gives the image back.
pub(super) async fn save_file(
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
