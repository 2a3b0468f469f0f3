//! Three Raft nodes joined by the TCP transport over loopback: what the
//! in-process test shows (a put and a delete through the leader reach all three
//! state machines) holds over real sockets, the cluster's id reaches every
//! node, and a node whose peer link is cut (and that meanwhile campaigns with
//! a higher term) catches up, by snapshot, once the link is back.

mod common;

use common::{applied, batch, put, quick, shutdown, three, Error};

use beanpole_cluster::types::NodeId;
use beanpole_engine::wal::format::Record;
use openraft::SnapshotPolicy;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_replicate_over_loopback_tcp() -> Result<(), Error> {
    let (nodes, leader_id) = three(quick()).await?;
    let leader = &nodes[leader_id as usize - 1];

    let wrote = leader
        .raft
        .client_write(batch(10, &[put(1, b"hello"), put(2, b"world")]))
        .await?;
    assert_eq!(wrote.data.records, 2);
    for node in &nodes {
        applied(node, wrote.log_id.index).await?;
        let state = node.view.lock();
        let jobs: Vec<(u64, Vec<u8>)> = state
            .replica
            .jobs()
            .map(|j| (j.fields.id, j.body.to_vec()))
            .collect();
        assert_eq!(
            jobs,
            [(1, b"hello".to_vec()), (2, b"world".to_vec())],
            "node {}",
            node.id
        );
        assert_eq!(state.clock, 10, "node {}", node.id);
    }

    let wrote = leader
        .raft
        .client_write(batch(
            20,
            &[Record::Reserve { id: 1 }, Record::Delete { id: 1 }],
        ))
        .await?;
    for node in &nodes {
        applied(node, wrote.log_id.index).await?;
        assert_eq!(node.jobs(), [2], "node {}", node.id);
    }

    // Node 1 made the cluster's id; the others learnt it in the handshake.
    let id = nodes[0].identity.cluster();
    assert!(!id.is_unset());
    for node in &nodes {
        assert_eq!(node.identity.cluster(), id, "node {}", node.id);
        let again = beanpole_cluster::identity::Identity::open(node.dir.path(), node.id)?;
        assert_eq!(again.cluster(), id, "node {} kept it on disk", node.id);
    }

    // A follower refuses a write and names the leader.
    let follower = nodes.iter().find(|n| n.id != leader_id).ok_or("none")?;
    let refused = follower.raft.client_write(batch(30, &[put(3, b"x")])).await;
    let forward = refused
        .err()
        .and_then(|e| e.forward_to_leader().cloned())
        .ok_or("a follower took a write")?;
    assert_eq!(forward.leader_id, Some(leader_id));

    shutdown(nodes).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cut_off_from_its_peers_catches_up_when_the_link_is_back() -> Result<(), Error> {
    // Snapshots every few entries and no log kept behind them: a node that
    // misses more than that can only catch up by a snapshot, sent in many
    // small chunks.
    let config = openraft::Config {
        snapshot_policy: SnapshotPolicy::LogsSinceLast(3),
        max_in_snapshot_log_to_keep: 0,
        purge_batch_size: 1,
        snapshot_max_chunk_size: 64,
        ..quick()
    };
    let (mut nodes, leader_id) = three(config).await?;
    let cut_id: NodeId = if leader_id == 3 { 2 } else { 3 };
    let cut = cut_id as usize - 1;
    let leader = nodes[leader_id as usize - 1].raft.clone();

    let first = leader.client_write(batch(1, &[put(1, b"before")])).await?;
    applied(&nodes[cut], first.log_id.index).await?;

    nodes[cut].cut().await;
    let mut last = first.log_id.index;
    for id in 2..=12u64 {
        // A majority (the leader and the other follower) still commits.
        let wrote = leader
            .client_write(batch(id as i64, &[put(id, b"while cut")]))
            .await?;
        last = wrote.log_id.index;
    }
    let missed = nodes[cut].raft.metrics().borrow().last_applied;
    assert!(
        missed.map_or(0, |l| l.index) < last,
        "the cut node applied entries it could not have received"
    );
    assert_eq!(nodes[cut].jobs(), [1]);
    // Left alone, the cut node campaigns and raises its term: the rejoin must
    // also get past a node with a higher term and a shorter log.
    let term = leader.metrics().borrow().current_term;
    nodes[cut]
        .raft
        .wait(Some(std::time::Duration::from_secs(10)))
        .metrics(|m| m.current_term > term, "the cut node campaigns")
        .await?;

    nodes[cut].mend().await?;
    applied(&nodes[cut], last).await?;
    assert_eq!(nodes[cut].jobs(), (1..=12).collect::<Vec<u64>>());
    let snapshot = nodes[cut].raft.metrics().borrow().snapshot;
    assert!(
        snapshot.is_some_and(|s| s.index > first.log_id.index),
        "caught up without a snapshot: {snapshot:?}"
    );

    // And it takes part again: a write after the rejoin reaches it too.
    let leader_id = common::leader(&nodes).await?;
    let wrote = nodes[leader_id as usize - 1]
        .raft
        .client_write(batch(100, &[put(13, b"after")]))
        .await?;
    applied(&nodes[cut], wrote.log_id.index).await?;
    assert_eq!(nodes[cut].jobs(), (1..=13).collect::<Vec<u64>>());

    shutdown(nodes).await
}
