//! Three cluster nodes as `serve --cluster` runs them (`node::Node`), in one
//! process over loopback: the leader serves stock protocol clients, a put is
//! acknowledged once committed, a follower relays its clients to the leader,
//! and when the leader stops a new leader serves the jobs the old one
//! acknowledged, with ids going on after them. A follower whose data directory
//! was lost rejoins empty, is sent a snapshot, and counts toward a majority
//! again.

use std::io::BufRead;
use std::time::{Duration, Instant};

use beanpole_cluster::node::{Node, NodeConfig};
use beanpole_engine::wal::format::job_record_len;

mod nodes;

use nodes::*;

#[test]
fn the_leader_serves_clients_and_a_new_leader_has_what_it_acknowledged() -> Result<(), Error> {
    let file = cluster_file(3)?;
    let (_dirs, mut nodes) = three(&file)?;
    let first = serving(&nodes)?;
    let leader = nodes[first].as_ref().ok_or("leader")?;
    assert_eq!(leader.status().role, "leader");
    let mut client = Client::connect(leader.client_addr()?)?;
    for i in 1..=20u32 {
        let body = format!("job {i}");
        let put = format!("put {i} 0 60 {}\r\n{body}\r\n", body.len());
        assert_eq!(client.call(put.as_bytes())?, format!("INSERTED {i}\r\n"));
    }
    assert_eq!(client.call(b"delete 3\r\n")?, "DELETED\r\n");
    assert_eq!(
        client.call(b"reserve-with-timeout 0\r\n")?,
        "RESERVED 1 5\r\n"
    );
    assert_eq!(client.body(5)?, b"job 1");

    // A follower relays its clients to the leader.
    let follower = (first + 1) % 3;
    let addr = nodes[follower].as_ref().ok_or("follower")?.client_addr()?;
    let mut relayed = Client::connect(addr)?;
    assert_eq!(relayed.call(b"peek 20\r\n")?, "FOUND 20 6\r\n");
    assert_eq!(relayed.body(6)?, b"job 20");
    assert_eq!(relayed.call(b"put 0 0 60 1\r\nr\r\n")?, "INSERTED 21\r\n");
    assert_eq!(relayed.call(b"delete 21\r\n")?, "DELETED\r\n");
    drop(relayed);

    // The client hangs up: job 1 is ready again once that is committed (a
    // read waits for what it saw to be).
    drop(client);
    let mut watcher = Client::connect(nodes[first].as_ref().ok_or("leader")?.client_addr()?)?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let reply = watcher.call(b"peek-ready\r\n")?;
        if reply == "FOUND 1 5\r\n" {
            watcher.body(5)?;
            break;
        }
        if let Some(len) = reply
            .trim_end()
            .rsplit(' ')
            .next()
            .and_then(|l| l.parse().ok())
        {
            watcher.body(len)?;
        }
        assert!(Instant::now() < deadline, "job 1 never came back");
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(watcher);
    // The leader stops; another node takes over with every acknowledged change.
    if let Some(mut old) = nodes[first].take() {
        old.stop();
        assert_eq!(old.status().role, "down");
    }
    let second = serving(&nodes)?;
    assert_ne!(second, first);
    let leader = nodes[second].as_ref().ok_or("new leader")?;
    let mut client = Client::connect(leader.client_addr()?)?;
    assert_eq!(
        client.call(b"peek 3\r\n")?,
        "NOT_FOUND\r\n",
        "the delete was lost"
    );
    assert_eq!(client.call(b"peek 20\r\n")?, "FOUND 20 6\r\n");
    assert_eq!(client.body(6)?, b"job 20");
    // Job 1, reserved by a client of the old leader that hung up, is ready.
    assert_eq!(client.call(b"peek-ready\r\n")?, "FOUND 1 5\r\n");
    assert_eq!(client.body(5)?, b"job 1");
    let stats = client.call(b"stats-tube default\r\n")?;
    let len: usize = stats
        .trim_end()
        .strip_prefix("OK ")
        .ok_or("stats-tube")?
        .parse()?;
    let yaml = String::from_utf8(client.body(len)?)?;
    assert!(yaml.contains("current-jobs-ready: 19\n"), "{yaml}");
    assert_eq!(client.call(b"put 0 0 60 3\r\nnew\r\n")?, "INSERTED 22\r\n");
    for node in nodes.iter_mut().flatten() {
        node.stop();
    }
    Ok(())
}

