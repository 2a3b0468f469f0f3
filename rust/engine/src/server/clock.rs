//! The clock task: sleeps until the store's next deadline, then lets the store act
//! on everything due (delays, TTRs, reserve timeouts, pauses).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::Shared;

pub async fn run(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    loop {
        let now = shared.now();
        let (next, settled) = {
            let mut store = shared.lock();
            let next = store.tick(now).unwrap_or(u64::MAX);
            shared.armed.store(next, Ordering::Relaxed);
            let settled = shared.settle(&mut store);
            (next, settled)
        };
        shared.finish(settled);
        let sleep = next.saturating_sub(shared.now());
        let sleep = Duration::from_nanos(sleep.min(3600 * 1_000_000_000));
        tokio::select! {
            _ = tokio::time::sleep(sleep) => {}
            _ = shared.clock.notified() => {}
            _ = stop.changed() => return,
        }
    }
}
