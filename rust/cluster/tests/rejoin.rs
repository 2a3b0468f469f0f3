//! A node that comes back with an empty data directory keeps its vote back
//! until it holds what the cluster committed (`node/rejoin.rs`): its vote
//! cannot elect a node that lacks an acknowledged change. A fresh cluster
//! still elects its first leader with one node never started.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use beanpole_cluster::node::Node;

mod nodes;

use nodes::*;

/// Wait until `cond` holds (at most 15 s); `check` must hold meanwhile.
fn until(
    what: &str,
    mut cond: impl FnMut() -> bool,
    mut check: impl FnMut() -> Result<(), Error>,
) -> Result<(), Error> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        check()?;
        if cond() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("timed out waiting for {what}").into());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn never(_: &[&Option<Node>]) -> Result<(), Error> {
    Ok(())
}

fn no_failure(nodes: &[Option<Node>]) -> Result<(), Error> {
    match nodes.iter().flatten().find_map(Node::failure) {
        Some(why) => Err(why.into()),
        None => Ok(()),
    }
}

fn temp_dirs(n: usize) -> Result<Vec<tempfile::TempDir>, Error> {
    Ok((0..n)
        .map(|_| tempfile::tempdir())
        .collect::<Result<_, _>>()?)
}

/// A put through whichever of `nodes` serves is acknowledged; then all stop.
fn put_and_stop(mut nodes: Vec<Option<Node>>) -> Result<(), Error> {
    let lead = serving(&nodes)?;
    let mut client = Client::connect(nodes[lead].as_ref().ok_or("leader")?.client_addr()?)?;
    assert_eq!(client.call(b"put 0 0 60 2\r\nhi\r\n")?, "INSERTED 1\r\n");
    for node in nodes.iter_mut().flatten() {
        node.stop();
    }
    Ok(())
}

fn no_leader(nodes: &[&Option<Node>]) -> Result<(), Error> {
    for node in nodes.iter().copied().flatten() {
        let status = node.status();
        if status.role == "leader" {
            return Err(format!("node {} was elected without the put", status.id).into());
        }
    }
    Ok(())
}

#[test]
fn a_wiped_node_votes_only_once_it_holds_what_was_committed() -> Result<(), Error> {
    let file = cluster_file(3)?;
    let (dirs, mut nodes) = three(&file)?;
    let lead = serving(&nodes)?;
    let (a, b) = match lead {
        0 => (1, 2),
        1 => (0, 2),
        _ => (0, 1),
    };
    let id = |i: usize| i as u64 + 1;
    // B misses the put: it is acknowledged by the leader and A.
    nodes[b].take().ok_or("b")?.stop();
    let leader = nodes[lead].as_ref().ok_or("leader")?;
    let mut client = Client::connect(leader.client_addr()?)?;
    assert_eq!(client.call(b"put 0 0 60 5\r\nkept!\r\n")?, "INSERTED 1\r\n");
    drop(client);
    // The leader's disk is lost; A is down.
    nodes[lead].take().ok_or("leader")?.stop();
    nodes[a].take().ok_or("a")?.stop();
    std::fs::remove_dir_all(dirs[lead].path())?;

    nodes[b] = Some(start(&file, id(b), dirs[b].path())?);
    nodes[lead] = Some(start(&file, id(lead), dirs[lead].path())?);
    let marker = dirs[lead].path().join("rejoining");
    assert!(marker.exists(), "a wiped node starts rejoining");
    // B campaigns, again and again; the wiped node's vote would elect it.
    let first_term = nodes[b].as_ref().ok_or("b")?.status().term;
    until(
        "node B to campaign three times",
        || {
            nodes[b]
                .as_ref()
                .is_some_and(|n| n.status().term >= first_term + 3)
        },
        || no_leader(&[&nodes[b], &nodes[lead]]),
    )?;
    assert!(marker.exists());

    // With A back, A leads (B votes for the longer log), the put is there,
    // and the wiped node catches up and votes again.
    nodes[a] = Some(start(&file, id(a), dirs[a].path())?);
    let now = serving(&nodes)?;
    assert_eq!(now, a, "only A holds the put");
    let mut client = Client::connect(nodes[now].as_ref().ok_or("a")?.client_addr()?)?;
    assert_eq!(client.call(b"peek 1\r\n")?, "FOUND 1 5\r\n");
    assert_eq!(client.body(5)?, b"kept!");
    until(
        "the wiped node to catch up",
        || !marker.exists(),
        || never(&[]),
    )?;
    for node in nodes.iter_mut().flatten() {
        node.stop();
    }
    Ok(())
}

#[test]
fn a_fresh_cluster_elects_its_first_leader_with_a_node_never_started() -> Result<(), Error> {
    let file = cluster_file(3)?;
    let dirs = temp_dirs(2)?;
    // Node 2 first: it finds no cluster, so it starts rejoining; node 1 then
    // founds the cluster and campaigns with nothing but the founding entry.
    let second = start(&file, 2, dirs[1].path())?;
    let marker = dirs[1].path().join("rejoining");
    assert!(marker.exists());
    let first = start(&file, 1, dirs[0].path())?;
    assert!(!dirs[0].path().join("rejoining").exists(), "the founder");
    let nodes = vec![Some(first), Some(second)];
    // Node 2's vote went to a founder that had never led: it has lost nothing
    // and votes freely from then on.
    until(
        "node 2 to catch up",
        || !marker.exists(),
        || no_failure(&nodes),
    )?;
    put_and_stop(nodes)
}

#[test]
fn a_fresh_clusters_first_leader_may_die_before_its_first_commit() -> Result<(), Error> {
    let file = cluster_file(3)?;
    let dirs = temp_dirs(2)?;
    let second = start(&file, 2, dirs[1].path())?;
    let marker = dirs[1].path().join("rejoining");
    // Node 2's disk holds its appends back (2 s a sync): with node 3 never started,
    // nothing can commit meanwhile, so no commit reaches node 2.
    second.sync_stall().store(2_000, Ordering::SeqCst);
    let mut first = start(&file, 1, dirs[0].path())?;
    until(
        "node 1 to be elected",
        || first.status().role == "leader",
        || never(&[]),
    )?;
    // Its vote for a candidate with nothing past the founding entry told node
    // 2 the cluster had never had a leader: it has lost nothing.
    assert!(!marker.exists(), "node 2 still keeps its vote back");
    // The leader dies with its term's first entry uncommitted, and comes back
    // with that entry: node 2's vote elects it again.
    first.stop();
    drop(first);
    second.sync_stall().store(0, Ordering::SeqCst);
    let again = start(&file, 1, dirs[0].path())?;
    put_and_stop(vec![Some(again), Some(second)])
}
