//! The acknowledged position: what replies wait for, and how waiting
//! connections learn it moved (from the writer, or for a replicated pipe from
//! the cluster through the relay task).

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::{Instant, MissedTickBehavior};

use super::LogPipe;

/// How a wait for an acknowledged position ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acked {
    /// The position is acknowledged (written or synced by policy; for a
    /// replicated pipe, committed).
    Yes,
    /// The pipe was closed first (a cluster leader's term ended).
    Closed,
    /// A replicated pipe's position not committed within the commit timeout
    /// of being proposed.
    TimedOut,
}

/// The commit timeout is checked this many times per timeout's length: a wait
/// is given up between one and one and a tenth timeouts after its proposal.
const CHECKS_PER_TIMEOUT: u32 = 20;

impl LogPipe {
    /// Wait until `position` is acknowledged, the pipe is closed, or (a
    /// replicated pipe) the commit timeout has passed since it was proposed
    /// with no commit (told by [`LogPipe::relay_acks`], which checks every
    /// proposal's age: one timer for all the waits rather than one each).
    pub async fn wait_acked(&self, rx: &mut watch::Receiver<u64>, position: u64) -> Acked {
        let done = |acked: u64| {
            if acked >= position {
                Some(Acked::Yes)
            } else if self.closed.load(Ordering::SeqCst) {
                Some(Acked::Closed)
            } else if self.expired.load(Ordering::SeqCst) >= position {
                Some(Acked::TimedOut)
            } else {
                None
            }
        };
        // Register first, then look: a writer that advances the position after
        // this look sees the registration and sends.
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let mut outcome = done(self.acked.load(Ordering::SeqCst));
        if outcome.is_none() {
            let woken = rx
                .wait_for(|_| done(self.acked.load(Ordering::SeqCst)).is_some())
                .await;
            outcome = match woken {
                Ok(_) => done(self.acked.load(Ordering::SeqCst)),
                Err(_) => Some(Acked::Closed),
            };
        }
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        outcome.unwrap_or(Acked::Closed)
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
    ///
    /// It also gives up on proposals not committed within the commit timeout:
    /// a few times per timeout it notes the highest position proposed so far,
    /// and once a noted position is a timeout old and still not committed,
    /// every wait for it or an earlier one ends ([`Acked::TimedOut`]).
    pub async fn relay_acks(&self) {
        let Some(relay) = &self.relay else { return };
        let limit = self.commit_timeout();
        // Without a timeout the checks are never made (a long period keeps the
        // timer valid all the same).
        let every = limit.map_or(Duration::from_secs(3600), |l| {
            (l / CHECKS_PER_TIMEOUT).max(Duration::from_millis(1))
        });
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut noted: VecDeque<(Instant, u64)> = VecDeque::new();
        loop {
            tokio::select! {
                () = relay.notified() => {}
                now = ticks.tick(), if limit.is_some() => {
                    if !limit.is_some_and(|l| self.expire(&mut noted, now, l)) {
                        continue;
                    }
                }
            }
            self.acked_tx
                .send_replace(self.acked.load(Ordering::SeqCst));
        }
    }

    /// Note the position proposed by `now` and give up on those proposed at
    /// least `limit` before it and not committed; true if it gave up on any.
    fn expire(&self, noted: &mut VecDeque<(Instant, u64)>, now: Instant, limit: Duration) -> bool {
        let proposed = self.proposed.load(Ordering::SeqCst);
        if !matches!(noted.back(), Some(&(_, p)) if p == proposed) {
            noted.push_back((now, proposed));
        }
        let mut due = None;
        while let Some(&(at, p)) = noted.front() {
            if now.saturating_duration_since(at) < limit {
                break;
            }
            due = Some(p);
            noted.pop_front();
        }
        let acked = self.acked.load(Ordering::SeqCst);
        match due {
            Some(p) if p > acked && p > self.expired.load(Ordering::SeqCst) => {
                self.expired.fetch_max(p, Ordering::SeqCst);
                true
            }
            _ => false,
        }
    }
}