#[test]
fn a_leader_cut_off_from_a_majority_acknowledges_nothing_once_its_lease_is_over(
) -> Result<(), Error> {
    let file = cluster_file(3)?;
    let (_dirs, mut nodes) = three(&file)?;
    let first = serving(&nodes)?;
    let mut client = Client::connect(nodes[first].as_ref().ok_or("leader")?.client_addr()?)?;
    assert_eq!(client.call(b"put 0 0 60 2\r\nhi\r\n")?, "INSERTED 1\r\n");
    assert_eq!(client.call(b"peek 1\r\n")?, "FOUND 1 2\r\n");
    assert_eq!(client.body(2)?, b"hi");

    // Both followers stop: the leader can commit nothing more. (A majority of
    // them could elect a new leader that deletes job 1; this one must not go on
    // answering from its own state once its lease is over.)
    for (i, node) in nodes.iter_mut().enumerate() {
        if i != first {
            if let Some(mut node) = node.take() {
                node.stop();
            }
        }
    }
    // The time under test: the lease (3/4 of the 600 ms election timeout's
    // maximum here) runs out.
    std::thread::sleep(Duration::from_secs(1));
    // The read waits for a no-op's commit, which cannot come: after the commit
    // timeout it is answered INTERNAL_ERROR (its outcome unknown) and closed.
    assert_eq!(client.call(b"peek 1\r\n")?, "INTERNAL_ERROR\r\n");
    let mut rest = String::new();
    assert_eq!(
        client.reader.read_line(&mut rest)?,
        0,
        "then the connection closes"
    );
    // So does a put, which is never acknowledged without a majority.
    let mut client = Client::connect(nodes[first].as_ref().ok_or("leader")?.client_addr()?)?;
    assert_eq!(
        client.call(b"put 0 0 60 2\r\nno\r\n")?,
        "INTERNAL_ERROR\r\n"
    );
    for node in nodes.iter_mut().flatten() {
        node.stop();
    }
    Ok(())
}

/// 2,000-byte bodies computed per job, in pipelined batches of 50 (each one
/// entry of about 100 KB).
fn long_body(id: u32) -> String {
    format!("{id}-").repeat(2000)[..2000].to_owned()
}

/// The jobs of the first 10 batches stay, then one in ten.
fn turned_over(id: u32) -> bool {
    id <= 500 || id % 10 == 0
}

const GROWING: Batches = Batches {
    size: 50,
    body_len: 2000,
    body: long_body,
    keep: every,
};

const TURNING: Batches = Batches {
    keep: turned_over,
    ..GROWING
};

