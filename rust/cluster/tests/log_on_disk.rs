//! The Raft log beyond what a node keeps in memory (`log_cache_bytes`): each
//! node's log in memory comes down to that bound once its entries are
//! committed and on disk; a follower restarted re-applies its committed
//! entries from its own files, and catches up on what it missed from the
//! leader's files (no snapshot: the log is far below the snapshot floor); then
//! it leads with every job as put.

use beanpole_cluster::file::ClusterFile;
use beanpole_cluster::node::{Node, NodeConfig};

mod nodes;

use nodes::*;

/// The bytes of records each node keeps in memory here.
const KEEP: u64 = 64 << 10;
/// Puts per pipelined batch, and bytes per body: one batch is one entry of
/// about 50 KB at most.
const BATCH: u32 = 50;
const BODY: usize = 1000;

fn body(id: u32) -> String {
    format!("job {id}: ").repeat(BODY)[..BODY].to_owned()
}

const JOBS: Batches = Batches {
    size: BATCH,
    body_len: BODY,
    body,
    keep: every,
};

fn put(client: &mut Client, first: u32, batches: u32) -> Result<u32, Error> {
    JOBS.put(client, first, batches)
}

fn small(c: &mut NodeConfig) {
    c.log_cache_bytes = KEEP;
}

fn start_small(file: &ClusterFile, id: u64, dir: &std::path::Path) -> Result<Node, Error> {
    start_with(file, id, dir, small)
}

/// Wait until `done` holds (at most 20 s), saying what `show` says if not.
fn wait(done: impl FnMut() -> bool, show: impl Fn() -> String) -> Result<(), Error> {
    wait_until(20, done, show)
}

#[test]
fn entries_past_the_memory_bound_are_read_back_by_a_restart_and_for_a_follower_behind(
) -> Result<(), Error> {
    let file = cluster_file(3)?;
    let (dirs, mut nodes) = three_with(&file, small)?;
    let leader = serving(&nodes)?;
    let (behind, other) = ((leader + 1) % 3, (leader + 2) % 3);
    let addr = nodes[leader].as_ref().ok_or("leader")?.client_addr()?;
    let mut client = Client::connect(addr)?;
    // About 500 KB of records, then each node's log in memory comes down to
    // the bound plus its last entry (kept: its id is the log's end).
    let next = put(&mut client, 1, 10)?;
    let sizes = || -> Vec<u64> { nodes.iter().flatten().map(Node::log_bytes).collect() };
    wait(
        || sizes().iter().all(|&b| b <= KEEP + BATCH as u64 * 1100),
        || format!("logs in memory stay at {:?} bytes", sizes()),
    )?;
    // A follower stops; 1 MB more is put without it.
    if let Some(mut node) = nodes[behind].take() {
        node.stop();
    }
    let last = put(&mut client, next, 20)?;
    // It restarts: its own committed entries are on its disk only, what it
    // missed on the leader's disk only.
    nodes[behind] = Some(start_small(&file, behind as u64 + 1, dirs[behind].path())?);
    let durable = |i: usize| nodes[i].as_ref().map_or(0, Node::durable_index);
    wait(
        || durable(behind) >= durable(leader) && durable(leader) > 0,
        || {
            format!(
                "durable {} against the leader's {}",
                durable(behind),
                durable(leader)
            )
        },
    )?;
    // It leads with every job: the other follower stops and the leader hands
    // over to it, the one voter left.
    JOBS.led_by(&mut nodes, (leader, behind, other), last)?;
    for node in nodes.iter_mut().flatten() {
        node.stop();
    }
    Ok(())
}

/// A follower catching up from the leader's files while that disk is slow
/// (each read held back 3 s, far past an election timeout): the read waits on
/// a thread of its own, not on the leader's Raft thread, which sends the other
/// follower's heartbeats and serves the leader's clients; so a put is answered
/// while the read is still held back.
#[test]
fn a_slow_read_for_a_follower_behind_leaves_the_leader_serving() -> Result<(), Error> {
    let file = cluster_file(3)?;
    let (dirs, mut nodes) = three_with(&file, small)?;
    let leader = serving(&nodes)?;
    let behind = (leader + 1) % 3;
    let addr = nodes[leader].as_ref().ok_or("leader")?.client_addr()?;
    let mut client = Client::connect(addr)?;
    let next = put(&mut client, 1, 2)?;
    if let Some(mut node) = nodes[behind].take() {
        node.stop();
    }
    // Far more than the leader keeps in memory: the follower's catch-up is
    // read from the leader's files.
    let next = put(&mut client, next, 10)?;
    let reads = nodes[leader].as_ref().ok_or("leader")?.disk_reads();
    reads
        .stall()
        .store(3_000, std::sync::atomic::Ordering::SeqCst);
    nodes[behind] = Some(start_small(&file, behind as u64 + 1, dirs[behind].path())?);
    wait(
        || reads.under_way() > 0,
        || "the leader never read the follower's entries back".into(),
    )?;
    let last = put(&mut client, next, 1)?;
    assert!(
        reads.under_way() > 0,
        "the put was answered only once the read held back was done"
    );
    reads.stall().store(0, std::sync::atomic::Ordering::SeqCst);
    let durable = |i: usize| nodes[i].as_ref().map_or(0, Node::durable_index);
    wait(
        || durable(behind) >= durable(leader),
        || format!("durable {} against {}", durable(behind), durable(leader)),
    )?;
    let mut client = Client::connect(addr)?;
    assert_eq!(
        client.call(format!("peek {}\r\n", last - 1).as_bytes())?,
        format!("FOUND {} {BODY}\r\n", last - 1)
    );
    for node in nodes.iter_mut().flatten() {
        node.stop();
    }
    Ok(())
}
