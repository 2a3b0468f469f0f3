//! A leader's own log writes overlap its followers' (openraft is told of them
//! at once: `logstore/mod.rs`), and nothing outside openraft takes a commit for
//! the leader's until its own disk has the entry: a client's reply, and the
//! commit index its followers are sent (which decides what they apply). With
//! the leader's fsyncs held back (the log writer's fault knob), each is seen
//! to wait for them; a leader disk slower than an election timeout no longer
//! costs the term; and a leader disk that fails stops that node, while the
//! entry its followers have on disk survives it.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use beanpole_cluster::logstore::writer::FAIL_SYNCS;

mod nodes;

use nodes::*;

/// Wait until `cond` holds (at most 10 s).
fn until(what: &str, mut cond: impl FnMut() -> bool) -> Result<(), Error> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        if Instant::now() > deadline {
            return Err(format!("timed out waiting for {what}").into());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(())
}

fn stop_all(nodes: &mut [Option<beanpole_cluster::node::Node>]) {
    for node in nodes.iter_mut().flatten() {
        node.stop();
    }
}

#[test]
fn a_reply_waits_for_the_leaders_own_disk() -> Result<(), Error> {
    let file = cluster_file(3)?;
    let (_dirs, mut nodes) = three(&file)?;
    let first = serving(&nodes)?;
    let leader = nodes[first].as_ref().ok_or("leader")?;
    let mut client = Client::connect(leader.client_addr()?)?;
    assert_eq!(client.call(b"put 0 0 60 1\r\na\r\n")?, "INSERTED 1\r\n");
    leader.sync_stall().store(300, Ordering::SeqCst);
    for n in 2..=4 {
        let reply = client.call(b"put 0 0 60 1\r\nb\r\n")?;
        // Read the moment the reply is: the entry is on the leader's disk.
        let durable = leader.durable_index();
        let last = leader.status().last_log;
        assert_eq!(reply, format!("INSERTED {n}\r\n"));
        assert!(durable >= last, "replied with {durable} on disk of {last}");
    }
    leader.sync_stall().store(0, Ordering::SeqCst);
    stop_all(&mut nodes);
    Ok(())
}

#[test]
fn followers_apply_only_what_the_leaders_disk_has() -> Result<(), Error> {
    let file = cluster_file(3)?;
    let (_dirs, mut nodes) = three(&file)?;
    let first = serving(&nodes)?;
    let leader = nodes[first].as_ref().ok_or("leader")?;
    let addr = leader.client_addr()?;
    let mut client = Client::connect(addr)?;
    assert_eq!(client.call(b"put 0 0 60 1\r\na\r\n")?, "INSERTED 1\r\n");
    let follower = nodes[(first + 1) % 3].as_ref().ok_or("follower")?;
    let before = leader.status().last_log;
    until("the follower to apply the first put", || {
        follower.status().applied >= before
    })?;
    leader.sync_stall().store(800, Ordering::SeqCst);
    let put = std::thread::spawn(move || -> Result<String, Error> {
        client.call(b"put 0 0 60 1\r\nb\r\n")
    });
    let index = before + 1;
    until("the follower to hold the second put", || {
        follower.status().last_log >= index
    })?;
    // Committed by openraft's count (the follower's copy and the leader's,
    // reported at once), but not on the leader's disk: not applied yet.
    let applied = follower.status().applied;
    let durable = leader.durable_index();
    if durable < index {
        assert!(
            applied < index,
            "applied {applied} with {durable} on the leader's disk"
        );
    }
    assert_eq!(put.join().map_err(|_| "put panicked")??, "INSERTED 2\r\n");
    leader.sync_stall().store(0, Ordering::SeqCst);
    until("the follower to apply the second put", || {
        follower.status().applied >= index
    })?;
    stop_all(&mut nodes);
    Ok(())
}

#[test]
fn a_leader_disk_slower_than_an_election_keeps_its_term() -> Result<(), Error> {
    let file = cluster_file(3)?;
    let (_dirs, mut nodes) = three(&file)?;
    let first = serving(&nodes)?;
    let leader = nodes[first].as_ref().ok_or("leader")?;
    let term = leader.status().term;
    let mut client = Client::connect(leader.client_addr()?)?;
    assert_eq!(client.call(b"put 0 0 60 1\r\na\r\n")?, "INSERTED 1\r\n");
    // Twice the election timeout's maximum (600 ms) plus the lease: heartbeats
    // go on while the fsync waits, so no follower campaigns.
    leader.sync_stall().store(1300, Ordering::SeqCst);
    assert_eq!(client.call(b"put 0 0 60 1\r\nb\r\n")?, "INSERTED 2\r\n");
    leader.sync_stall().store(0, Ordering::SeqCst);
    for node in nodes.iter().flatten() {
        let status = node.status();
        assert_eq!(status.term, term, "node {} saw an election", status.id);
        assert_eq!(status.leader, Some(first as u64 + 1), "node {}", status.id);
    }
    stop_all(&mut nodes);
    Ok(())
}