#[test]
fn snapshots_bound_the_log_in_memory_and_restarts_read_them() -> Result<(), Error> {
    let file = cluster_file(3)?;
    let dirs: Vec<tempfile::TempDir> = (0..3)
        .map(|_| tempfile::tempdir())
        .collect::<Result<_, _>>()?;
    let start_small = |id: u64| -> Result<Node, Error> {
        let mut config = NodeConfig::new(file.clone(), id, dirs[id as usize - 1].path().into());
        config.raft.heartbeat_interval = 50;
        config.raft.election_timeout_min = 300;
        config.raft.election_timeout_max = 600;
        config.snapshot_bytes = 256 << 10;
        Ok(Node::start(config)?)
    };
    let mut nodes: Vec<Option<Node>> = Vec::new();
    for id in 1..=3u64 {
        nodes.push(Some(start_small(id)?));
    }
    let first = serving(&nodes)?;
    let mut client = Client::connect(nodes[first].as_ref().ok_or("leader")?.client_addr()?)?;
    // 1 MB of puts alone, four times the floor: a log that is all jobs, which
    // a snapshot would write again and drop nothing of, so none is made.
    let next = GROWING.put(&mut client, 1, 10)?;
    let leader_durable = nodes[first].as_ref().ok_or("leader")?.durable_index();
    wait_until(
        10,
        || {
            nodes
                .iter()
                .flatten()
                .all(|n| n.durable_index() >= leader_durable)
        },
        || "the followers did not catch up".into(),
    )?;
    // The snapshot task looks every 200 ms.
    std::thread::sleep(Duration::from_millis(1000));
    let built: Vec<u64> = nodes.iter().flatten().map(Node::snapshots_built).collect();
    assert_eq!(built, [0, 0, 0], "snapshots of a queue that only grew");
    // Then 4 MB more with nine jobs in ten deleted: mostly garbage.
    let next = TURNING.put(&mut client, next, 40)?;
    let expected = (1..next).filter(|&id| turned_over(id)).count();
    // Each node has made snapshots and its log in memory comes down to no
    // more than a snapshot waits for (over the floor, and twice the jobs
    // against the last image and the log: `node/snapshots.rs`), from over
    // 4 MB of records, plus the 8 entries kept behind that snapshot and one
    // being written (each one batch here, 100 KB).
    let jobs = expected as u64 * job_record_len("default".len(), 2000) as u64;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let sizes: Vec<(u64, u64)> = nodes
            .iter()
            .flatten()
            .map(|n| (n.log_bytes(), n.snapshot_bytes()))
            .collect();
        let bounded = |&(log, image): &(u64, u64)| {
            let waits_for = (256u64 << 10).max((2 * jobs).saturating_sub(image));
            image > 0 && log <= waits_for + 9 * (100 << 10)
        };
        if sizes.iter().all(bounded) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "(log, snapshot) sizes stay at {sizes:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Once covered, the entries openraft keeps behind a snapshot (8 of about
    // 100 KB here, more than the floor) bring no more snapshots: at most one
    // more, for entries the last one did not cover yet. Counting the whole log
    // in memory against the floor built one every 200 ms here.
    let built: Vec<u64> = nodes.iter().flatten().map(Node::snapshots_built).collect();
    std::thread::sleep(Duration::from_millis(1200));
    let later: Vec<u64> = nodes.iter().flatten().map(Node::snapshots_built).collect();
    assert!(
        built.iter().zip(&later).all(|(b, l)| l - b <= 1),
        "snapshots built {built:?}, then {later:?}"
    );
    drop(client);
    // A follower restarts on its directory (snapshot plus the entries after it),
    // then the leader stops: whoever leads has every job.
    let follower = (first + 1) % 3;
    if let Some(mut node) = nodes[follower].take() {
        node.stop();
    }
    nodes[follower] = Some(start_small(follower as u64 + 1)?);
    if let Some(mut node) = nodes[first].take() {
        node.stop();
    }
    let second = serving(&nodes)?;
    let mut client = Client::connect(nodes[second].as_ref().ok_or("new leader")?.client_addr()?)?;
    let stats = client.call(b"stats\r\n")?;
    let len: usize = stats
        .trim_end()
        .strip_prefix("OK ")
        .ok_or("stats")?
        .parse()?;
    let yaml = String::from_utf8(client.body(len)?)?;
    assert!(
        yaml.contains(&format!("current-jobs-ready: {expected}\n")),
        "{yaml}"
    );
    for node in nodes.iter_mut().flatten() {
        node.stop();
    }
    Ok(())
}

