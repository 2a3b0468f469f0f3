//! Three Raft nodes in one process, each with beanpole's on-disk log storage and
//! state machine in a directory of its own, joined by an in-process network
//! (messages handed straight to the target node's Raft; the TCP transport is
//! the next step). A put's journal record written through the leader reaches all
//! three state machines, and so does the delete that follows it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use beanpole_cluster::types::{NodeId, Peer, Raft, TypeConfig};
use beanpole_cluster::{open_storage, StateView};
use beanpole_engine::wal::format::Record;
use openraft::error::{InstallSnapshotError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};

mod common;

use common::{batch, put, Error};

/// The nodes by id. A std mutex: held only to clone a handle out, never across
/// an await.
#[derive(Clone, Default)]
struct Router {
    nodes: Arc<Mutex<BTreeMap<NodeId, Raft>>>,
}

impl Router {
    fn get(&self, id: NodeId) -> Option<Raft> {
        let nodes = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        nodes.get(&id).cloned()
    }
}

/// What a message to a node that is not running gets.
fn unreachable<E: std::error::Error>(id: NodeId) -> RPCError<NodeId, Peer, E> {
    let gone = std::io::Error::other(format!("node {id} is not running"));
    RPCError::Unreachable(Unreachable::new(&gone))
}

struct Link {
    router: Router,
    target: NodeId,
}

impl RaftNetworkFactory<TypeConfig> for Router {
    type Network = Link;

    async fn new_client(&mut self, target: NodeId, _node: &Peer) -> Link {
        Link {
            router: self.clone(),
            target,
        }
    }
}

impl RaftNetwork<TypeConfig> for Link {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, Peer, RaftError<NodeId>>> {
        let raft = self
            .router
            .get(self.target)
            .ok_or_else(|| unreachable(self.target))?;
        raft.append_entries(rpc)
            .await
            .map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, Peer, RaftError<NodeId, InstallSnapshotError>>,
    > {
        let raft = self
            .router
            .get(self.target)
            .ok_or_else(|| unreachable(self.target))?;
        raft.install_snapshot(rpc)
            .await
            .map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, Peer, RaftError<NodeId>>> {
        let raft = self
            .router
            .get(self.target)
            .ok_or_else(|| unreachable(self.target))?;
        raft.vote(rpc)
            .await
            .map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_through_the_leader_is_applied_on_all_three_nodes() -> Result<(), Error> {
    let dirs = [
        tempfile::tempdir()?,
        tempfile::tempdir()?,
        tempfile::tempdir()?,
    ];
    let config = Arc::new(common::quick().validate()?);
    let router = Router::default();
    let mut members = BTreeMap::new();
    let mut views: Vec<(NodeId, StateView)> = Vec::new();
    for (i, dir) in dirs.iter().enumerate() {
        let id = i as NodeId + 1;
        let (log, sm) = open_storage(dir.path())?;
        views.push((id, sm.view()));
        let raft = Raft::new(id, Arc::clone(&config), router.clone(), log, sm).await?;
        router
            .nodes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, raft);
        members.insert(
            id,
            Peer {
                client: format!("127.0.0.1:{}", 11300 + id),
                peer: format!("127.0.0.1:{}", 11400 + id),
            },
        );
    }
    let first = router.get(1).ok_or("no node 1")?;
    first.initialize(members).await?;
    let metrics = first
        .wait(Some(Duration::from_secs(10)))
        .metrics(|m| m.current_leader.is_some(), "a leader is elected")
        .await?;
    let leader_id = metrics.current_leader.ok_or("no leader")?;
    let leader = router.get(leader_id).ok_or("no leader node")?;

    let wrote = leader
        .client_write(batch(10, &[put(1, b"hello"), put(2, b"world")]))
        .await?;
    assert_eq!(wrote.data.records, 2);
    for (id, view) in &views {
        let raft = router.get(*id).ok_or("no node")?;
        raft.wait(Some(Duration::from_secs(10)))
            .applied_index_at_least(Some(wrote.log_id.index), format!("node {id} applies"))
            .await?;
        let state = view.lock();
        let jobs: Vec<(u64, Vec<u8>)> = state
            .replica
            .jobs()
            .map(|j| (j.fields.id, j.body.to_vec()))
            .collect();
        assert_eq!(
            jobs,
            [(1, b"hello".to_vec()), (2, b"world".to_vec())],
            "node {id}"
        );
        assert_eq!(state.replica.next_id(), 3, "node {id}");
        assert_eq!(state.clock, 10, "node {id}");
    }

    let wrote = leader
        .client_write(batch(
            20,
            &[Record::Reserve { id: 1 }, Record::Delete { id: 1 }],
        ))
        .await?;
    assert_eq!(wrote.data.records, 2);
    for (id, view) in &views {
        let raft = router.get(*id).ok_or("no node")?;
        raft.wait(Some(Duration::from_secs(10)))
            .applied_index_at_least(Some(wrote.log_id.index), format!("node {id} applies"))
            .await?;
        let state = view.lock();
        let ids: Vec<u64> = state.replica.jobs().map(|j| j.fields.id).collect();
        assert_eq!(ids, [2], "node {id}");
        assert_eq!(state.clock, 20, "node {id}");
    }

    // A follower refuses a write and names the leader (step 2 forwards instead).
    let follower_id = views
        .iter()
        .map(|(id, _)| *id)
        .find(|id| *id != leader_id)
        .ok_or("no follower")?;
    let follower = router.get(follower_id).ok_or("no follower node")?;
    let refused = follower.client_write(batch(30, &[put(3, b"x")])).await;
    let forward = refused
        .err()
        .and_then(|e| e.forward_to_leader().cloned())
        .ok_or("a follower took a write")?;
    assert_eq!(forward.leader_id, Some(leader_id));

    let rafts: Vec<Raft> = router
        .nodes
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values()
        .cloned()
        .collect();
    for raft in rafts {
        raft.shutdown().await?;
    }
    Ok(())
}
