//! A slow disk holds back commits, not heartbeats: with the leader's log fsyncs
//! taking longer than the election timeout's maximum, and then every node's,
//! three nodes over loopback TCP keep their leader and term (no election) while
//! writes go on committing. The log writer thread is what makes this so (no fsync runs on
//! the runtime the heartbeats are sent and answered from).

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{applied, batch, put, quick, shutdown, three, Error};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fsync_stalls_cause_no_election() -> Result<(), Error> {
    let config = openraft::Config {
        heartbeat_interval: 50,
        election_timeout_min: 300,
        election_timeout_max: 600,
        ..quick()
    };
    let (nodes, leader_id) = three(config).await?;
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
    for node in &nodes {
        let m = node.raft.metrics().borrow().clone();
        assert_eq!(m.current_term, term, "node {} saw an election", node.id);
        assert_eq!(m.current_leader, Some(leader_id), "node {}", node.id);
        node.stall.store(0, Ordering::SeqCst);
    }
    shutdown(nodes).await
}
