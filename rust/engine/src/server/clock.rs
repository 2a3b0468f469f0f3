//! The clock task: sleeps until the store's next deadline, then lets the store act
//! on everything due (delays, TTRs, reserve timeouts, pauses). With a log it also
//! wakes at least every [`LOG_MAINTENANCE`], so compaction goes on while idle.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::Shared;

/// Longest sleep of the clock when there is a log to compact.
const LOG_MAINTENANCE: Duration = Duration::from_secs(1);

/// Runs until the server stops (its alarm rings with [`Shared::stopping`] set).
pub async fn run(shared: Arc<Shared>) {
    loop {
        let now = shared.now();
        let (next, settled) = {
            let mut store = shared.lock();
            let next = store.tick(now).unwrap_or(u64::MAX);
            shared.armed.store(next, Ordering::Relaxed);
            let settled = shared.settle_timers(&mut store);
            (next, settled)
        };
        // Timeouts and compaction moves: nobody waits for them, but they are written.
        shared.write_log(shared.finish(settled));
        let sleep = next.saturating_sub(shared.now());
        let mut sleep = Duration::from_nanos(sleep.min(3600 * 1_000_000_000));
        // A cluster's replicated log has no segments to compact.
        if shared.log_pipe.is_some() && !shared.replicated {
            sleep = sleep.min(LOG_MAINTENANCE);
        }
        tokio::select! {
            _ = tokio::time::sleep(sleep) => {}
            _ = shared.clock.notified() => {}
        }
        if shared.stopping() {
            return;
        }
    }
}
