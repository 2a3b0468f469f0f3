//! What the fault harness's simulated power loss found (`bench/cluster_chaos.py`,
//! the `power` fault): a leader that restarts leads again in the same term
//! (openraft 0.9 restores a node whose saved vote is its own and committed),
//! and then waited only for its term's first entry to be applied before it
//! built its store and served clients. Its saved committed index is written
//! unsynced after each commit, so it may lag or be gone after a power loss;
//! with a follower that lacks the last entries, the commit then advances in
//! steps of one replication batch (300 entries), and the store was built after
//! the first: acknowledged puts were gone, and deleted jobs back. Three nodes
//! in one process over loopback: one follower stops, 700 puts (one entry each)
//! are acknowledged by the other two, both stop, the `committed` files are
//! removed (what a power loss may leave of a file never synced), and the old
//! leader starts again with the follower that lacks the puts.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use beanpole_cluster::file::ClusterFile;
use beanpole_cluster::node::{Node, NodeConfig};

mod nodes;

use nodes::free_port;

type Error = Box<dyn std::error::Error + Send + Sync>;

const JOBS: u32 = 700;

fn cluster_file() -> Result<ClusterFile, Error> {
    let mut text = String::new();
    for id in 1..=3 {
        text.push_str(&format!(
            "[[node]]\nid = {id}\nclient = \"127.0.0.1:{}\"\npeer = \"127.0.0.1:{}\"\n",
            free_port()?,
            free_port()?
        ));
    }
    Ok(ClusterFile::parse(&text, "cluster.toml")?)
}

fn start(file: &ClusterFile, id: u64, dir: &std::path::Path) -> Result<Node, Error> {
    let mut config = NodeConfig::new(file.clone(), id, dir.to_path_buf());
    config.raft.heartbeat_interval = 50;
    config.raft.election_timeout_min = 300;
    config.raft.election_timeout_max = 600;
    config.commit_timeout = Duration::from_millis(1500);
    Ok(Node::start(config)?)
}

/// The node that serves clients, once one does (at most 15 s).
fn serving(nodes: &[Option<Node>]) -> Result<usize, Error> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        for (i, node) in nodes.iter().enumerate() {
            if node
                .as_ref()
                .is_some_and(|n| n.wait_serving(Duration::from_millis(20)))
            {
                return Ok(i);
            }
        }
        if Instant::now() > deadline {
            return Err("no node serves clients".into());
        }
    }
}

/// `command`'s reply line, and the body of an `OK`/`FOUND` reply.
fn call(addr: SocketAddr, command: &[u8]) -> Result<(String, Vec<u8>), Error> {
    let s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(s.try_clone()?);
    (&s).write_all(command)?;
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut body = Vec::new();
    if line.starts_with("OK ") || line.starts_with("FOUND ") {
        let len: usize = line.trim_end().rsplit(' ').next().ok_or("len")?.parse()?;
        body = vec![0; len + 2];
        reader.read_exact(&mut body)?;
        body.truncate(len);
    }
    Ok((line, body))
}

#[test]
fn a_leader_restored_in_its_term_serves_everything_it_acknowledged() -> Result<(), Error> {
    let file = cluster_file()?;
    let dirs: Vec<tempfile::TempDir> = (0..3)
        .map(|_| tempfile::tempdir())
        .collect::<Result<_, _>>()?;
    let mut nodes = (1..=3u64)
        .map(|id| start(&file, id, dirs[id as usize - 1].path()).map(Some))
        .collect::<Result<Vec<_>, _>>()?;
    let lead = serving(&nodes)?;
    let (behind, other) = ((lead + 1) % 3, (lead + 2) % 3);
    let term = nodes[lead].as_ref().ok_or("leader")?.status().term;
    // One follower stops; the leader and the other acknowledge every put.
    nodes[behind].take().ok_or("follower")?.stop();
    let addr = nodes[lead].as_ref().ok_or("leader")?.client_addr()?;
    for i in 1..=JOBS {
        let body = format!("job {i}");
        let put = format!("put 0 0 60 {}\r\n{body}\r\n", body.len());
        assert_eq!(call(addr, put.as_bytes())?.0, format!("INSERTED {i}\r\n"));
    }
    // The other follower, then the leader (which keeps its lead to the end).
    for i in [other, lead] {
        nodes[i].take().ok_or("node")?.stop();
    }
    for dir in &dirs {
        let committed = dir.path().join("raft").join("committed");
        if committed.exists() {
            std::fs::remove_file(committed)?;
        }
    }
    // The old leader and the follower that lacks the puts: a majority again.
    nodes[lead] = Some(start(&file, lead as u64 + 1, dirs[lead].path())?);
    nodes[behind] = Some(start(&file, behind as u64 + 1, dirs[behind].path())?);
    let again = serving(&nodes)?;
    let node = nodes[again].as_ref().ok_or("serving")?;
    let restored = again == lead && node.status().term == term;
    let addr = node.client_addr()?;
    let (line, yaml) = call(addr, b"stats-tube default\r\n")?;
    assert!(line.starts_with("OK "), "{line}");
    let yaml = String::from_utf8(yaml)?;
    assert!(
        yaml.contains(&format!("current-jobs-ready: {JOBS}\n")),
        "node {} (the old leader in its term: {restored}) serves:\n{yaml}",
        again + 1
    );
    let last = format!("job {JOBS}");
    assert_eq!(
        call(addr, format!("peek {JOBS}\r\n").as_bytes())?,
        (
            format!("FOUND {JOBS} {}\r\n", last.len()),
            last.into_bytes()
        )
    );
    for node in nodes.iter_mut().flatten() {
        node.stop();
    }
    Ok(())
}
