//! `beanpole._core.ClusterNode`: a node of a replicated cluster, as `beanpole
//! serve --cluster FILE --node N -b DIR` runs it (the cluster crate's `Node`).
//! Every call that can block releases the GIL.

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use beanpole_cluster::file::ClusterFile;
use beanpole_cluster::node::{HandoverOutcome, Node, NodeConfig, NodeError, NodeStatus};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// A running cluster node.
#[pyclass(name = "ClusterNode", module = "beanpole._core", frozen)]
#[derive(Debug)]
pub struct PyClusterNode {
    /// The node, until stopped. A mutex because Python may stop it from any
    /// thread; held only to read the status or take the node out.
    inner: Mutex<Option<Node>>,
    id: u64,
    address: (String, u16),
}

fn node_err(e: NodeError) -> PyErr {
    match e {
        NodeError::File(_) | NodeError::Identity(_) | NodeError::Raft(_) => {
            PyValueError::new_err(e.to_string())
        }
        _ => PyOSError::new_err(e.to_string()),
    }
}

fn positive(name: &str, value: i64) -> PyResult<u64> {
    u64::try_from(value)
        .ok()
        .filter(|&v| v > 0)
        .ok_or_else(|| PyValueError::new_err(format!("{name} {value} must be 1 or more")))
}

fn status_dict<'py>(py: Python<'py>, s: &NodeStatus) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("id", s.id)?;
    d.set_item("role", s.role)?;
    d.set_item("term", s.term)?;
    d.set_item("leader", s.leader)?;
    d.set_item("applied", s.applied)?;
    d.set_item("last_log", s.last_log)?;
    d.set_item("serving", s.serving)?;
    d.set_item("voters", s.voters.clone())?;
    d.set_item("learners", s.learners.clone())?;
    let matched = PyDict::new(py);
    for (node, index) in &s.matched {
        matched.set_item(node, index)?;
    }
    d.set_item("matched", matched)?;
    d.set_item("millis_since_quorum_ack", s.millis_since_quorum_ack)?;
    Ok(d)
}

#[pymethods]
impl PyClusterNode {
    /// Start node `node` of the cluster in `cluster_file` with its data in
    /// `data_dir`; returns once its client and peer addresses listen.
    /// `client_fd`/`peer_fd`: sockets already listening on those addresses, to
    /// serve instead of binding them (each is duplicated; the caller closes its
    /// own). `announce`: say on stderr when the node starts and stops leading.
    /// `admin_token`: membership changes carrying it are taken (none without).
    /// `fsync` false: the Raft log is not synced (`-F`). `session_grace_ms`:
    /// how long a client of a node that is gone keeps its reservations.
    /// `log_cache_bytes`: the Raft log's records kept in memory (older
    /// committed entries are read back from disk). `snapshot_bytes`: the log's
    /// records since the last snapshot past which (and past that snapshot's
    /// size) the node snapshots.
    #[staticmethod]
    #[pyo3(signature = (
        cluster_file, node, data_dir, max_job_size = 65535, verbose = 0, threads = 0,
        max_connections = 0, max_memory = 0, heartbeat_ms = 50,
        election_timeout_ms = (250, 500), client_fd = None, peer_fd = None, announce = true,
        commit_timeout_ms = 5000, admin_token = None, fsync = true, session_grace_ms = 5000,
        log_cache_bytes = 16_777_216, snapshot_bytes = 67_108_864,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn start(
        py: Python<'_>,
        cluster_file: PathBuf,
        node: i64,
        data_dir: PathBuf,
        max_job_size: i64,
        verbose: i64,
        threads: i64,
        max_connections: i64,
        max_memory: i64,
        heartbeat_ms: i64,
        election_timeout_ms: (i64, i64),
        client_fd: Option<i32>,
        peer_fd: Option<i32>,
        announce: bool,
        commit_timeout_ms: i64,
        admin_token: Option<String>,
        fsync: bool,
        session_grace_ms: i64,
        log_cache_bytes: i64,
        snapshot_bytes: i64,
    ) -> PyResult<PyClusterNode> {
        let id = positive("node id", node)?;
        let file = ClusterFile::load(&cluster_file).map_err(|e| node_err(e.into()))?;
        let mut config = NodeConfig::new(file, id, data_dir);
        config.server.max_job_size = u32::try_from(max_job_size).map_err(|_| {
            PyValueError::new_err(format!("max job size {max_job_size} is out of range"))
        })?;
        config.server.verbose = u8::try_from(verbose.clamp(0, 255)).unwrap_or(u8::MAX);
        config.server.threads = usize::try_from(threads.max(0)).unwrap_or(0);
        config.server.max_connections = usize::try_from(max_connections.max(0)).unwrap_or(0);
        config.server.max_memory = u64::try_from(max_memory.max(0)).unwrap_or(0);
        config.raft.heartbeat_interval = positive("heartbeat", heartbeat_ms)?;
        config.raft.election_timeout_min = positive("election timeout", election_timeout_ms.0)?;
        config.raft.election_timeout_max = positive("election timeout", election_timeout_ms.1)?;
        config.client_fd = client_fd;
        config.peer_fd = peer_fd;
        config.announce = announce;
        config.net.admin_token = admin_token;
        config.fsync = fsync;
        config.commit_timeout =
            Duration::from_millis(positive("commit timeout", commit_timeout_ms)?);
        config.server.session_grace =
            Duration::from_millis(positive("session grace", session_grace_ms)?);
        config.log_cache_bytes = u64::try_from(log_cache_bytes).map_err(|_| {
            PyValueError::new_err(format!("log cache bytes {log_cache_bytes} is negative"))
        })?;
        config.snapshot_bytes = u64::try_from(snapshot_bytes).map_err(|_| {
            PyValueError::new_err(format!("snapshot bytes {snapshot_bytes} is negative"))
        })?;
        let started = py.detach(move || Node::start(config)).map_err(node_err)?;
        let addr = started
            .client_addr()
            .map_err(|e| PyOSError::new_err(e.to_string()))?;
        Ok(PyClusterNode {
            inner: Mutex::new(Some(started)),
            id,
            address: (addr.ip().to_string(), addr.port()),
        })
    }

