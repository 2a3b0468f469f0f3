//! When a node snapshots: when its log after its last snapshot (in memory and
//! on disk) has grown past both a floor (`snapshot_bytes`, 64 MiB by default)
//! and the size of that snapshot's image. A snapshot lets openraft purge the
//! entries it covers (all but the last few), which bounds the log on disk and
//! what a restart re-applies (its memory has a bound of its own,
//! `logstore/cache.rs`).
//!
//! openraft's own policy (a snapshot every 5,000 entries) is off
//! (`NodeConfig::new`): a snapshot writes the whole state, so with a long
//! queue (a million jobs waiting) a count of entries made each entry cost a
//! share of that state, and under load the nodes spent about a sixth of their
//! Raft threads building snapshots. Measured against the image instead, each
//! byte of log costs at most about one byte of snapshot however long the queue,
//! and the log stays below the larger of the floor and the state.

use std::time::Duration;

use crate::logstore::CacheSize;
use crate::sm::StateView;
use crate::types::Raft;

/// How often the size is looked at.
const EVERY: Duration = Duration::from_millis(200);
/// After asking for a snapshot, how long to wait for it before asking again.
const PATIENCE: Duration = Duration::from_secs(5);

/// Whether a log holding `log_bytes` of records is due a snapshot,
/// with a floor of `floor` bytes and a last image of `image_bytes`.
pub fn due(log_bytes: u64, floor: u64, image_bytes: u64) -> bool {
    log_bytes > floor.max(image_bytes)
}

/// Ask `raft` for a snapshot whenever its log holds more records after its
/// last snapshot than `floor` bytes and than that snapshot's image in `view`.
/// Runs until Raft stops.
pub async fn run(raft: Raft, size: CacheSize, view: StateView, floor: u64) {
    let mut metrics = raft.metrics();
    loop {
        tokio::time::sleep(EVERY).await;
        if metrics.has_changed().is_err() {
            return;
        }
        let before = metrics.borrow_and_update().snapshot;
        let since = size.bytes_after(before.map(|l| l.index));
        if !due(since, floor, view.image_bytes()) {
            continue;
        }
        if raft.trigger().snapshot().await.is_err() {
            return;
        }
        // Until the snapshot is made (and the log purged behind it).
        let made = metrics.wait_for(|m| m.snapshot != before);
        let _ = tokio::time::timeout(PATIENCE, made).await;
    }
}

#[cfg(test)]
mod tests {
    use super::due;

    #[test]
    fn a_snapshot_waits_for_the_larger_of_the_floor_and_the_last_image() {
        let mib = 1 << 20;
        assert!(!due(64 * mib, 64 * mib, 0), "at the floor");
        assert!(due(64 * mib + 1, 64 * mib, 0), "past it, small state");
        assert!(
            !due(100 * mib, 64 * mib, 500 * mib),
            "a long queue: not yet"
        );
        assert!(
            due(500 * mib + 1, 64 * mib, 500 * mib),
            "as much log as state"
        );
    }
}
