//! The acknowledged position: what replies wait for, and how waiting
//! connections learn it moved (from the writer, or for a replicated pipe from
//! the cluster through the relay task).

use std::sync::atomic::Ordering;

use tokio::sync::watch;

use super::LogPipe;

impl LogPipe {
    /// Wait until `position` is acknowledged. False if the log has stopped.
    pub async fn wait_acked(&self, rx: &mut watch::Receiver<u64>, position: u64) -> bool {
        // Register first, then look: a writer that advances the position after
        // this look sees the registration and sends.
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let done = self.acked.load(Ordering::SeqCst) >= position
            || (rx
                .wait_for(|&a| a >= position || self.closed.load(Ordering::SeqCst))
                .await
                .is_ok()
                && self.acked.load(Ordering::SeqCst) >= position);
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        done
    }

    /// No position is acknowledged any more (a cluster leader's term has ended):
    /// every wait ends now, unacknowledged, and so do later ones.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.acked_tx
            .send_replace(self.acked.load(Ordering::SeqCst));
    }

    /// A receiver for the acknowledged log position.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.acked_tx.subscribe()
    }

    /// The acknowledged log position.
    pub fn acked(&self) -> u64 {
        self.acked.load(Ordering::SeqCst)
    }

    /// Raise the acknowledged position (written or synced, by policy; for a
    /// replicated pipe, committed by the cluster).
    ///
    /// A replicated pipe's commits are learnt on another runtime's thread, and
    /// waking each waiting connection from there costs a system call each (a
    /// task woken from outside a single-thread runtime wakes its thread), so
    /// they wake only the relay, which wakes the connections from the server's
    /// own thread.
    pub fn acknowledge(&self, position: u64) {
        if self.acked.fetch_max(position, Ordering::SeqCst) < position
            && self.waiters.load(Ordering::SeqCst) > 0
        {
            match &self.relay {
                Some(relay) => relay.notify_one(),
                None => {
                    self.acked_tx.send_replace(position);
                }
            }
        }
    }

    /// For a replicated pipe, run on the server's runtime while it serves:
    /// passes each acknowledged position on to the waiting connections. Returns
    /// at once for any other pipe.
    pub async fn relay_acks(&self) {
        let Some(relay) = &self.relay else { return };
        loop {
            relay.notified().await;
            self.acked_tx
                .send_replace(self.acked.load(Ordering::SeqCst));
        }
    }
}
