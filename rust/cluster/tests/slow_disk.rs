//! A slow disk holds back commits, not heartbeats: with the leader's log fsyncs
//! taking longer than the election timeout's maximum, and then every node's,
//! or the followers' alone longer than a follower waits for its leader, three
//! nodes over loopback TCP keep their leader and term (no election) while
//! writes go on committing. A leader's fsyncs run on the log writer thread; a
//! follower's on its Raft thread, which, once an fsync was slow, lets its
//! runtime read the leader's messages before the core goes on, and waits off
//! that runtime while the disk stays slow (`logstore/ops.rs`).

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use beanpole_cluster::types::NodeId;
use common::{applied, batch, put, quick, shutdown, three, Error, Node};

/// Heartbeats every 50 ms, elections after 300-600 ms: a follower stands once
/// it has heard nothing for 900-1,200 ms (the lease plus its timeout).
fn timing() -> openraft::Config {
    openraft::Config {
        heartbeat_interval: 50,
        election_timeout_min: 300,
        election_timeout_max: 600,
        ..quick()
    }
}

/// Every node still in `term` under `leader` (no election); disks fast again.
fn still_led(nodes: &[Node], leader: NodeId, term: u64) {
    for node in nodes {
        let m = node.raft.metrics().borrow().clone();
        assert_eq!(m.current_term, term, "node {} saw an election", node.id);
        assert_eq!(m.current_leader, Some(leader), "node {}", node.id);
        node.stall.store(0, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fsync_stalls_cause_no_election() -> Result<(), Error> {
    let (nodes, leader_id) = three(timing()).await?;
    let leader = &nodes[leader_id as usize - 1];
    let term = leader.raft.metrics().borrow().current_term;

    // The leader's disk: every fsync 700 ms, longer than the election timeout's
    // maximum. (These stores wait for every append's fsync, a leader's too, as
    // openraft 0.9 asks: a stall well past the lease plus an election timeout
    // would end in an election. A node's leader does not wait for its own:
    // `leader_disk.rs`.)
    leader.stall.store(700, Ordering::SeqCst);
    let mut id = 1;
    for _ in 0..5 {
        let wrote = leader
            .raft
            .client_write(batch(id as i64, &[put(id, b"slow leader disk")]))
            .await?;
        for node in &nodes {
            if node.id != leader_id {
                applied(node, wrote.log_id.index).await?;
            }
        }
        id += 1;
    }
    // Every node's disk slow: each commit waits for two slow fsyncs.
    for node in &nodes {
        node.stall.store(700, Ordering::SeqCst);
    }
    for _ in 0..3 {
        leader
            .raft
            .client_write(batch(id as i64, &[put(id, b"every disk slow")]))
            .await?;
        id += 1;
    }
    // Keep the stall on over several election timeouts with nothing written.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    still_led(&nodes, leader_id, term);
    shutdown(nodes).await
}

/// The followers' disks alone slow, each fsync longer than the time a
/// follower waits for its leader before it stands: a follower waits for its
/// own fsync before it answers, but the leader's messages still reach its core
/// before its timer's tick does (after the first slow fsync, read while the
/// runtime pauses; after the next ones, read while the fsync runs), so no
/// follower stands and the leader keeps its term. Before the pause, 3 runs in
/// 5 failed here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_fsync_stalls_past_the_timeout_cause_no_election() -> Result<(), Error> {
    let (nodes, leader_id) = three(timing()).await?;
    let leader = &nodes[leader_id as usize - 1];
    let term = leader.raft.metrics().borrow().current_term;
    // Longer than the lease plus the shortest election timeout (900 ms).
    for node in &nodes {
        if node.id != leader_id {
            node.stall.store(1000, Ordering::SeqCst);
        }
    }
    for id in 1..=3u64 {
        let wrote = leader
            .raft
            .client_write(batch(id as i64, &[put(id, b"slow follower disks")]))
            .await?;
        for node in &nodes {
            if node.id != leader_id {
                applied(node, wrote.log_id.index).await?;
            }
        }
    }
    still_led(&nodes, leader_id, term);
    shutdown(nodes).await
}
