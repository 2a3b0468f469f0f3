//! A cluster node as `beanpole serve --cluster FILE --node N -b DIR` runs it:
//! its data directory (locked, marked with its node and cluster), its Raft
//! instance with the log storage and state machine, the server its peers reach
//! it on, and the engine's server for clients while it leads (`leader.rs`,
//! with `propose.rs` taking the leader's records into the log and `forward.rs`
//! forwarding client connections to the leader while it does not serve).
//!
//! Raft, its peer server, the leadership task and a leading term's engine
//! server run on a current-thread runtime of the node's own (`driven.rs`),
//! whose one thread also writes and syncs a follower's appends while the disk
//! is fast (`logstore/ops.rs`); forwarded client connections run on a second
//! one beside it, so that neither waits for the other.

pub mod campaign;
mod config;
mod driven;
mod forward;
mod handover;
mod leader;
mod linger;
mod propose;
mod rejoin;
mod snapshots;
pub mod track;
mod vacancy;

use std::net::TcpListener as StdListener;
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use beanpole_engine::server::Admin;
use beanpole_engine::stats::StatValue;
use beanpole_engine::wal::fs::DirLock;
use tokio::sync::watch;

use self::config::read_lease;
use self::driven::Driven;
use crate::identity::Identity;
use crate::net::{NetConfig, Network, PeerServer};
use crate::open_storage_with;
use crate::types::{NodeId, Raft};

pub use self::config::{NodeConfig, NodeError};
pub use self::handover::Outcome as HandoverOutcome;
pub use self::propose::wall_now;

/// Whether another node of the file already belongs to a cluster: then a new
/// directory on the lowest id is a node that lost its data (or a new one), which
/// must not found a second cluster; it waits to be added
/// (`beanpole cluster add`). Each node is asked for its status, briefly.
async fn cluster_exists(config: &NodeConfig) -> bool {
    let mut asks = tokio::task::JoinSet::new();
    for node in config.file.nodes.values().filter(|n| n.id != config.id) {
        let peer = node.peer.clone();
        asks.spawn(
            async move { crate::net::status::query(&peer, Duration::from_millis(300)).await },
        );
    }
    while let Some(answer) = asks.join_next().await {
        let Ok(Ok(status)) = answer else { continue };
        if !status.cluster.is_unset() {
            if config.announce {
                crate::say::say!(
                    "beanpole: node {}: node {} already belongs to cluster {}; not founding \
                     another (add this node with beanpole cluster add)",
                    config.id,
                    status.node,
                    status.cluster
                );
            }
            return true;
        }
    }
    false
}

/// A copy of the listening socket `fd`.
fn adopt(fd: RawFd) -> std::io::Result<StdListener> {
    // SAFETY: `fd` is a descriptor the caller owns and keeps open for this call;
    // it is only borrowed to be duplicated.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    Ok(StdListener::from(borrowed.try_clone_to_owned()?))
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
    /// The membership this node knows: voters and learners.
    pub voters: Vec<NodeId>,
    pub learners: Vec<NodeId>,
    /// On the leader, each member's log index known to match its own (None:
    /// not known yet); empty elsewhere.
    pub matched: Vec<(NodeId, Option<u64>)>,
    /// On the leader, milliseconds since a majority last acknowledged it.
    pub millis_since_quorum_ack: Option<u64>,
}

impl NodeStatus {
    /// The status of a node that does not run.
    pub fn down(id: NodeId) -> NodeStatus {
        NodeStatus {
            id,
            role: "down",
            term: 0,
            leader: None,
            applied: 0,
            last_log: 0,
            serving: false,
            voters: Vec::new(),
            learners: Vec::new(),
            matched: Vec::new(),
            millis_since_quorum_ack: None,
        }
    }
}

