//! What the TCP tests share: journal records to replicate, and a node (its
//! storage in a directory of its own, its transport, its peer server).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use beanpole_cluster::identity::Identity;
use beanpole_cluster::net::{NetConfig, Network, PeerServer};
use beanpole_cluster::types::{Batch, NodeId, Peer, Raft};
use beanpole_cluster::{open_storage, StateView};
use beanpole_engine::wal::format::{JobFields, JobRecord, Record, StoredState};
use bytes::Bytes;
use openraft::Config;
use tokio::net::TcpListener;

pub type Error = Box<dyn std::error::Error + Send + Sync>;

pub fn put(id: u64, body: &[u8]) -> Record {
    Record::Job(JobRecord {
        fields: JobFields {
            id,
            pri: 1024,
            delay: 0,
            ttr: 60,
            state: StoredState::Ready,
            created: 1_700_000_000_000_000_000,
            ready_at: 0,
            bury_seq: 0,
            reserves: 0,
            timeouts: 0,
            releases: 0,
            buries: 0,
            kicks: 0,
        },
        tube: b"default".to_vec(),
        body: body.to_vec(),
    })
}

pub fn batch(at: i64, records: &[Record]) -> Batch {
    let mut bytes = Vec::new();
    for r in records {
        r.encode(&mut bytes);
    }
    Batch {
        at,
        records: Bytes::from(bytes),
    }
}

/// Quick elections, as the in-process test uses.
pub fn quick() -> Config {
    Config {
        heartbeat_interval: 50,
        election_timeout_min: 200,
        election_timeout_max: 400,
        ..Config::default()
    }
}

/// One node: its Raft, its state machine's view, its peer server.
pub struct Node {
    pub id: NodeId,
    pub raft: Raft,
    pub view: StateView,
    pub identity: Arc<Identity>,
    pub peer: SocketAddr,
    pub server: Option<PeerServer>,
    pub dir: tempfile::TempDir,
    /// Milliseconds this node's log fsyncs are held back (a slow disk).
    pub stall: Arc<std::sync::atomic::AtomicU64>,
}

impl Node {
    /// Start node `id` serving peers on `listener`.
    pub async fn start(
        id: NodeId,
        listener: TcpListener,
        config: Arc<Config>,
    ) -> Result<Node, Error> {
        Node::start_with(id, listener, config, NetConfig::default()).await
    }

    /// [`Node::start`], with transport settings of the test's (the peer server
    /// takes the defaults).
    pub async fn start_with(
        id: NodeId,
        listener: TcpListener,
        config: Arc<Config>,
        net: NetConfig,
    ) -> Result<Node, Error> {
        let dir = tempfile::tempdir()?;
        let identity = Arc::new(Identity::open(dir.path(), id)?);
        let (log, sm) = open_storage(dir.path())?;
        let stall = log.sync_stall();
        let view = sm.view();
        let network = Network::new(Arc::clone(&identity), net);
        let raft = Raft::new(id, config, network, log, sm).await?;
        let peer = listener.local_addr()?;
        let server = PeerServer::start(
            listener,
            raft.clone(),
            Arc::clone(&identity),
            NetConfig::default(),
        )?;
        Ok(Node {
            id,
            raft,
            view,
            identity,
            peer,
            server: Some(server),
            dir,
            stall,
        })
    }

    /// Close its peer server: no node reaches it any more.
    pub async fn cut(&mut self) {
        if let Some(server) = self.server.take() {
            server.stop().await;
        }
    }

    /// Serve peers again on the same address.
    pub async fn mend(&mut self) -> Result<(), Error> {
        let listener = TcpListener::bind(self.peer).await?;
        self.server = Some(PeerServer::start(
            listener,
            self.raft.clone(),
            Arc::clone(&self.identity),
            NetConfig::default(),
        )?);
        Ok(())
    }

    /// The ids of the jobs its state machine holds.
    pub fn jobs(&self) -> Vec<u64> {
        let state = self.view.lock();
        state.replica.jobs().map(|j| j.fields.id).collect()
    }
}

/// Three nodes on loopback ports of their own, initialized by node 1 (which
/// makes the cluster's id), with a leader elected.
pub async fn three(config: Config) -> Result<(Vec<Node>, NodeId), Error> {
    three_with(config, |_| NetConfig::default()).await
}

/// [`three`], each node's transport set up by `net` (given its id).
pub async fn three_with(
    config: Config,
    net: impl Fn(NodeId) -> NetConfig,
) -> Result<(Vec<Node>, NodeId), Error> {
    let config = Arc::new(config.validate()?);
    let mut listeners = Vec::new();
    let mut members = BTreeMap::new();
    for id in 1..=3u64 {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        members.insert(
            id,
            Peer {
                client: format!("127.0.0.1:{}", 11300 + id),
                peer: listener.local_addr()?.to_string(),
            },
        );
        listeners.push((id, listener));
    }
    let mut nodes = Vec::new();
    for (id, listener) in listeners {
        nodes.push(Node::start_with(id, listener, Arc::clone(&config), net(id)).await?);
    }
    nodes[0].identity.found()?;
    nodes[0].raft.initialize(members).await?;
    let leader = leader(&nodes).await?;
    Ok((nodes, leader))
}

/// The leader every node agrees on, waiting for one (with a deadline).
pub async fn leader(nodes: &[Node]) -> Result<NodeId, Error> {
    let first = nodes[0]
        .raft
        .wait(Some(std::time::Duration::from_secs(10)))
        .metrics(|m| m.current_leader.is_some(), "a leader is elected")
        .await?;
    let leader = first.current_leader.ok_or("no leader")?;
    for node in nodes {
        node.raft
            .wait(Some(std::time::Duration::from_secs(10)))
            .current_leader(leader, format!("node {} knows the leader", node.id))
            .await?;
    }
    Ok(leader)
}

/// Wait until node `node` has applied `index`.
pub async fn applied(node: &Node, index: u64) -> Result<(), Error> {
    node.raft
        .wait(Some(std::time::Duration::from_secs(15)))
        .applied_index_at_least(Some(index), format!("node {} applies {index}", node.id))
        .await?;
    Ok(())
}

pub async fn shutdown(nodes: Vec<Node>) -> Result<(), Error> {
    for mut node in nodes {
        node.cut().await;
        node.raft.shutdown().await?;
    }
    Ok(())
}
