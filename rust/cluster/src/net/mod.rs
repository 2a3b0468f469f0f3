//! The TCP transport between nodes: openraft's `RaftNetworkFactory` and
//! `RaftNetwork` ([`client`]) over length-prefixed frames of our own
//! ([`wire`]), and the server that accepts peers on a node's `peer` address and
//! hands their requests to the local Raft ([`server`]).
//!
//! A connection opens with a handshake that names both nodes and the cluster
//! ([`crate::identity`]): a node of another cluster, or a connection that
//! reached the wrong node, is refused. Connections are kept per peer and
//! reused; a failed or timed-out one is dropped and the next call dials again.

pub mod attach;
pub mod client;
pub mod handover;
pub mod members;
pub mod mux;
pub mod server;
pub mod status;
pub mod wire;

use std::io;
use std::time::Duration;

use thiserror::Error;

use crate::identity::{ClusterId, IdentityError};
use crate::types::NodeId;

pub use self::client::{Network, PeerLink};
pub use self::server::{CatchUp, Hooks, PeerServer, PeerWatch, VoteFence};

/// The transport's settings.
#[derive(Debug, Clone)]
pub struct NetConfig {
    /// The longest a connect and its handshake may take (a call's own
    /// deadline, openraft's TTL, bounds it too).
    pub connect_timeout: Duration,
    /// How long openraft waits before calling a node it could not reach again.
    pub backoff: Duration,
    /// The largest frame sent or accepted. An append larger than this is
    /// returned to openraft as too large, which sends fewer entries.
    pub max_frame: usize,
    /// Once a frame has begun, the longest its rest may take to arrive.
    pub frame_timeout: Duration,
    /// Connections idle in a peer's pool at most; more are closed.
    pub idle_per_peer: usize,
    /// Peer connections a server serves at once; more are closed at accept.
    pub max_connections: usize,
    /// The token a membership change must carry (`members.rs`); None: this
    /// node takes none.
    pub admin_token: Option<String>,
    /// The term server this node runs while it leads, for sessions its
    /// followers attach (`attach.rs`); None: it takes none. A watch channel:
    /// only the latest value matters.
    pub serving:
        Option<tokio::sync::watch::Receiver<Option<(u64, beanpole_engine::server::Admin)>>>,
    /// How far this node's own log is on disk (`LogStore::durable`): an append
    /// sent carries no commit beyond it, and a membership change is answered
    /// once it is there. None: the log reports nothing durable early.
    pub durable: Option<crate::logstore::Durable>,
    /// Told what each refused vote request of this node's said, in place of
    /// openraft (`client.rs`, [`Refusal`]). None: openraft is told as it is.
    pub refusals: Option<std::sync::Arc<dyn Refusals>>,
    /// The runtime that carries the links followers open for their sessions
    /// (`mux`); None: the peer server's own.
    pub links_on: Option<tokio::runtime::Handle>,
}

/// What a refused vote request of this node's said about the voter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Its log is longer than this node's.
    LongerLog,
    /// It stands in this node's term itself, with a log shorter than this
    /// node's.
    RivalBehind,
}

/// Decides when a node stands again after a refused vote (`node/campaign.rs`).
pub trait Refusals: Send + Sync + std::fmt::Debug {
    fn refused(&self, why: Refusal);
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            connect_timeout: Duration::from_millis(500),
            backoff: Duration::from_millis(200),
            max_frame: 256 << 20,
            frame_timeout: Duration::from_secs(10),
            idle_per_peer: 4,
            max_connections: 64,
            admin_token: None,
            serving: None,
            durable: None,
            refusals: None,
            links_on: None,
        }
    }
}

/// Why a call to a peer failed. [`client`] maps each to openraft's kind:
/// connecting and refusals are `Unreachable` (openraft backs off), a link that
/// broke mid-call or answered nonsense is a `NetworkError`, an expired deadline
/// a `Timeout`.
#[derive(Debug, Error)]
pub enum NetError {
    #[error("cannot connect to node {target} at {addr}: {source}")]
    Connect {
        target: NodeId,
        addr: String,
        source: io::Error,
    },
    #[error("node {target} at {addr} refused this node: {reason}")]
    Refused {
        target: NodeId,
        addr: String,
        reason: String,
    },
    #[error("{addr} is node {found}, not node {target}")]
    WrongNode {
        target: NodeId,
        addr: String,
        found: NodeId,
    },
    #[error("node {target} at {addr} belongs to cluster {theirs}, this node to cluster {ours}")]
    OtherCluster {
        target: NodeId,
        addr: String,
        theirs: ClusterId,
        ours: ClusterId,
    },
    #[error("cluster identity: {0}")]
    Identity(#[from] IdentityError),
    #[error("link to node {target} at {addr} broke: {source}")]
    Io {
        target: NodeId,
        addr: String,
        source: io::Error,
    },
    #[error("node {target} at {addr} answered a bad frame: {reason}")]
    Protocol {
        target: NodeId,
        addr: String,
        reason: String,
    },
    #[error("a request of {size} bytes is over the {max}-byte frame limit")]
    TooLarge { size: usize, max: usize },
    #[error("node {target} at {addr} did not answer within {after:?}")]
    Timeout {
        target: NodeId,
        addr: String,
        after: Duration,
    },
}
