//! The Raft type configuration and the application's types in it: what a log
//! entry carries ([`Batch`]), what applying one answers ([`Applied`]) and what a
//! node is ([`Peer`]).
//!
//! Imports openraft and `bytes` only; the encoding of these types is `codec.rs`.

use std::io::Cursor;

use bytes::Bytes;

/// A node's id, as in `cluster.toml`.
pub type NodeId = u64;

/// One replicated change: the journal records one pass of the leader's store
/// made (one client command or one pipelined batch of them), encoded exactly as
/// the engine's write-ahead log writes them, and the leader's replicated clock
/// when it made them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    /// Wall-clock nanoseconds since 1970 on the replicated clock: never lower
    /// than any earlier entry's, whichever leader made it.
    pub at: i64,
    /// Back-to-back framed records (`wal::format`), at least one.
    pub records: Bytes,
}

/// What applying an entry answers: how many records it applied (0 for a blank
/// or membership entry). The leader already knows its clients' replies; this
/// lets it check the entry was applied whole.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Applied {
    pub records: u32,
}

/// A member of the cluster: where beanstalkd clients connect and where the
/// other nodes reach it.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Peer {
    pub client: String,
    pub peer: String,
}

openraft::declare_raft_types!(
    /// beanpole's Raft types. A snapshot travels as one buffer: a segment image
    /// of the live jobs (`wal::replica`).
    pub TypeConfig:
        D = Batch,
        R = Applied,
        NodeId = NodeId,
        Node = Peer,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// A log entry of this configuration.
pub type Entry = openraft::Entry<TypeConfig>;
/// A log id.
pub type LogId = openraft::LogId<NodeId>;
/// A vote.
pub type Vote = openraft::Vote<NodeId>;
/// A membership (joint configs and the nodes' addresses).
pub type Membership = openraft::Membership<NodeId, Peer>;
/// A membership with the log id that set it.
pub type StoredMembership = openraft::StoredMembership<NodeId, Peer>;
/// Snapshot metadata.
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, Peer>;
/// The storage error openraft expects from storage.
pub type StorageError = openraft::StorageError<NodeId>;
/// A Raft instance of this configuration.
pub type Raft = openraft::Raft<TypeConfig>;