/// The followers' disks slow instead, on nodes as `serve --cluster` runs
/// them (each node's Raft on a current-thread runtime of one thread, which
/// also writes a follower's appends while its disk is fast): an fsync past the
/// lease plus an election timeout holds that thread once, and the appends
/// after it go to the log's writer thread (`logstore/ops.rs`), so no follower
/// stands while its leader lives.
#[test]
fn followers_disks_slower_than_an_election_keep_the_term() -> Result<(), Error> {
    let file = cluster_file(3)?;
    let (_dirs, mut nodes) = three_with(&file, |config| {
        config.commit_timeout = Duration::from_secs(5);
    })?;
    let first = serving(&nodes)?;
    let leader = nodes[first].as_ref().ok_or("leader")?;
    let term = leader.status().term;
    let mut client = Client::connect(leader.client_addr()?)?;
    assert_eq!(client.call(b"put 0 0 60 1\r\na\r\n")?, "INSERTED 1\r\n");
    // Past the lease plus an election timeout's maximum (600 ms each). With
    // every slow append held on the Raft thread instead, a follower stood in
    // one run of two.
    for node in nodes.iter().flatten() {
        if node.status().id != first as u64 + 1 {
            node.sync_stall().store(1500, Ordering::SeqCst);
        }
    }
    for n in 2..=5 {
        let reply = client.call(b"put 0 0 60 1\r\nb\r\n")?;
        assert_eq!(reply, format!("INSERTED {n}\r\n"));
    }
    for node in nodes.iter().flatten() {
        node.sync_stall().store(0, Ordering::SeqCst);
        let status = node.status();
        assert_eq!(status.term, term, "node {} saw an election", status.id);
        assert_eq!(status.leader, Some(first as u64 + 1), "node {}", status.id);
    }
    stop_all(&mut nodes);
    Ok(())
}

#[test]
fn a_leader_whose_disk_fails_stops_and_its_followers_keep_the_entry() -> Result<(), Error> {
    let file = cluster_file(3)?;
    let (_dirs, mut nodes) = three(&file)?;
    let first = serving(&nodes)?;
    let leader = nodes[first].as_ref().ok_or("leader")?;
    let mut client = Client::connect(leader.client_addr()?)?;
    assert_eq!(client.call(b"use t\r\n")?, "USING t\r\n");
    let index = leader.status().last_log + 1;
    // The leader's fsync is slow, and fails once both followers have the put
    // on disk: no reply says it is stored (the connection closes).
    leader.sync_stall().store(500, Ordering::SeqCst);
    let put = std::thread::spawn(move || client.call(b"put 0 0 60 1\r\nx\r\n").unwrap_or_default());
    for (i, node) in nodes.iter().enumerate() {
        if i != first {
            let node = node.as_ref().ok_or("follower")?;
            until("a follower to hold the put", || {
                node.durable_index() >= index
            })?;
        }
    }
    leader.sync_stall().store(FAIL_SYNCS, Ordering::SeqCst);
    let reply = put.join().map_err(|_| "put panicked")?;
    assert!(!reply.starts_with("INSERTED"), "{reply:?}");
    until("the failed disk to stop the node", || {
        leader.failure().is_some()
    })?;
    let why = leader.failure().unwrap_or_default();
    assert!(why.contains("fsync failed"), "{why}");
    assert_eq!(leader.status().role, "down");
    if let Some(mut node) = nodes[first].take() {
        node.stop();
    }
    let next = serving(&nodes)?;
    let mut client = Client::connect(nodes[next].as_ref().ok_or("next")?.client_addr()?)?;
    // A majority had the put on disk: the next leader has it.
    assert_eq!(client.call(b"use t\r\n")?, "USING t\r\n");
    assert_eq!(client.call(b"peek-ready\r\n")?, "FOUND 1 1\r\n");
    assert_eq!(client.body(1)?, b"x");
    assert_eq!(client.call(b"put 0 0 60 1\r\ny\r\n")?, "INSERTED 2\r\n");
    stop_all(&mut nodes);
    Ok(())
}
