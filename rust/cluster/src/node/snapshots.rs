//! When a node snapshots: openraft's own policy counts entries (every 5,000);
//! entries carry whole passes of records, so this task also snapshots when the
//! log held in memory grows past a number of bytes. A snapshot lets openraft
//! purge the entries it covers (all but the last few), which bounds the memory
//! the log takes however large the entries are.

use std::time::Duration;

use crate::logstore::CacheSize;
use crate::types::Raft;

/// How often the size is looked at.
const EVERY: Duration = Duration::from_millis(200);
/// After asking for a snapshot, how long to wait for it before asking again.
const PATIENCE: Duration = Duration::from_secs(5);

/// Ask `raft` for a snapshot whenever its log holds more than `limit` bytes of
/// records in memory. Runs until Raft stops.
pub async fn run(raft: Raft, size: CacheSize, limit: u64) {
    let mut metrics = raft.metrics();
    loop {
        tokio::time::sleep(EVERY).await;
        if metrics.has_changed().is_err() {
            return;
        }
        if size.bytes() <= limit {
            continue;
        }
        let before = metrics.borrow_and_update().snapshot;
        if raft.trigger().snapshot().await.is_err() {
            return;
        }
        // Until the snapshot is made (and the log purged behind it).
        let made = metrics.wait_for(|m| m.snapshot != before);
        let _ = tokio::time::timeout(PATIENCE, made).await;
    }
}
