//! A follower whose leader's process is gone stands for election as soon as
//! the other voters can grant their votes, not after its own election timer.
//!
//! openraft 0.9 has a follower stand once it has heard nothing from its leader
//! for the leader lease (the election timeout's maximum) plus an election
//! timeout of its own: 750-1,000 ms with the default timing. The lease part
//! cannot be cut: every voter refuses its vote until the lease after the last
//! append it took has passed, which is what lets a leader answer reads from
//! its lease (`leader.rs`). The rest is a wait for news that can be had at
//! once when the leader's process has ended and its machine is up: the kernel
//! closes the leader's connections to this node, and a connection to its peer
//! address is refused.
//!
//! So the peer server tells [`Vacancy`] when each append from a peer arrived
//! and when a peer's connection ended (`net/server.rs`, [`PeerWatch`]). When a
//! connection of the leader this node follows ends, [`run`] dials the leader's
//! peer address: refused, it waits until the lease after the last append it
//! took from that leader has passed (plus a margin for the other voters having
//! taken that append a little later), and stands if nothing has changed
//! meanwhile: no append from that leader since, the same term, no other
//! leader. The voters stand one after the other in the order of their ids, a
//! stagger apart, so that two do not split the vote; one whose log is shorter
//! is refused and the next one stands (`campaign.rs` holds the refused one
//! back).
//!
//! A leader that is alive (its connection ended for another reason) accepts
//! the dial, and a machine that is gone leaves it unanswered: in both cases
//! nothing is done and openraft's own timer decides, as before. Nothing here
//! changes which votes a node grants, only when this node asks for them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::ServerState;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::net::PeerWatch;
use crate::types::{NodeId, Raft};

/// After the lease, before the first voter stands: the other voters took the
/// leader's last append up to a few milliseconds after this node did.
const MARGIN: Duration = Duration::from_millis(30);

/// Between the voters standing in turn: long enough for one campaign on
/// loopback or a LAN (a vote saved to disk and a round trip) to be decided.
const STAGGER: Duration = Duration::from_millis(60);

/// The longest a dial of the leader's peer address may take. A refusal comes
/// back at once; a machine that is gone is left to openraft's timer.
const DIAL: Duration = Duration::from_millis(200);

/// Dials of the leader's peer address, [`REDIAL`] apart, before it is taken
/// for alive: a process that ends closes its connections one by one, and its
/// listener may still take a dial made on the first one's end.
const DIALS: u32 = 3;
const REDIAL: Duration = Duration::from_millis(25);

/// What the peer server tells: the last append taken from each peer, and the
/// ends of peer connections, queued for [`run`].
#[derive(Debug)]
pub struct Vacancy {
    /// When the last append from each peer was taken. A std mutex: held for
    /// one map update per append, never across an await.
    heard: Mutex<HashMap<NodeId, Instant>>,
    /// To [`run`]. Unbounded: one message per ended peer connection, a few
    /// when a peer's process ends; the sender is the server, which must not
    /// wait.
    ended: mpsc::UnboundedSender<NodeId>,
}

impl Vacancy {
    /// A watch for the peer server, and the queue [`run`] takes.
    pub fn new() -> (Arc<Vacancy>, mpsc::UnboundedReceiver<NodeId>) {
        let (ended, queue) = mpsc::unbounded_channel();
        let vacancy = Vacancy {
            heard: Mutex::default(),
            ended,
        };
        (Arc::new(vacancy), queue)
    }

    fn last_heard(&self, from: NodeId) -> Option<Instant> {
        let heard = self.heard.lock().unwrap_or_else(|e| e.into_inner());
        heard.get(&from).copied()
    }
}

impl PeerWatch for Vacancy {
    fn heard(&self, from: NodeId) {
        let now = Instant::now();
        let mut heard = self.heard.lock().unwrap_or_else(|e| e.into_inner());
        heard.insert(from, now);
    }

    fn ended(&self, from: NodeId) {
        // Closed only once the node stops.
        let _ = self.ended.send(from);
    }
}

