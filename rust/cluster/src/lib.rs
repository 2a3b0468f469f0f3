//! beanpole's replicated mode: the pieces openraft needs, built on the engine's
//! journal (design: `docs/cluster.md`).
//!
//! * [`types`]: the Raft type configuration; a log entry is a [`types::Batch`],
//!   the journal records of one pass of the leader's store;
//! * [`codec`]: byte layouts of entries, votes, memberships, snapshot metadata;
//! * [`logstore`]: the Raft log on disk (`RaftLogStorage`), group-committed by
//!   a writer thread;
//! * [`sm`]: the state machine (`RaftStateMachine`), the engine's replica of
//!   the queue, and its snapshots ([`snapshot`]: the file);
//! * [`net`]: the TCP transport between nodes (`RaftNetwork` and the server
//!   that answers peers);
//! * [`identity`]: the data directory's marker of its node and cluster;
//! * [`file`]: the cluster file, `cluster.toml`, read and checked;
//! * [`node`]: a node as `serve --cluster` runs it: Raft, its peers' server,
//!   and the engine's server for clients while it leads;
//! * [`report`]: every node's status, for `beanpole cluster status`;
//! * [`synced`]: what the storage has fsynced, recorded for the fault
//!   harness's simulated power loss when the environment asks for it.
//!
//! The engine never imports this crate: a server without a cluster runs exactly
//! as before. This crate imports from the engine `wal::replica` (and the
//! record format through it), `wal::replicate` (the leader's store journaling
//! into Raft) and the server handle a leader serves clients with.

pub mod codec;
pub mod file;
pub mod identity;
pub mod logstore;
pub mod net;
pub mod node;
pub mod report;
mod say;
pub mod sm;
pub mod snapshot;
pub mod synced;
pub mod types;

use std::path::Path;

use thiserror::Error;

pub use self::logstore::{LogError, LogStore};
pub use self::sm::{StateMachine, StateView};
pub use self::snapshot::SnapshotError;

/// Why a node's storage could not be opened.
#[derive(Debug, Error)]
pub enum OpenError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
}

/// Open a node's storage in `dir`: the Raft log in `dir/raft`, the state
/// machine's snapshot in `dir/sm`.
pub fn open_storage(dir: &Path) -> Result<(LogStore, StateMachine), OpenError> {
    open_storage_with(dir, true)
}

/// [`open_storage`]; with `fsync` false the log's appends are not synced
/// (`LogStore::open_with`).
pub fn open_storage_with(dir: &Path, fsync: bool) -> Result<(LogStore, StateMachine), OpenError> {
    let log = LogStore::open_with(&dir.join("raft"), fsync)?;
    let mut sm = StateMachine::open(&dir.join("sm"))?;
    sm.build_from(log.reader());
    Ok((log, sm))
}
