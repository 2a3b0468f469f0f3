//! When a node snapshots: when its log after its last snapshot (in memory and
//! on disk) has grown past a floor (`snapshot_bytes`, 64 MiB by default) and
//! is more than half garbage: the last snapshot's image and the log after it
//! together more than twice what an image of the jobs now would be. A snapshot
//! lets openraft purge the entries it covers (all but the last few), which
//! bounds the log on disk and what a restart re-applies (its memory has a
//! bound of its own, `logstore/cache.rs`). It is the rule the single node's
//! log compacts by (`store/log.rs`: more than twice the live bytes on disk).
//!
//! openraft's own policy (a snapshot every 5,000 entries) is off
//! (`NodeConfig::new`): a snapshot writes the whole state, so with a long
//! queue (a million jobs waiting) a count of entries made each entry cost a
//! share of that state, and under load the nodes spent about a sixth of their
//! Raft threads building snapshots. Against the garbage instead, a snapshot
//! costs about its image, and comes only after at least as many bytes of log
//! that it drops. A queue that only grows (puts and nothing else) has a log
//! about as large as its image, so it snapshots no more than the single node
//! compacts: writing the same jobs again would free nothing, and cost 15% of
//! the three nodes' CPU while 100 connections put (bench/README.md). The log
//! stays under the larger of the floor (plus the last image) and twice the
//! state.

use std::time::Duration;

use crate::logstore::CacheSize;
use crate::sm::StateView;
use crate::types::Raft;

/// How often the size is looked at.
const EVERY: Duration = Duration::from_millis(200);
/// After asking for a snapshot, how long to wait for it before asking again.
const PATIENCE: Duration = Duration::from_secs(5);

/// Whether a log holding `log_bytes` of records after the last snapshot is
/// due a snapshot, with a floor of `floor` bytes, a last image of
/// `image_bytes` and jobs that an image now would hold in `jobs_bytes`.
pub fn due(log_bytes: u64, floor: u64, image_bytes: u64, jobs_bytes: u64) -> bool {
    log_bytes > floor && image_bytes.saturating_add(log_bytes) > jobs_bytes.saturating_mul(2)
}

/// Ask `raft` for a snapshot whenever its log after its last snapshot is
/// [`due`] one, with the images and jobs in `view`.
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
        if !due(since, floor, view.image_bytes(), view.jobs_image_bytes()) {
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
    fn a_snapshot_waits_for_the_floor_and_for_half_the_bytes_to_be_garbage() {
        let mib = 1 << 20;
        // A short queue: past the floor, the log is nearly all garbage.
        assert!(!due(64 * mib, 64 * mib, 0, mib), "at the floor");
        assert!(due(64 * mib + 1, 64 * mib, 0, mib), "past it");
        assert!(due(64 * mib + 1, 64 * mib, 2 * mib, mib), "after one");
        // A queue that only grows: its log is its jobs, nothing to drop.
        assert!(!due(300 * mib, 64 * mib, 0, 280 * mib), "puts alone");
        assert!(!due(300 * mib, 64 * mib, 200 * mib, 480 * mib), "still");
        // A long queue turning over: due once as much log as image is written.
        assert!(!due(400 * mib, 64 * mib, 500 * mib, 500 * mib), "not yet");
        assert!(due(501 * mib, 64 * mib, 500 * mib, 500 * mib), "now");
        // A long queue drained: its image is garbage, and the next one small.
        assert!(due(64 * mib + 1, 64 * mib, 500 * mib, 0), "drained");
        assert!(
            !due(64 * mib, 64 * mib, 500 * mib, 0),
            "not below the floor"
        );
    }
}
