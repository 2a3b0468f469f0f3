//! `beanpole cluster status`: every node of a cluster file asked for its status
//! at once over its peer address (`net/status.rs`), and each node's lag behind
//! the leader worked out from the answers; a node the leader's membership has
//! as a learner is one, and a node it does not have is `removed` (a removed
//! node is not told). Also the membership changes (`change`), asked of the
//! leader found that way.

use std::time::Duration;

use crate::file::ClusterFile;
use crate::net::status::{self, Status};
use crate::types::NodeId;

/// One node of the file, as it answered (or why it did not).
#[derive(Debug, Clone)]
pub struct NodeReport {
    pub id: NodeId,
    pub client: String,
    pub peer: String,
    /// Its status, or why it could not be had (the node is then `down`).
    pub status: Result<Status, String>,
    /// Log entries the leader has that this node has not applied (None when no
    /// leader answered, or this node did not).
    pub lag: Option<u64>,
}

/// Ask every node of `file`, each within `timeout`.
pub fn report(file: &ClusterFile, timeout: Duration) -> std::io::Result<Vec<NodeReport>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut reports: Vec<NodeReport> = runtime.block_on(async {
        let asks = file.nodes.values().cloned().map(|entry| async move {
            let status = status::query(&entry.peer, timeout)
                .await
                .map_err(|e| e.to_string());
            NodeReport {
                id: entry.id,
                client: entry.client,
                peer: entry.peer,
                status,
                lag: None,
            }
        });
        let mut all = Vec::new();
        // Concurrently: a node that does not answer costs the timeout once.
        let mut set = tokio::task::JoinSet::new();
        for ask in asks {
            set.spawn(ask);
        }
        while let Some(done) = set.join_next().await {
            if let Ok(report) = done {
                all.push(report);
            }
        }
        all
    });
    reports.sort_by_key(|r| r.id);
    let leader = reports
        .iter()
        .filter_map(|r| r.status.as_ref().ok())
        .filter(|s| s.role == "leader")
        .max_by_key(|s| s.term)
        .cloned();
    if let Some(leader) = leader {
        for r in &mut reports {
            if let Ok(s) = &mut r.status {
                r.lag = Some(leader.last_log.saturating_sub(s.applied));
                // The leader's membership says what a node is now: one removed
                // (or demoted) does not learn it itself.
                if leader.learners.contains(&s.node) {
                    s.role = "learner";
                } else if !leader.voters.contains(&s.node) {
                    s.role = "removed";
                }
            }
        }
    }
    Ok(reports)
}

/// Why a membership change was not made; one line.
#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    #[error("{0}")]
    File(#[from] crate::file::FileError),
    #[error("no node of the cluster leads now (asked every node in {0})")]
    NoLeader(String),
    #[error("the leader, node {node}, did not answer: {reason}")]
    Unanswered { node: NodeId, reason: String },
    #[error("node {node} refused: {reason}")]
    Refused { node: NodeId, reason: String },
    #[error("cannot start: {0}")]
    Runtime(std::io::Error),
}

/// Ask the leader of `file`'s cluster to make `op` of `node` (whose addresses
/// are the file's); its answer. The leader is found by asking every node.
pub fn change(
    file: &ClusterFile,
    op: crate::net::members::Op,
    node: NodeId,
    token: &str,
    timeout: Duration,
) -> Result<String, ChangeError> {
    use crate::net::members;

    let entry = file.node(node)?.clone();
    let reports = report(file, Duration::from_secs(1)).map_err(ChangeError::Runtime)?;
    let leader = reports
        .iter()
        .filter(|r| r.status.as_ref().is_ok_and(|s| s.role == "leader"))
        .max_by_key(|r| r.status.as_ref().map_or(0, |s| s.term))
        .ok_or_else(|| ChangeError::NoLeader(file.path.clone()))?;
    let request = members::Change {
        op,
        node,
        addresses: crate::types::Peer {
            client: entry.client,
            peer: entry.peer,
        },
        token: token.to_owned(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ChangeError::Runtime)?;
    let answer = runtime
        .block_on(members::request(&leader.peer, &request, timeout))
        .map_err(|e| ChangeError::Unanswered {
            node: leader.id,
            reason: e.to_string(),
        })?;
    match answer {
        (true, message) => Ok(message),
        (false, reason) => Err(ChangeError::Refused {
            node: leader.id,
            reason,
        }),
    }
}