/// Found by bench/cluster_chaos.py (wipe faults): a follower whose directory was
/// wiped after the leader had purged its log never caught up, its Raft stopped,
/// and with one other node down nothing was acknowledged any more.
#[test]
fn a_follower_whose_directory_was_wiped_rejoins_from_a_snapshot() -> Result<(), Error> {
    let file = cluster_file(3)?;
    let dirs: Vec<tempfile::TempDir> = (0..3)
        .map(|_| tempfile::tempdir())
        .collect::<Result<_, _>>()?;
    // A snapshot every 20 entries, and the log purged behind it.
    let often = |c: &mut NodeConfig| {
        c.raft.snapshot_policy = openraft::SnapshotPolicy::LogsSinceLast(20);
        c.raft.max_in_snapshot_log_to_keep = 0;
        c.raft.purge_batch_size = 1;
    };
    let mut nodes: Vec<Option<Node>> = Vec::new();
    for id in 1..=3u64 {
        nodes.push(Some(start_with(
            &file,
            id,
            dirs[id as usize - 1].path(),
            often,
        )?));
    }
    let first = serving(&nodes)?;
    let leader = nodes[first].as_ref().ok_or("leader")?;
    let mut client = Client::connect(leader.client_addr()?)?;
    for i in 1..=100u32 {
        assert_eq!(
            client.call(b"put 0 0 60 1\r\nx\r\n")?,
            format!("INSERTED {i}\r\n")
        );
    }
    // The leader's snapshot is written and its log purged behind it.
    let snapshot = dirs[first].path().join("sm").join("snapshot");
    let deadline = Instant::now() + Duration::from_secs(15);
    while !snapshot.exists() || !dirs[first].path().join("raft").join("purged").exists() {
        assert!(Instant::now() < deadline, "the leader made no snapshot");
        std::thread::sleep(Duration::from_millis(10));
    }

    let wiped = (first + 1) % 3;
    let other = (first + 2) % 3;
    if let Some(mut node) = nodes[wiped].take() {
        node.stop();
    }
    for entry in std::fs::read_dir(dirs[wiped].path())? {
        let path = entry?.path();
        if path.is_dir() {
            std::fs::remove_dir_all(&path)?;
        } else {
            std::fs::remove_file(&path)?;
        }
    }
    nodes[wiped] = Some(start_with(
        &file,
        wiped as u64 + 1,
        dirs[wiped].path(),
        often,
    )?);
    if let Some(mut node) = nodes[other].take() {
        node.stop();
    }
    // The leader and the wiped node are all that is left: a put is acknowledged
    // once the wiped node has the snapshot and the entries after it.
    assert_eq!(client.call(b"put 0 0 60 1\r\ny\r\n")?, "INSERTED 101\r\n");
    let status = nodes[wiped].as_ref().ok_or("wiped")?.status();
    assert_eq!(status.role, "follower", "{status:?}");
    assert!(dirs[wiped].path().join("sm").join("snapshot").exists());
    for node in nodes.iter_mut().flatten() {
        node.stop();
    }
    Ok(())
}

#[test]
fn a_node_whose_disk_fails_says_why_and_the_others_go_on() -> Result<(), Error> {
    let file = cluster_file(3)?;
    let (_dirs, mut nodes) = three(&file)?;
    let first = serving(&nodes)?;
    let follower = (first + 1) % 3;
    let broken = nodes[follower].as_ref().ok_or("follower")?;
    assert_eq!(broken.failure(), None);
    broken.sync_stall().store(
        beanpole_cluster::logstore::writer::FAIL_SYNCS,
        std::sync::atomic::Ordering::SeqCst,
    );
    // The next commit reaches its disk: the write fails, its Raft stops.
    let mut client = Client::connect(nodes[first].as_ref().ok_or("leader")?.client_addr()?)?;
    assert_eq!(client.call(b"put 0 0 60 1\r\nx\r\n")?, "INSERTED 1\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    let broken = nodes[follower].as_ref().ok_or("follower")?;
    while broken.failure().is_none() {
        assert!(Instant::now() < deadline, "the failed disk went unnoticed");
        std::thread::sleep(Duration::from_millis(10));
    }
    let why = broken.failure().unwrap_or_default();
    assert!(why.contains("fsync failed"), "{why}");
    assert_eq!(broken.status().role, "down");
    // The other two are a majority: puts go on.
    assert_eq!(client.call(b"put 0 0 60 1\r\ny\r\n")?, "INSERTED 2\r\n");
    for node in nodes.iter_mut().flatten() {
        node.stop();
    }
    Ok(())
}
