//! `beanpole._core.ClusterNode`: a node of a replicated cluster, as `beanpole
//! serve --cluster FILE --node N -b DIR` runs it (the cluster crate's `Node`).
//! Every call that can block releases the GIL.

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use beanpole_cluster::file::ClusterFile;
use beanpole_cluster::node::{Node, NodeConfig, NodeError, NodeStatus};
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
    Ok(d)
}

#[pymethods]
impl PyClusterNode {
    /// Start node `node` of the cluster in `cluster_file` with its data in
    /// `data_dir`; returns once its client and peer addresses listen.
    #[staticmethod]
    #[pyo3(signature = (
        cluster_file, node, data_dir, max_job_size = 65535, verbose = 0, threads = 0,
        max_connections = 0, max_memory = 0, heartbeat_ms = 50,
        election_timeout_ms = (250, 500),
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
    /// down), term, leader, applied, last_log, serving.
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let status = {
            let guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            guard.as_ref().map(Node::status)
        };
        let status = status.unwrap_or(NodeStatus {
            id: self.id,
            role: "down",
            term: 0,
            leader: None,
            applied: 0,
            last_log: 0,
            serving: false,
        });
        status_dict(py, &status)
    }

    /// Wait at most `timeout` seconds until this node serves clients.
    fn wait_serving(&self, py: Python<'_>, timeout: f64) -> bool {
        let timeout = Duration::from_secs_f64(timeout.max(0.0));
        py.detach(|| {
            let guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            guard.as_ref().is_some_and(|n| n.wait_serving(timeout))
        })
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
