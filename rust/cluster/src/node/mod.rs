//! A cluster node as `beanpole serve --cluster FILE --node N -b DIR` runs it:
//! its data directory (locked, marked with its node and cluster), its Raft
//! instance with the log storage and state machine, the server its peers reach
//! it on, and the engine's server for clients while it leads (`leader.rs`,
//! with `propose.rs` taking the leader's records into the log and `door.rs`
//! closing client connections while it does not lead).
//!
//! Everything runs on a runtime of the node's own; a leading term's engine
//! server runs on its own runtime as a single node's does.

mod door;
mod leader;
mod propose;

use std::net::TcpListener as StdListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use beanpole_engine::server::ServerConfig;
use beanpole_engine::wal::fs::DirLock;
use openraft::ServerState;
use thiserror::Error;
use tokio::runtime::Runtime;
use tokio::sync::watch;

use crate::file::{ClusterFile, FileError};
use crate::identity::{Identity, IdentityError};
use crate::net::{NetConfig, Network, PeerServer};
use crate::types::{NodeId, Raft};
use crate::{open_storage, OpenError};

pub use self::propose::wall_now;

/// What a node is started with.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub file: ClusterFile,
    pub id: NodeId,
    /// The data directory (`-b`).
    pub dir: PathBuf,
    /// The engine settings of the server clients use while this node leads
    /// (job size, threads, limits); its addresses come from the cluster file.
    pub server: ServerConfig,
    pub raft: openraft::Config,
    pub net: NetConfig,
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
                ..openraft::Config::default()
            },
            net: NetConfig::default(),
        }
    }
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

/// What a node says of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStatus {
    pub id: NodeId,
    /// `leader`, `follower`, `candidate`, `learner` or `down` (stopped).
    pub role: &'static str,
    pub term: u64,
    pub leader: Option<NodeId>,
    /// The last log index applied to the state machine.
    pub applied: u64,
    /// The last log index in this node's log.
    pub last_log: u64,
    /// Whether this node's client server runs (it leads and has caught up).
    pub serving: bool,
}

/// A running node.
pub struct Node {
    runtime: Option<Runtime>,
    raft: Raft,
    peer: Option<PeerServer>,
    leading: Option<tokio::task::JoinHandle<()>>,
    serving: watch::Receiver<Option<u64>>,
    client: Arc<StdListener>,
    id: NodeId,
    _lock: DirLock,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Node {
    /// Open the data directory, bind both addresses, start Raft and, on the
    /// lowest id of a cluster never initialized, initialize it with the file's
    /// nodes. Returns once both addresses listen.
    pub fn start(config: NodeConfig) -> Result<Node, NodeError> {
        let entry = config.file.node(config.id)?.clone();
        let dir_err = |source| NodeError::Dir {
            dir: config.dir.display().to_string(),
            source,
        };
        std::fs::create_dir_all(&config.dir).map_err(dir_err)?;
        let lock = DirLock::acquire(&config.dir).map_err(dir_err)?;
        let identity = Arc::new(Identity::open(&config.dir, config.id)?);
        let (log, sm) = open_storage(&config.dir)?;
        let view = sm.view();
        let bind = |addr: &str, what| {
            StdListener::bind(addr).map_err(|source| NodeError::Bind {
                addr: addr.to_owned(),
                what,
                id: config.id,
                source,
            })
        };
        let client = Arc::new(bind(&entry.client, "client address")?);
        let peer_listener = bind(&entry.peer, "peer address")?;
        peer_listener
            .set_nonblocking(true)
            .map_err(NodeError::Runtime)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("beanpole-raft")
            .enable_all()
            .build()
            .map_err(NodeError::Runtime)?;
        let raft_config = Arc::new(
            config
                .raft
                .clone()
                .validate()
                .map_err(|e| NodeError::Raft(e.to_string()))?,
        );
        let lowest = config.file.members().keys().next().copied();
        let (serving_tx, serving) = watch::channel(None);
        let (raft, peer, leading) = runtime.block_on(async {
            let network = Network::new(Arc::clone(&identity), config.net.clone());
            let raft = Raft::new(config.id, raft_config, network, log, sm)
                .await
                .map_err(|e| NodeError::Raft(e.to_string()))?;
            let listener =
                tokio::net::TcpListener::from_std(peer_listener).map_err(NodeError::Runtime)?;
            let peer = PeerServer::start(
                listener,
                raft.clone(),
                Arc::clone(&identity),
                config.net.clone(),
            )
            .map_err(NodeError::Runtime)?;
            let pristine = !raft
                .is_initialized()
                .await
                .map_err(|e| NodeError::Raft(e.to_string()))?;
            if pristine && lowest == Some(config.id) && identity.cluster().is_unset() {
                identity.found()?;
                raft.initialize(config.file.members())
                    .await
                    .map_err(|e| NodeError::Raft(e.to_string()))?;
            }
            let leading = tokio::spawn(leader::run(leader::Leading {
                id: config.id,
                raft: raft.clone(),
                view,
                server: config.server.clone(),
                client: Arc::clone(&client),
                instance: format!("cluster-{}", identity.cluster()),
                serving: serving_tx,
            }));
            Ok::<_, NodeError>((raft, peer, leading))
        })?;
        Ok(Node {
            runtime: Some(runtime),
            raft,
            peer: Some(peer),
            leading: Some(leading),
            serving,
            client,
            id: config.id,
            _lock: lock,
        })
    }

    /// The address clients connect to.
    pub fn client_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.client.local_addr()
    }

    /// The node's view of the cluster now.
    pub fn status(&self) -> NodeStatus {
        if self.runtime.is_none() {
            return NodeStatus {
                id: self.id,
                role: "down",
                term: 0,
                leader: None,
                applied: 0,
                last_log: 0,
                serving: false,
            };
        }
        let m = self.raft.metrics().borrow().clone();
        NodeStatus {
            id: self.id,
            role: match m.state {
                ServerState::Leader => "leader",
                ServerState::Follower => "follower",
                ServerState::Candidate => "candidate",
                ServerState::Learner => "learner",
                ServerState::Shutdown => "down",
            },
            term: m.current_term,
            leader: m.current_leader,
            applied: m.last_applied.map_or(0, |l| l.index),
            last_log: m.last_log_index.unwrap_or(0),
            serving: self.serving.borrow().is_some(),
        }
    }

    /// Wait at most `timeout` until this node serves clients (it leads and has
    /// caught up); true if it does.
    pub fn wait_serving(&self, timeout: Duration) -> bool {
        let Some(runtime) = &self.runtime else {
            return false;
        };
        let mut serving = self.serving.clone();
        runtime.block_on(async {
            tokio::time::timeout(timeout, serving.wait_for(Option::is_some))
                .await
                .is_ok_and(|r| r.is_ok())
        })
    }

    /// Stop serving clients and peers, shut Raft down (its log writer syncs
    /// what it has) and end the node's runtime. Safe to call twice.
    pub fn stop(&mut self) {
        let Some(runtime) = self.runtime.take() else {
            return;
        };
        runtime.block_on(async {
            let _ = self.raft.shutdown().await;
            if let Some(leading) = self.leading.take() {
                // The metrics channel closes with Raft: the task stops its
                // term's server and ends.
                let _ = tokio::time::timeout(Duration::from_secs(5), leading).await;
            }
            if let Some(peer) = self.peer.take() {
                peer.stop().await;
            }
        });
        runtime.shutdown_timeout(Duration::from_secs(2));
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop();
    }
}
