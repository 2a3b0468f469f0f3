//! What a node is started with ([`NodeConfig`], with the default Raft timing
//! and why), and why it cannot start ([`NodeError`]).

use std::os::fd::RawFd;
use std::path::PathBuf;
use std::time::Duration;

use beanpole_engine::server::ServerConfig;
use thiserror::Error;

use crate::file::{ClusterFile, FileError};
use crate::identity::IdentityError;
use crate::net::NetConfig;
use crate::types::NodeId;
use crate::OpenError;

/// What a node is started with.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub file: ClusterFile,
    pub id: NodeId,
    /// The data directory (`-b`).
    pub dir: PathBuf,
    /// The engine settings of the server clients use while this node leads
    /// (job size, threads, limits, and `session_grace`: how long the
    /// reservations of a client whose node is gone outlive it); its addresses
    /// come from the cluster file.
    pub server: ServerConfig,
    pub raft: openraft::Config,
    pub net: NetConfig,
    /// Listening sockets for the client and peer addresses, already bound by
    /// the caller (an embedded cluster binds them first, so that no other
    /// program can take its ports meanwhile); each is duplicated, the caller
    /// keeps its own. None: bind the file's addresses.
    pub client_fd: Option<RawFd>,
    pub peer_fd: Option<RawFd>,
    /// Say on stderr when this node starts and stops serving clients itself.
    pub announce: bool,
    /// How long a client's reply waits for its commit (a majority's fsync);
    /// past it the client gets `INTERNAL_ERROR` and its connection closes.
    pub commit_timeout: Duration,
    /// Snapshot when the log's records after the last snapshot are more than
    /// this many bytes and, with that snapshot's image, more than half
    /// garbage (`snapshots.rs`).
    pub snapshot_bytes: u64,
    /// The records' bytes of the Raft log kept in memory: older committed
    /// entries are read back from disk when a follower behind or a restart
    /// asks for them (`logstore/cache.rs`).
    pub log_cache_bytes: u64,
    /// Whether the Raft log's appends are fsynced before they count (true);
    /// false (`-F`): a majority's acknowledgement means written to their
    /// operating systems, which a machine's crash can lose.
    pub fsync: bool,
}

impl NodeConfig {
    /// A node with the default Raft timing: heartbeats every 50 ms, election
    /// timeouts of 250-500 ms.
    ///
    /// In openraft 0.9 a follower campaigns once it has heard nothing for the
    /// leader lease (`election_timeout_max`) plus its own election timeout
    /// (drawn once per process from `min..max`), checked on ticks every 1.5
    /// heartbeats; and a follower refuses votes for the lease after its last
    /// heartbeat. So a dead leader is replaced after 750-1,000 ms plus up to
    /// a tick (`bench/cluster_bench.py`: 0.9 s p50; 100/400-800 gave 1.5 s),
    /// and a leader whose Raft core stalls for less than 750 ms (it waits for
    /// each append's fsync) causes no election. 200-400 ms replaced a leader
    /// in 0.77 s but held elections under disk pressure from another process.
    pub fn new(file: ClusterFile, id: NodeId, dir: PathBuf) -> NodeConfig {
        NodeConfig {
            file,
            id,
            dir,
            server: ServerConfig::default(),
            raft: openraft::Config {
                cluster_name: "beanpole".into(),
                heartbeat_interval: 50,
                election_timeout_min: 250,
                election_timeout_max: 500,
                // Entries carry whole passes: keep few behind a snapshot (a
                // follower further behind gets the snapshot).
                max_in_snapshot_log_to_keep: 8,
                // Snapshots by bytes of log against the state's size
                // (`snapshots.rs`), not every 5,000 entries.
                snapshot_policy: openraft::SnapshotPolicy::Never,
                ..openraft::Config::default()
            },
            net: NetConfig::default(),
            client_fd: None,
            peer_fd: None,
            announce: true,
            commit_timeout: Duration::from_secs(5),
            snapshot_bytes: 64 << 20,
            log_cache_bytes: crate::logstore::KEEP_BYTES,
            fsync: true,
        }
    }
}

/// How long a commit vouches for this node's lead, from its proposal: the
/// others refuse to vote for openraft's leader lease (the election timeout's
/// maximum) after accepting an entry; a quarter of it is left as a margin for
/// the clocks of other machines and for scheduling.
pub(super) fn read_lease(raft: &openraft::Config) -> Duration {
    Duration::from_millis(raft.election_timeout_max) * 3 / 4
}

/// Why a node cannot start; each is one line.
#[derive(Debug, Error)]
pub enum NodeError {
    #[error(transparent)]
    File(#[from] FileError),
    #[error(transparent)]
    Identity(#[from] IdentityError),
    #[error(transparent)]
    Storage(#[from] OpenError),
    #[error("data directory {dir}: {source}")]
    Dir { dir: String, source: std::io::Error },
    #[error("cannot listen on {addr} ({what} of node {id}): {source}")]
    Bind {
        addr: String,
        what: &'static str,
        id: NodeId,
        source: std::io::Error,
    },
    #[error("raft: {0}")]
    Raft(String),
    #[error("cannot start the node: {0}")]
    Runtime(std::io::Error),
}