/// What this node saw of its leader when one of its connections ended.
#[derive(Debug, PartialEq)]
struct Following {
    leader: NodeId,
    term: u64,
    /// Where this node stands among the voters but the leader, by id.
    rank: u32,
    addr: String,
}

/// The leader this node follows as a voter, if `from` is it.
fn following(raft: &Raft, id: NodeId, from: NodeId) -> Option<Following> {
    let m = raft.metrics().borrow().clone();
    if m.state != ServerState::Follower || m.current_leader != Some(from) {
        return None;
    }
    let membership = m.membership_config.membership();
    let mut others: Vec<NodeId> = membership.voter_ids().filter(|&v| v != from).collect();
    others.sort_unstable();
    let rank = others.iter().position(|&v| v == id)?;
    Some(Following {
        leader: from,
        term: m.current_term,
        rank: u32::try_from(rank).ok()?,
        addr: membership.get_node(&from)?.peer.clone(),
    })
}

/// Whether a connection to `addr` is refused: nothing listens there, so the
/// process that did is gone (or has not started again yet).
async fn refused(addr: &str) -> bool {
    match tokio::time::timeout(DIAL, TcpStream::connect(addr)).await {
        Ok(Err(e)) => e.kind() == std::io::ErrorKind::ConnectionRefused,
        // Answered (dropped at once: a connection that sends nothing is
        // closed by the peer's server) or unanswered: not known to be gone.
        Ok(Ok(_)) | Err(_) => false,
    }
}

/// Whether any of [`DIALS`] dials of `addr` is refused.
async fn gone(addr: &str) -> bool {
    for dial in 0..DIALS {
        if dial > 0 {
            tokio::time::sleep(REDIAL).await;
        }
        if refused(addr).await {
            return true;
        }
    }
    false
}

/// Act on ended peer connections until the node stops: stand for election
/// when the leader's process is gone, as soon as the other voters' leases
/// allow (`lease`: openraft's, the election timeout's maximum); with
/// `announce`, say so on stderr.
pub async fn run(
    raft: Raft,
    id: NodeId,
    vacancy: Arc<Vacancy>,
    mut ended: mpsc::UnboundedReceiver<NodeId>,
    lease: Duration,
    announce: bool,
) {
    while let Some(from) = ended.recv().await {
        let Some(seen) = following(&raft, id, from) else {
            continue;
        };
        let Some(heard) = vacancy.last_heard(from) else {
            continue;
        };
        if !gone(&seen.addr).await {
            continue;
        }
        let at = heard + lease + MARGIN + STAGGER * seen.rank;
        tokio::time::sleep_until(at).await;
        // Nothing heard from it since, and still following it in that term.
        if vacancy.last_heard(from) == Some(heard) && following(&raft, id, from) == Some(seen) {
            if announce {
                crate::say::say!(
                    "beanpole: node {id}: leader {from}'s peer address refuses connections \
                     (its process is gone): standing for election"
                );
            }
            let _ = raft.trigger().elect().await;
        }
        // Its other connections' ends, queued meanwhile, are the same news.
        while ended.try_recv().is_ok() {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_closed_port_is_refused_and_a_listening_one_is_not() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        assert!(!refused(&addr).await, "a listening port answers");
        drop(listener);
        assert!(refused(&addr).await, "a closed port refuses");
    }

    #[test]
    fn the_last_append_heard_is_kept_per_peer() {
        let (vacancy, mut queue) = Vacancy::new();
        assert_eq!(vacancy.last_heard(1), None);
        vacancy.heard(1);
        let first = vacancy.last_heard(1).expect("heard");
        vacancy.heard(2);
        let second = vacancy.last_heard(2).expect("heard");
        assert_eq!(vacancy.last_heard(1), Some(first), "another peer's append");
        assert!(second >= first);
        vacancy.ended(2);
        assert_eq!(queue.try_recv().ok(), Some(2));
    }
}
