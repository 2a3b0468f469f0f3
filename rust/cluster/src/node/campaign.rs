//! What a candidate does after a refused vote, in place of openraft 0.9's own
//! rule, which could hold a node's campaigns back long after the election
//! that called for it.
//!
//! openraft 0.9 marks a candidate refused by a voter whose log is longer, and
//! adds twice the longest election timeout to its next wait, so that the
//! voter, the better candidate, stands first. The mark is cleared only when
//! the node next stands by its own timer. A node that lost one election that
//! way and then followed its new leader kept the mark: when that leader died,
//! the node waited a second longer than it should before it stood, even with
//! the longest log among the survivors (leader SIGKILLs that took 1.8-2.4 s
//! instead of under one; docs/cluster.md, "Raft timing").
//!
//! So the transport (`net/client.rs`) hides a longer log in a refusal from
//! openraft and tells [`Campaigns`] instead, which holds this node's elections
//! back for the same time, from the refusal on: [`Refusal::LongerLog`]. It
//! also reports the case that cost another election timeout: this node stood
//! in the same term as a rival that had voted for itself and whose log is
//! shorter than this node's ([`Refusal::RivalBehind`]). Such a rival can win
//! no vote of this node's, and it refuses this node's in that term (an equal
//! term's vote goes to the higher node id), so this node stands again at
//! once, a term higher, which that rival grants.
//!
//! Neither changes what makes an election safe (the votes a node grants);
//! only when this node asks for them.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::net::{Refusal, Refusals};
use crate::types::Raft;

/// Where the transport reports refusals: the sending end of [`run`]'s queue.
#[derive(Debug)]
pub struct Campaigns {
    /// To [`run`]. Unbounded: one message per refused vote request, a few per
    /// election; the sender is a vote call that must not wait.
    tx: mpsc::UnboundedSender<Refusal>,
}

impl Campaigns {
    /// A sink, and the queue [`run`] takes.
    pub fn new() -> (Arc<Campaigns>, mpsc::UnboundedReceiver<Refusal>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Arc::new(Campaigns { tx }), rx)
    }
}

impl Refusals for Campaigns {
    fn refused(&self, why: Refusal) {
        // Closed only once the node stops.
        let _ = self.tx.send(why);
    }
}

/// Act on refusals until the node stops: hold elections back for `hold` after
/// each [`Refusal::LongerLog`] (openraft's own figure: twice the longest
/// election timeout), stand again at once after a [`Refusal::RivalBehind`].
pub async fn run(raft: Raft, mut refusals: mpsc::UnboundedReceiver<Refusal>, hold: Duration) {
    let mut held_until: Option<Instant> = None;
    loop {
        let next = match held_until {
            Some(until) => tokio::select! {
                next = refusals.recv() => next,
                () = tokio::time::sleep_until(until) => {
                    raft.runtime_config().elect(true);
                    held_until = None;
                    continue;
                }
            },
            None => refusals.recv().await,
        };
        match next {
            None => return,
            Some(Refusal::LongerLog) => {
                raft.runtime_config().elect(false);
                held_until = Some(Instant::now() + hold);
            }
            Some(Refusal::RivalBehind) => {
                // Not while a longer log's node is left to stand first, nor
                // once a leader is known (it won this term or a later one).
                if held_until.is_none() && raft.metrics().borrow().current_leader.is_none() {
                    // Stopped, or a leader already: nothing to do either way.
                    let _ = raft.trigger().elect().await;
                }
            }
        }
    }
}
