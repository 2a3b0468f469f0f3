//! What the tests of whole nodes (`node::Node`) share: a cluster file on free loopback
//! ports, nodes started with the tests' timing, the node that serves, and a
//! small blocking protocol client.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use beanpole_cluster::file::ClusterFile;
use beanpole_cluster::node::{HandoverOutcome, Node, NodeConfig};

pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// Ports handed out for nodes lie here, below the kernel's ephemeral range
/// (32768 on): a port given by binding port 0 is one that outgoing
/// connections draw from too, and a node restarted on it could find it taken
/// by another test's client socket (seen once, `AddrInUse` at a restart).
/// Below the bench's cluster harness's range too (20000-32000), so that a
/// fault run beside the tests does not take them.
const PORTS: std::ops::Range<u32> = 10000..20000;

/// Ports this test process has handed out. A std mutex: held only to look up
/// and add one port.
static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// A free loopback port below the ephemeral range (bound, then released for
/// the node to bind), drawn at random so that tests running at once do not
/// try the same ones, and never one this process handed out before: a port
/// free when two tests running at once drew it (neither node had bound it
/// yet) went to both, and the second node's bind failed (`AddrInUse`, seen in
/// `follower_protocol.rs`).
pub fn free_port() -> Result<u16, Error> {
    use std::hash::{BuildHasher, Hasher};
    for _ in 0..1000 {
        // Each RandomState is freshly seeded: a random draw without a crate.
        let draw = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        let span = u64::from(PORTS.end - PORTS.start);
        let port = u16::try_from(u64::from(PORTS.start) + draw % span)?;
        let mut given = GIVEN
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !given.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.insert(port);
            return Ok(port);
        }
    }
    Err("no free port below the ephemeral range".into())
}

pub fn cluster_file(n: u64) -> Result<ClusterFile, Error> {
    let mut text = String::new();
    for id in 1..=n {
        text.push_str(&format!(
            "[[node]]\nid = {id}\nclient = \"127.0.0.1:{}\"\npeer = \"127.0.0.1:{}\"\n",
            free_port()?,
            free_port()?
        ));
    }
    Ok(ClusterFile::parse(&text, "cluster.toml")?)
}

pub fn start(file: &ClusterFile, id: u64, dir: &std::path::Path) -> Result<Node, Error> {
    start_with(file, id, dir, |_| {})
}

pub fn start_with(
    file: &ClusterFile,
    id: u64,
    dir: &std::path::Path,
    tweak: impl Fn(&mut NodeConfig),
) -> Result<Node, Error> {
    let mut config = NodeConfig::new(file.clone(), id, dir.to_path_buf());
    config.raft.heartbeat_interval = 50;
    config.raft.election_timeout_min = 300;
    config.raft.election_timeout_max = 600;
    config.commit_timeout = Duration::from_millis(1500);
    tweak(&mut config);
    Ok(Node::start(config)?)
}

/// Three nodes of `file`, started with the tests' timing, each in a temporary
/// directory (kept alive by the first value).
pub fn three(file: &ClusterFile) -> Result<(Vec<tempfile::TempDir>, Vec<Option<Node>>), Error> {
    three_with(file, |_| {})
}

/// [`three`], each node's settings changed by `tweak` after the tests' own.
pub fn three_with(
    file: &ClusterFile,
    tweak: impl Fn(&mut NodeConfig),
) -> Result<(Vec<tempfile::TempDir>, Vec<Option<Node>>), Error> {
    let dirs: Vec<tempfile::TempDir> = (0..3)
        .map(|_| tempfile::tempdir())
        .collect::<Result<_, _>>()?;
    let mut nodes = Vec::new();
    for id in 1..=3u64 {
        let dir = dirs[id as usize - 1].path();
        nodes.push(Some(start_with(file, id, dir, &tweak)?));
    }
    Ok((dirs, nodes))
}

/// The node that serves clients, once one does (at most 15 s).
pub fn serving(nodes: &[Option<Node>]) -> Result<usize, Error> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        for (i, node) in nodes.iter().enumerate() {
            if let Some(node) = node {
                if node.wait_serving(Duration::from_millis(20)) {
                    return Ok(i);
                }
            }
        }
        if Instant::now() > deadline {
            return Err("no node serves clients".into());
        }
    }
}

