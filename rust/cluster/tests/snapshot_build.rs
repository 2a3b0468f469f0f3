//! Snapshots built from the snapshot on disk and the log after it, off the
//! Raft thread (`sm/build.rs`): while every node's build is held back (a slow
//! build, far past an election timeout) the leader goes on taking puts and
//! stays the leader; and a node restarted on the images built that way, the
//! second one made from the first, leads with every job as put.

use std::io::{BufRead, Write};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use beanpole_cluster::node::{HandoverOutcome, Node, NodeConfig};

mod nodes;

use nodes::*;

/// Puts per pipelined batch, and bytes per body: one batch is one entry of
/// about 50 KB at most.
const BATCH: u32 = 50;
const BODY: usize = 1000;
/// The log a node snapshots past, here.
const FLOOR: u64 = 256 << 10;

fn body(id: u32) -> String {
    format!("{id}:{}-", id.wrapping_mul(2_654_435_761)).repeat(BODY)[..BODY].to_owned()
}

/// Put `batches` batches of jobs numbered from `first`, pipelined.
fn put(client: &mut Client, first: u32, batches: u32) -> Result<u32, Error> {
    let mut next = first;
    for _ in 0..batches {
        let mut bytes = Vec::new();
        for id in next..next + BATCH {
            let body = body(id);
            bytes.extend_from_slice(format!("put 0 0 60 {}\r\n{body}\r\n", body.len()).as_bytes());
        }
        client.writer.write_all(&bytes)?;
        for id in next..next + BATCH {
            let mut line = String::new();
            client.reader.read_line(&mut line)?;
            assert_eq!(line, format!("INSERTED {id}\r\n"));
        }
        next += BATCH;
    }
    Ok(next)
}

fn small(c: &mut NodeConfig) {
    c.snapshot_bytes = FLOOR;
}

/// Wait until `done` holds (at most 30 s), saying what `show` says if not.
fn wait(mut done: impl FnMut() -> bool, show: impl Fn() -> String) -> Result<(), Error> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        if Instant::now() > deadline {
            return Err(show().into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
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
    // 600 KB of records: past the floor, so each node starts a build.
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
    // hands over to the restarted one: it leads with every job.
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
    if let Some(mut node) = nodes[other].take() {
        node.stop();
    }
    let outcome = nodes[leader]
        .as_ref()
        .ok_or("leader")?
        .step_down(Duration::from_secs(10));
    assert!(
        matches!(outcome, HandoverOutcome::HandedOver { .. }),
        "{outcome:?}"
    );
    let new = nodes[restarted].as_ref().ok_or("restarted")?;
    assert!(new.wait_serving(Duration::from_secs(10)), "it leads");
    let mut client = Client::connect(new.client_addr()?)?;
    for id in 1..last {
        let head = client.call(format!("peek {id}\r\n").as_bytes())?;
        assert_eq!(head, format!("FOUND {id} {BODY}\r\n"));
        assert_eq!(client.body(BODY)?, body(id).as_bytes(), "job {id}");
    }
    assert_eq!(
        client.call(format!("peek {last}\r\n").as_bytes())?,
        "NOT_FOUND\r\n"
    );
    for node in nodes.iter_mut().flatten() {
        node.stop();
    }
    Ok(())
}