    /// This node's id.
    #[getter]
    fn node(&self) -> u64 {
        self.id
    }

    /// The address clients connect to, as (host, port).
    #[getter]
    fn address(&self) -> (String, u16) {
        self.address.clone()
    }

    /// This node's view: id, role (leader, follower, candidate, learner,
    /// down), term, leader, applied, last_log, serving, voters, learners, and
    /// on the leader matched (each member's matching log index, None when not
    /// known) and millis_since_quorum_ack; and log_memory_bytes (the Raft
    /// log's records it keeps in memory, 0 when down).
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let status = {
            let guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            guard.as_ref().map(|node| (node.status(), node.log_bytes()))
        };
        let (status, log_bytes) = status.unwrap_or_else(|| (NodeStatus::down(self.id), 0));
        let d = status_dict(py, &status)?;
        d.set_item("log_memory_bytes", log_bytes)?;
        Ok(d)
    }

    /// The `stats` of this node's client server while it leads and serves;
    /// None otherwise.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let pairs = {
            let guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            guard.as_ref().and_then(Node::stats)
        };
        pairs.map(|p| crate::stats_dict(py, p)).transpose()
    }

    /// Why this node's Raft has stopped (a storage failure), if it has; None
    /// while it runs (or after a clean stop).
    fn failure(&self) -> Option<String> {
        let guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        guard.as_ref().and_then(Node::failure)
    }

    /// Enter drain mode: while this node leads, puts are answered DRAINING.
    fn drain(&self) {
        let guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(node) = guard.as_ref() {
            node.drain();
        }
    }

    /// Wait at most `timeout` seconds until this node serves clients.
    fn wait_serving(&self, py: Python<'_>, timeout: f64) -> bool {
        let timeout = Duration::from_secs_f64(timeout.max(0.0));
        py.detach(|| {
            let guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            guard.as_ref().is_some_and(|n| n.wait_serving(timeout))
        })
    }

    /// For a planned stop: if this node leads, hand the lead to the most
    /// up-to-date other voter within `timeout` seconds (the node stops serving
    /// clients first, once the passes in flight are committed and answered),
    /// and serve no clients afterwards; call stop() next. A dict: `outcome`
    /// (`handed-over`, `not-leader` or `failed`), `to` and `term` (the new
    /// leader and its term, or None), `seconds` (how long it took) and
    /// `message` (one line).
    #[pyo3(signature = (timeout = 5.0))]
    fn hand_over<'py>(&self, py: Python<'py>, timeout: f64) -> PyResult<Bound<'py, PyDict>> {
        let limit = Duration::from_secs_f64(timeout.max(0.0));
        let outcome = py.detach(|| {
            let guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            guard
                .as_ref()
                .map_or(HandoverOutcome::NotLeader, |n| n.hand_over(limit))
        });
        let d = PyDict::new(py);
        let (name, to, term, seconds, message) = match outcome {
            HandoverOutcome::HandedOver { to, term, took } => (
                "handed-over",
                Some(to),
                Some(term),
                took.as_secs_f64(),
                format!(
                    "handed the lead to node {to} (term {term}) in {} ms",
                    took.as_millis()
                ),
            ),
            HandoverOutcome::NotLeader => (
                "not-leader",
                None,
                None,
                0.0,
                "did not lead: nothing to hand over".to_owned(),
            ),
            HandoverOutcome::Failed(why) => (
                "failed",
                None,
                None,
                0.0,
                format!("could not hand the lead over: {why}"),
            ),
        };
        d.set_item("outcome", name)?;
        d.set_item("to", to)?;
        d.set_item("term", term)?;
        d.set_item("seconds", seconds)?;
        d.set_item("message", message)?;
        Ok(d)
    }

    /// Stop the node: clients, peers, Raft (what its log holds is synced).
    fn stop(&self, py: Python<'_>) {
        let node = self
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(mut node) = node {
            py.detach(move || node.stop());
        }
    }
}