/// Wait until `done` holds (at most `secs` seconds), saying what `show` says
/// if not.
pub fn wait_until(
    secs: u64,
    mut done: impl FnMut() -> bool,
    show: impl Fn() -> String,
) -> Result<(), Error> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done() {
        if Instant::now() > deadline {
            return Err(show().into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Jobs put in pipelined batches, each body computed from the job's number.
pub struct Batches {
    /// Puts per batch.
    pub size: u32,
    /// Each body's bytes.
    pub body_len: usize,
    /// The body of job `id`, `body_len` bytes.
    pub body: fn(u32) -> String,
    /// Whether job `id` stays: the others are deleted in the batch after
    /// their puts (a log that is not all jobs, as snapshots wait for).
    pub keep: fn(u32) -> bool,
}

/// Every job stays.
pub fn every(_: u32) -> bool {
    true
}

impl Batches {
    /// Put `batches` batches of jobs numbered from `first` (each answered
    /// with its number); the number after the last.
    pub fn put(&self, client: &mut Client, first: u32, batches: u32) -> Result<u32, Error> {
        let mut next = first;
        for _ in 0..batches {
            let mut bytes = Vec::new();
            for id in next..next + self.size {
                let body = (self.body)(id);
                bytes.extend_from_slice(
                    format!("put 0 0 60 {}\r\n{body}\r\n", body.len()).as_bytes(),
                );
            }
            client.writer.write_all(&bytes)?;
            for id in next..next + self.size {
                let mut line = String::new();
                client.reader.read_line(&mut line)?;
                assert_eq!(line, format!("INSERTED {id}\r\n"));
            }
            let gone: Vec<u32> = (next..next + self.size)
                .filter(|&id| !(self.keep)(id))
                .collect();
            let deletes: String = gone.iter().map(|id| format!("delete {id}\r\n")).collect();
            client.writer.write_all(deletes.as_bytes())?;
            for id in gone {
                let mut line = String::new();
                client.reader.read_line(&mut line)?;
                assert_eq!(line, "DELETED\r\n", "delete {id}");
            }
            next += self.size;
        }
        Ok(next)
    }

    /// Stop node `other`, have `leader` hand the lead to `to` (the one voter
    /// left), and read every job kept before `last` back from it, each with
    /// its body, and none of the others nor any from `last` on.
    pub fn led_by(
        &self,
        nodes: &mut [Option<Node>],
        (leader, to, other): (usize, usize, usize),
        last: u32,
    ) -> Result<(), Error> {
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
        let new = nodes[to].as_ref().ok_or("successor")?;
        assert!(new.wait_serving(Duration::from_secs(10)), "it leads");
        let mut client = Client::connect(new.client_addr()?)?;
        let len = self.body_len;
        for id in 1..last {
            let head = client.call(format!("peek {id}\r\n").as_bytes())?;
            if !(self.keep)(id) {
                assert_eq!(head, "NOT_FOUND\r\n", "job {id} was deleted");
                continue;
            }
            assert_eq!(head, format!("FOUND {id} {len}\r\n"));
            assert_eq!(client.body(len)?, (self.body)(id).as_bytes(), "job {id}");
        }
        assert_eq!(
            client.call(format!("peek {last}\r\n").as_bytes())?,
            "NOT_FOUND\r\n"
        );
        Ok(())
    }
}

pub struct Client {
    pub reader: BufReader<TcpStream>,
    pub writer: TcpStream,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Result<Client, Error> {
        let s = TcpStream::connect(addr)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        Ok(Client {
            reader: BufReader::new(s.try_clone()?),
            writer: s,
        })
    }

    pub fn call(&mut self, command: &[u8]) -> Result<String, Error> {
        self.writer.write_all(command)?;
        let mut line = String::new();
        self.reader.read_line(&mut line)?;
        Ok(line)
    }

    pub fn body(&mut self, len: usize) -> Result<Vec<u8>, Error> {
        let mut buf = vec![0; len + 2];
        self.reader.read_exact(&mut buf)?;
        buf.truncate(len);
        Ok(buf)
    }
}

/// The value of `key` in the YAML body `command` answers with `OK <len>`.
pub fn yaml_value(client: &mut Client, command: &str, key: &str) -> Result<String, Error> {
    let head = client.call(format!("{command}\r\n").as_bytes())?;
    let len: usize = head
        .trim_end()
        .strip_prefix("OK ")
        .ok_or_else(|| format!("{command}: {head}"))?
        .parse()?;
    let yaml = String::from_utf8(client.body(len)?)?;
    let prefix = format!("{key}: ");
    let value = yaml
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .ok_or_else(|| format!("no {key} in {command}"))?;
    Ok(value.to_owned())
}

/// `stats-job`'s `state:` for job `id`.
pub fn job_state(client: &mut Client, id: u64) -> Result<String, Error> {
    yaml_value(client, &format!("stats-job {id}"), "state")
}
