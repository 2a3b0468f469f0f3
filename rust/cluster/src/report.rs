//! `beanpole cluster status`: every node of a cluster file asked for its status
//! at once over its peer address (`net/status.rs`), and each node's lag behind
//! the leader worked out from the answers.

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
            if let Ok(s) = &r.status {
                r.lag = Some(leader.last_log.saturating_sub(s.applied));
            }
        }
    }
    Ok(reports)
}