/// Every node of the cluster in `cluster_file`, asked for its status over its
/// peer address (each within `timeout` seconds): a list of dicts with id,
/// client, peer, role (`down` when it did not answer, with `error`), term,
/// leader, commit (the last index it applied), last_log, cluster (the cluster
/// id it belongs to, None before it knows) and lag (entries the leader has that
/// it has not applied; None without a leader's answer).
#[pyfunction]
#[pyo3(signature = (cluster_file, timeout = 1.0))]
pub fn cluster_status<'py>(
    py: Python<'py>,
    cluster_file: PathBuf,
    timeout: f64,
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    let file =
        ClusterFile::load(&cluster_file).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let timeout = Duration::from_secs_f64(timeout.max(0.0));
    let reports = py
        .detach(|| beanpole_cluster::report::report(&file, timeout))
        .map_err(|e| PyOSError::new_err(e.to_string()))?;
    reports
        .iter()
        .map(|r| {
            let d = PyDict::new(py);
            d.set_item("id", r.id)?;
            d.set_item("client", &r.client)?;
            d.set_item("peer", &r.peer)?;
            match &r.status {
                Ok(s) => {
                    d.set_item("role", s.role)?;
                    d.set_item("term", s.term)?;
                    d.set_item("leader", s.leader)?;
                    d.set_item("commit", s.applied)?;
                    d.set_item("last_log", s.last_log)?;
                    d.set_item(
                        "cluster",
                        (!s.cluster.is_unset()).then(|| s.cluster.to_string()),
                    )?;
                    d.set_item("error", py.None())?;
                }
                Err(e) => {
                    d.set_item("role", "down")?;
                    d.set_item("term", py.None())?;
                    d.set_item("leader", py.None())?;
                    d.set_item("commit", py.None())?;
                    d.set_item("last_log", py.None())?;
                    d.set_item("cluster", py.None())?;
                    d.set_item("error", e)?;
                }
            }
            d.set_item("lag", r.lag)?;
            Ok(d)
        })
        .collect()
}

/// Ask the leader of the cluster in `cluster_file` to `op` (`add`, `promote` or
/// `remove`) node `node`, whose addresses are the file's, with the admin
/// `token`; waits up to `timeout` seconds (an add answers once the node has
/// caught up). Returns the leader's answer; raises ValueError when the change
/// is refused or the file is bad, OSError when no leader answers.
#[pyfunction]
#[pyo3(signature = (cluster_file, op, node, token, timeout = 120.0))]
pub fn cluster_change(
    py: Python<'_>,
    cluster_file: PathBuf,
    op: &str,
    node: i64,
    token: String,
    timeout: f64,
) -> PyResult<String> {
    use beanpole_cluster::net::members::Op;
    use beanpole_cluster::report::ChangeError;

    let op = match op {
        "add" => Op::Add,
        "promote" => Op::Promote,
        "remove" => Op::Remove,
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown membership change {other:?} (add, promote or remove)"
            )))
        }
    };
    let node = positive("node id", node)?;
    let file =
        ClusterFile::load(&cluster_file).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let timeout = Duration::from_secs_f64(timeout.max(0.0));
    py.detach(|| beanpole_cluster::report::change(&file, op, node, &token, timeout))
        .map_err(|e| match e {
            ChangeError::File(_) | ChangeError::Refused { .. } => {
                PyValueError::new_err(e.to_string())
            }
            _ => PyOSError::new_err(e.to_string()),
        })
}