/// A running node.
pub struct Node {
    runtime: Option<Driven>,
    /// Forwarded clients' runtime; ended after `runtime`.
    forward_runtime: Option<Driven>,
    raft: Raft,
    peer: Option<PeerServer>,
    leading: Option<tokio::task::JoinHandle<()>>,
    serving: watch::Receiver<Option<(u64, Admin)>>,
    handover: Arc<handover::Handover>,
    client: Arc<StdListener>,
    /// Drain mode, shared with the leadership task (every term's server).
    draining: Arc<AtomicBool>,
    /// The size of the log held in memory.
    cache_size: crate::logstore::CacheSize,
    /// The state machine (for the size of its last snapshot).
    view: crate::sm::StateView,
    /// The log writer's fault knob (tests).
    sync_stall: Arc<std::sync::atomic::AtomicU64>,
    /// The log's reads back from disk, and their fault knob (tests).
    disk_reads: crate::logstore::DiskReads,
    /// How far the log is on disk, and why it failed if it did.
    durable: crate::logstore::Durable,
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

/// Stop `raft` once the log fails to write or sync. A follower's failed
/// append stops its Raft by itself (openraft is told through the append's
/// callback), but a leader's own appends were reported durable before their
/// write (`logstore/mod.rs`): without this it would go on leading, and its
/// followers would never elect another while no reply could be given.
async fn stop_on_log_failure(raft: Raft, mut durable: crate::logstore::Durable) {
    if durable.wait_for(|d| d.failed.is_some()).await.is_ok() {
        let _ = raft.shutdown().await;
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
        let (mut log, sm) = open_storage_with(&config.dir, config.fsync)?;
        // Its own appends as leader overlap its followers' (logstore/mod.rs);
        // the proposer, the network and membership changes then wait for
        // `durable` before taking a commit for this node's.
        log.lead_without_waiting(config.id);
        log.keep_in_memory(config.log_cache_bytes);
        let durable = log.durable();
        let cache_size = log.cache_size();
        let sync_stall = log.sync_stall();
        let disk_reads = log.disk_reads();
        let view = sm.view();
        let bind = |addr: &str, fd: Option<RawFd>, what| {
            let bound = match fd {
                Some(fd) => adopt(fd),
                None => StdListener::bind(addr),
            };
            bound.map_err(|source| NodeError::Bind {
                addr: addr.to_owned(),
                what,
                id: config.id,
                source,
            })
        };
        let client = Arc::new(bind(&entry.client, config.client_fd, "client address")?);
        let peer_listener = bind(&entry.peer, config.peer_fd, "peer address")?;
        peer_listener
            .set_nonblocking(true)
            .map_err(NodeError::Runtime)?;
        let runtime = Driven::start("beanpole-raft").map_err(NodeError::Runtime)?;
        // Forwarded client connections run on a thread of their own
        // (`forward.rs`, `Forwarding::runtime`).
        let forward_runtime = Driven::start("beanpole-fwd").map_err(NodeError::Runtime)?;
        let raft_config = Arc::new(
            config
                .raft
                .clone()
                .validate()
                .map_err(|e| NodeError::Raft(e.to_string()))?,
        );
        let lowest = config.file.members().keys().next().copied();
        let (serving_tx, serving) = watch::channel(None);
        // Watch channels between the hand-over and the leadership task: each
        // wants the latest value, and to wait for a change.
        let (yielding_tx, yielding) = watch::channel(false);
        let (yielded_tx, yielded) = watch::channel(false);
        let (led_since_tx, led_since) = watch::channel(None);
        let draining = Arc::new(AtomicBool::new(false));
        let fence = Arc::new(propose::LeaseFence::default());
        // Raised by the leader's proposer, read by the hand-over; an atomic.
        let committed_to = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (raft, peer, leading, handover) = runtime.block_on(async {
            let (campaigns, refusals) = campaign::Campaigns::new();
            let net = NetConfig {
                durable: Some(durable.clone()),
                refusals: Some(campaigns as Arc<dyn crate::net::Refusals>),
                ..config.net.clone()
            };
            let network = Network::new(Arc::clone(&identity), net.clone());
            let raft = Raft::new(config.id, raft_config, network.clone(), log, sm)
                .await
                .map_err(|e| NodeError::Raft(e.to_string()))?;
            let handover = Arc::new(handover::Handover {
                id: config.id,
                raft: raft.clone(),
                network,
                lease: Duration::from_millis(config.raft.election_timeout_max),
                yielding: yielding_tx,
                yielded,
                led_since,
                busy: tokio::sync::Mutex::new(()),
                committed_to: Arc::clone(&committed_to),
            });
            let pristine = !raft
                .is_initialized()
                .await
                .map_err(|e| NodeError::Raft(e.to_string()))?;
            // Before the peer server answers anything: a node with nothing
            // in its directory keeps its vote back until it has caught up.
            let rejoin = Arc::new(
                rejoin::Rejoin::open(&config.dir, pristine, config.announce.then_some(config.id))
                    .map_err(dir_err)?,
            );
            let (vacancy, ended) = vacancy::Vacancy::new();
            let listener =
                tokio::net::TcpListener::from_std(peer_listener).map_err(NodeError::Runtime)?;
            let net = NetConfig {
                serving: Some(serving.clone()),
                // The leader's side of a follower's link dialed before this
                // node serves (else it runs on the term server's runtime):
                // the forwarding thread, with no forwarded clients while it
                // leads.
                links_on: Some(forward_runtime.handle().clone()),
                ..net
            };
            let peer = PeerServer::start_with(
                listener,
                raft.clone(),
                Arc::clone(&identity),
                net,
                crate::net::Hooks {
                    hand_off: Some(Arc::clone(&handover) as Arc<dyn crate::net::members::HandOff>),
                    fence: Some(Arc::clone(&fence) as Arc<dyn crate::net::VoteFence>),
                    catch_up: Some(Arc::clone(&rejoin) as Arc<dyn crate::net::CatchUp>),
                    watch: Some(Arc::clone(&vacancy) as Arc<dyn crate::net::PeerWatch>),
                },
            )
            .map_err(NodeError::Runtime)?;
            if pristine
                && lowest == Some(config.id)
                && identity.cluster().is_unset()
                && !cluster_exists(&config).await
            {
                identity.found()?;
                raft.initialize(config.file.members())
                    .await
                    .map_err(|e| NodeError::Raft(e.to_string()))?;
                // Its log is the cluster's from the start.
                rejoin.caught_up();
            }
            tokio::spawn(stop_on_log_failure(raft.clone(), durable.clone()));
            tokio::spawn(campaign::run(
                raft.clone(),
                refusals,
                Duration::from_millis(2 * config.raft.election_timeout_max),
            ));
            tokio::spawn(vacancy::run(
                raft.clone(),
                config.id,
                vacancy,
                ended,
                Duration::from_millis(config.raft.election_timeout_max),
                config.announce,
            ));
            tokio::spawn(snapshots::run(
                raft.clone(),
                cache_size.clone(),
                view.clone(),
                config.snapshot_bytes,
            ));
            let leading = tokio::spawn(leader::run(leader::Leading {
                id: config.id,
                raft: raft.clone(),
                identity: Arc::clone(&identity),
                view: view.clone(),
                server: config.server.clone(),
                client: Arc::clone(&client),
                forward_on: forward_runtime.handle().clone(),
                // `stats`'s id as beanstalkd's: 16 hex digits (the cluster
                // id's first 64 bits), the same on every node.
                instance: identity.cluster().to_string()[..16].to_owned(),
                lease: read_lease(&config.raft),
                draining: Arc::clone(&draining),
                announce: config.announce,
                commit_timeout: config.commit_timeout,
                serving: serving_tx,
                yielding,
                yielded: yielded_tx,
                led_since: led_since_tx,
                fence,
                committed_to,
                durable: durable.clone(),
            }));
            Ok::<_, NodeError>((raft, peer, leading, handover))
        })?;
        Ok(Node {
            runtime: Some(runtime),
            forward_runtime: Some(forward_runtime),
            raft,
            peer: Some(peer),
            leading: Some(leading),
            serving,
            handover,
            client,
            draining,
            cache_size,
            view,
            sync_stall,
            disk_reads,
            durable,
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
            return NodeStatus::down(self.id);
        }
        let m = self.raft.metrics().borrow().clone();
        NodeStatus {
            id: self.id,
            role: if m.running_state.is_err() || self.durable.borrow().failed.is_some() {
                // Raft has stopped on a fatal error: the node serves nothing.
                "down"
            } else {
                crate::net::status::role_name(m.state)
            },
            term: m.current_term,
            leader: m.current_leader,
            applied: m.last_applied.map_or(0, |l| l.index),
            last_log: m.last_log_index.unwrap_or(0),
            serving: self.serving.borrow().is_some(),
            voters: m.membership_config.membership().voter_ids().collect(),
            learners: m.membership_config.membership().learner_ids().collect(),
            matched: m
                .replication
                .as_ref()
                .map(|r| r.iter().map(|(n, l)| (*n, l.map(|l| l.index))).collect())
                .unwrap_or_default(),
            millis_since_quorum_ack: m.millis_since_quorum_ack,
        }
    }

    /// Why this node's Raft has stopped (a storage failure, a panic), if it
    /// has: the node then serves nothing, and its process should end.
    pub fn failure(&self) -> Option<String> {
        self.runtime.as_ref()?;
        if let Some(why) = &self.durable.borrow().failed {
            return Some(why.to_string());
        }
        let m = self.raft.metrics();
        let state = &m.borrow().running_state;
        state.as_ref().err().map(ToString::to_string)
    }

    /// Fault injection for tests: this node's log fsyncs held back by the
    /// milliseconds stored (`logstore::writer::FAIL_SYNCS`: made to fail).
    pub fn sync_stall(&self) -> Arc<std::sync::atomic::AtomicU64> {
        Arc::clone(&self.sync_stall)
    }

    /// The index of the last entry this node's log has on disk (fsynced).
    pub fn durable_index(&self) -> u64 {
        self.durable.borrow().last.map_or(0, |l| l.index)
    }

    /// Fault injection for tests: this node's log reads back from disk held
    /// back (`DiskReads::stall`), and how many are under way.
    pub fn disk_reads(&self) -> crate::logstore::DiskReads {
        self.disk_reads.clone()
    }

    /// Bytes of records the Raft log holds in memory now.
    pub fn log_bytes(&self) -> u64 {
        self.cache_size.bytes()
    }

    /// Bytes of the last snapshot's image (0: none made or received yet).
    pub fn snapshot_bytes(&self) -> u64 {
        self.view.image_bytes()
    }

    /// Snapshots this node has built since it started.
    pub fn snapshots_built(&self) -> u64 {
        self.view.snapshots_built()
    }

    /// Fault injection for tests: this node's snapshot builds held back while
    /// they make their images (`Builds::stall`), and how many are under way.
    pub fn snapshot_builds(&self) -> Arc<crate::sm::Builds> {
        self.view.builds()
    }

    /// Enter drain mode: while this node leads, puts are answered DRAINING.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
        if let Some((_, admin)) = self.serving.borrow().as_ref() {
            admin.drain();
        }
    }

    /// The `stats` of this node's client server, while it serves (it leads).
    pub fn stats(&self) -> Option<Vec<(&'static str, StatValue)>> {
        self.serving
            .borrow()
            .as_ref()
            .map(|(_, admin)| admin.stats())
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

    /// If this node leads, hand the lead to the most up-to-date other voter
    /// within `limit` (`handover.rs`): it stops serving clients (the passes in
    /// flight are committed and answered first), and a new leader is known
    /// when this returns [`HandoverOutcome::HandedOver`]. For a planned stop:
    /// the node serves no clients afterwards, whatever the outcome; call
    /// [`Node::stop`] next.
    pub fn hand_over(&self, limit: Duration) -> HandoverOutcome {
        let Some(runtime) = &self.runtime else {
            return HandoverOutcome::NotLeader;
        };
        runtime.block_on(self.handover.run(limit, false))
    }

    /// If this node leads, hand the lead to the most up-to-date other voter
    /// within `limit` and go on as a follower (as `cluster remove` does before
    /// the removal): its clients keep their connections, forwarded to the new
    /// leader. The node may lead again later.
    pub fn step_down(&self, limit: Duration) -> HandoverOutcome {
        let Some(runtime) = &self.runtime else {
            return HandoverOutcome::NotLeader;
        };
        runtime.block_on(self.handover.run(limit, true))
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
        // Last: the stop above ends the forwarded connections on it.
        if let Some(forward) = self.forward_runtime.take() {
            forward.shutdown_timeout(Duration::from_secs(2));
        }
    }

    /// End the node as a killed process ends, for tests: no hand-over and no
    /// goodbye to Raft; every task is dropped with the runtimes, and with them
    /// the node's sockets, its listeners included. (Its log writer thread may
    /// still sync what it was given, which a kill would not let it do.)
    #[doc(hidden)]
    pub fn crash(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(Duration::ZERO);
        }
        if let Some(forward) = self.forward_runtime.take() {
            forward.shutdown_timeout(Duration::ZERO);
        }
        self.peer = None;
        self.leading = None;
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop();
    }
}
