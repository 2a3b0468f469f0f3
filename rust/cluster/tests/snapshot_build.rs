//! Snapshots built from the snapshot on disk and the log after it, off the
//! Raft thread (`sm/build.rs`): while every node's build is held back (a slow
//! build, far past an election timeout) the leader goes on taking puts and
//! stays the leader; and a node restarted on the images built that way, the
//! second one made from the first, leads with every job kept as put.

use std::sync::atomic::Ordering;

use beanpole_cluster::node::{Node, NodeConfig};

mod nodes;

use nodes::*;

/// The log a node snapshots past, here.
const FLOOR: u64 = 256 << 10;
/// Bytes per body: a batch of 50 puts is one entry of about 50 KB at most.
const BODY: usize = 1000;

fn body(id: u32) -> String {
    format!("{id}:{}-", id.wrapping_mul(2_654_435_761)).repeat(BODY)[..BODY].to_owned()
}

/// One job in ten stays, the others are deleted: a log mostly of what a
/// snapshot drops, as snapshots wait for (`node/snapshots.rs`).
fn kept(id: u32) -> bool {
    id % 10 == 0
}

const JOBS: Batches = Batches {
    size: 50,
    body_len: BODY,
    body,
    keep: kept,
};

fn put(client: &mut Client, first: u32, batches: u32) -> Result<u32, Error> {
    JOBS.put(client, first, batches)
}

fn small(c: &mut NodeConfig) {
    c.snapshot_bytes = FLOOR;
}

/// Wait until `done` holds (at most 30 s), saying what `show` says if not.
fn wait(done: impl FnMut() -> bool, show: impl Fn() -> String) -> Result<(), Error> {
    wait_until(30, done, show)
}

#[test]
fn a_slow_snapshot_build_leaves_the_leader_serving_and_restarts_read_its_image() -> Result<(), Error>
{
    let file = cluster_file(3)?;
    let (dirs, mut nodes) = three_with(&file, small)?;
    let leader = serving(&nodes)?;
    let addr = nodes[leader].as_ref().ok_or("leader")?.client_addr()?;
    let mut client = Client::connect(addr)?;
    // Every node's builds held back 3 s while they make their images.
    let builds: Vec<_> = nodes.iter().flatten().map(Node::snapshot_builds).collect();
    for b in &builds {
        b.stall().store(3_000, Ordering::SeqCst);
    }
    // 600 KB of records, nine jobs in ten deleted: past the floor and
    // mostly garbage, so each node starts a build.
    let next = put(&mut client, 1, 12)?;
    let leading = &builds[leader];
    wait(
        || leading.under_way() > 0,
        || "the leader never started a snapshot".into(),
    )?;
    let next = put(&mut client, next, 1)?;
    assert!(
        leading.under_way() > 0,
        "the put was answered only once the build held back was done"
    );
    for b in &builds {
        b.stall().store(0, Ordering::SeqCst);
    }
    let built = |n: &Node| n.snapshots_built() >= 1 && n.snapshot_builds().under_way() == 0;
    wait(
        || nodes.iter().flatten().all(built),
        || "a node made no snapshot".into(),
    )?;
    assert_eq!(serving(&nodes)?, leader, "the leader stayed the leader");
    // 600 KB more: a second snapshot, made from the first one's file.
    let last = put(&mut client, next, 12)?;
    let twice =
        |n: &Node| n.snapshot_builds().replayed() >= 2 && n.snapshot_builds().under_way() == 0;
    wait(
        || nodes.iter().flatten().all(twice),
        || {
            let built: Vec<u64> = builds.iter().map(|b| b.replayed()).collect();
            format!("snapshots replayed {built:?}")
        },
    )?;
    drop(client);
    // A follower restarts on its snapshot, the other stops, and the leader
    // hands over to the restarted one: it leads with every job kept.
    let (restarted, other) = ((leader + 1) % 3, (leader + 2) % 3);
    if let Some(mut node) = nodes[restarted].take() {
        node.stop();
    }
    nodes[restarted] = Some(start_with(
        &file,
        restarted as u64 + 1,
        dirs[restarted].path(),
        small,
    )?);
    let durable = |i: usize| nodes[i].as_ref().map_or(0, Node::durable_index);
    wait(
        || durable(restarted) >= durable(leader) && durable(leader) > 0,
        || {
            format!(
                "durable {} against the leader's {}",
                durable(restarted),
                durable(leader)
            )
        },
    )?;
    JOBS.led_by(&mut nodes, (leader, restarted, other), last)?;
    for node in nodes.iter_mut().flatten() {
        node.stop();
    }
    Ok(())
}
