//! Building a snapshot ([`SnapshotBuilder`]) without holding the state while
//! its image is made.
//!
//! The live state is locked only to read where it stands: the last applied log
//! id, the membership and the replicated clock. The image of the state at that
//! id is then made the way a restart makes the state: the snapshot file on disk
//! read back, the log's entries after it up to that id applied to it, in a
//! replica of the build's own, on a thread of the build's own that runs at a
//! lower priority than the node's others (its log reads go through the
//! runtime, as replication's do). Encoding the
//! live state instead held its lock, and with it every apply and the node's
//! Raft thread (which sends the heartbeats and, on a leader, serves the
//! clients), for as long as the whole queue took to encode: a second per
//! million jobs or so, and past the followers' election timeout with a few
//! million (`bench/README.md`). That costs a replay's CPU, which the lower
//! priority leaves to what the Raft threads do not use, and, while it runs, a
//! second copy of the state; it holds no one up.
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
    /// Milliseconds each build is held back as it starts to make its image (a
    /// slow build; under the state's lock where it encodes the live state),
    /// settable while the node runs.
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
                    Ok(Replayed::Saved(meta, image)) => return Ok(snapshot_of(meta, image)),
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

/// How much lower than the node's other threads a build's thread runs
/// (`nice`): a build is work for spare CPU, and on a busy machine the Raft
/// threads' heartbeats and commits go first.
const BUILD_NICE: libc::c_int = 10;

/// The image of the state at `upto` with clock `clock`: the snapshot file in
/// `dir` and the entries of `log` after it, applied on a thread of the build's
/// own at a lower priority than the node's other threads.
async fn replay(
    dir: &Path,
    log: LogReader,
    upto: LogId,
    clock: i64,
    builds: Arc<Builds>,
) -> Result<Replayed, NoReplay> {
    let dir = dir.to_path_buf();
    let runtime = tokio::runtime::Handle::current();
    // A oneshot: the thread's one answer, awaited without blocking the runtime.
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("beanpole-snapshot".into())
        .spawn(move || {
            lower_priority();
            let _ = tx.send(replay_here(&runtime, &dir, log, upto, clock, &builds));
        })
        .map_err(|_| NoReplay)?;
    rx.await.map_err(|_| NoReplay)?
}

/// [`replay`], on the calling thread (not a runtime's): the log's reads are
/// run on `runtime`.
fn replay_here(
    runtime: &tokio::runtime::Handle,
    dir: &Path,
    mut log: LogReader,
    upto: LogId,
    clock: i64,
    builds: &Builds,
) -> Result<Replayed, NoReplay> {
    builds.hold();
    let (mut replica, mut last) = match snapshot::load(dir).map_err(|_| NoReplay)? {
        Some((meta, image)) if meta.last_log_id >= Some(upto) => {
            return Ok(Replayed::Saved(meta, image))
        }
        Some((meta, image)) => {
            let (replica, _) = Replica::read_image(&image).map_err(|_| NoReplay)?;
            (replica, meta.last_log_id)
        }
        None => (Replica::new(), None),
    };
    let mut next = last.map_or(0, |l| l.index + 1);
    while next <= upto.index {
        // At most a bounded run read from disk at a time.
        let entries = runtime
            .block_on(log.limited_get_log_entries(next, upto.index + 1))
            .map_err(|_| NoReplay)?;
        if entries.is_empty() {
            return Err(NoReplay);
        }
        for (at, entry) in (next..).zip(&entries) {
            if entry.log_id.index != at {
                return Err(NoReplay);
            }
            if let EntryPayload::Normal(batch) = &entry.payload {
                replica.apply_run(&batch.records).map_err(|_| NoReplay)?;
            }
            last = Some(entry.log_id);
        }
        next = last.map_or(next, |l| l.index + 1);
    }
    // The entries replayed are those the state applied, not others that took
    // their places in the log since.
    if last != Some(upto) {
        return Err(NoReplay);
    }
    let mut image = Vec::new();
    replica.write_image(clock, &mut image);
    drop(replica);
    Ok(Replayed::Image(image))
}

/// Run the calling thread at [`BUILD_NICE`] (Linux: a thread's own priority).
/// Raising one's nice value needs no privilege; a failure leaves it as it was.
fn lower_priority() {
    // SAFETY: plain system calls about this thread's own scheduling; no memory
    // of ours is read or written.
    unsafe {
        let tid = libc::gettid();
        if let Ok(tid) = libc::id_t::try_from(tid) {
            libc::setpriority(libc::PRIO_PROCESS, tid, BUILD_NICE);
        }
    }
}

/// Save `image` as the snapshot `meta` and hand it to openraft.
async fn finish(
    view: &StateView,
    dir: PathBuf,
    meta: SnapshotMeta,
    image: Vec<u8>,
) -> Result<Snapshot<TypeConfig>, StorageError> {
    let image = save_file(view, dir, &meta, image).await?;
    Ok(snapshot_of(meta, image))
}

/// The snapshot `meta` with its `image`, as openraft takes it.
pub(super) fn snapshot_of(meta: SnapshotMeta, image: Vec<u8>) -> Snapshot<TypeConfig> {
    Snapshot {
        meta,
        snapshot: Box::new(Cursor::new(image)),
    }
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
