//! Handing the lead over on a planned stop (SIGTERM) or before the leader is
//! removed, so the others serve again within a round trip or two instead of
//! after an election timeout.
//!
//! openraft 0.9 has no leader transfer, but its vote rule allows one: a node
//! refuses a vote while its vote is committed and its leader lease (the
//! election timeout's maximum) runs from when that vote last changed or was
//! confirmed by a message carrying it. A leader's own vote is set when it is
//! elected and no follower's message touches it again, so once a leader has
//! led for longer than the lease it grants a higher term's candidate whose log
//! is at least as long as its own, and steps down. With three voters the
//! candidate's vote and the old leader's are a majority.
//!
//! [`Handover::run`]: the leader waits, serving, until it has led for the
//! lease; stops its term's server (no new connections; the passes in flight
//! get their commits and replies, bounded), so it serves no read after this,
//! before it can grant a vote; picks the voter whose log matches its own
//! furthest and waits until it holds the whole log; asks it to campaign
//! (`net/handover.rs`); and waits until a new leader is known. With more than
//! three voters the other followers refuse while the lease of their vote for
//! this node runs; a follower that stands for election itself lays that vote
//! down, and then grants a candidate of the same term with a higher node id
//! (openraft orders a term's votes by node id). So the leader first has enough
//! followers with ids below the successor's stand (each answers once it
//! stands), then the successor: its vote, theirs and the old leader's are a
//! majority. Without enough of them, the leader stops its heartbeats and the
//! successor campaigns once the lease has run out (500 ms by default).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use openraft::ServerState;
use tokio::sync::{watch, Mutex};
use tokio::time::{timeout_at, Instant};

use crate::net::handover::{self as wire, Campaign};
use crate::net::members::HandOff;
use crate::net::Network;
use crate::types::{NodeId, Raft};

/// Beyond the lease, how much later the leader grants a vote than its lease
/// allows (its view of when it was elected comes just after openraft's).
const LEASE_MARGIN: Duration = Duration::from_millis(10);
/// With more than three voters: after the leader's last heartbeat, how much
/// later than the lease the successor campaigns (a heartbeat still on its way
/// touches a follower's lease when it arrives).
const QUIET_MARGIN: Duration = Duration::from_millis(50);
/// How long one campaign request may take.
const ASK: Duration = Duration::from_millis(500);
/// How long handing over before a removal may take.
pub const REMOVAL_LIMIT: Duration = Duration::from_secs(5);

/// How a hand-over ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// This node did not lead: nothing was done.
    NotLeader,
    /// Node `to` leads in `term` (this node no longer does).
    HandedOver {
        to: NodeId,
        term: u64,
        took: Duration,
    },
    /// Why not; the node no longer serves clients unless it was asked to
    /// resume.
    Failed(String),
}

/// A node's means to hand its lead over.
pub struct Handover {
    pub(super) id: NodeId,
    pub(super) raft: Raft,
    pub(super) network: Network,
    /// openraft's leader lease: the election timeout's maximum.
    pub(super) lease: Duration,
    /// Tells the leadership task to serve no term (`leader.rs`). Watch
    /// channels: each side wants the latest value and to wait for a change.
    pub(super) yielding: watch::Sender<bool>,
    pub(super) yielded: watch::Receiver<bool>,
    pub(super) led_since: watch::Receiver<Option<(u64, std::time::Instant)>>,
    /// One hand-over at a time. An async mutex: held across the whole
    /// hand-over, which awaits.
    pub(super) busy: Mutex<()>,
    /// The log index of the last committed entry of a term's store.
    pub(super) committed_to: Arc<AtomicU64>,
}

impl std::fmt::Debug for Handover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handover")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Handover {
    /// Hand the lead over within `limit`. After a success or a failure the
    /// node serves again if it (still or again) leads when `resume` is set;
    /// without it (the node is stopping) it serves no more.
    pub async fn run(&self, limit: Duration, resume: bool) -> Outcome {
        let _one = self.busy.lock().await;
        let started = Instant::now();
        let (term, others) = {
            let m = self.raft.metrics().borrow().clone();
            if m.state != ServerState::Leader || m.current_leader != Some(self.id) {
                return Outcome::NotLeader;
            }
            let voters = m.membership_config.membership().voter_ids();
            let others: Vec<NodeId> = voters.filter(|&v| v != self.id).collect();
            (m.current_term, others)
        };
        if others.is_empty() {
            return Outcome::Failed("this node is the only voter".to_owned());
        }
        let result = self
            .hand_over(term, others.len() + 1, started + limit)
            .await;
        if resume || result.is_err() {
            self.raft.runtime_config().heartbeat(true);
        }
        if resume {
            self.yielding.send_replace(false);
        }
        match result {
            Ok((to, term)) => Outcome::HandedOver {
                to,
                term,
                took: started.elapsed(),
            },
            Err(why) => Outcome::Failed(why),
        }
    }

    async fn hand_over(
        &self,
        term: u64,
        voters: usize,
        deadline: Instant,
    ) -> Result<(NodeId, u64), String> {
        // 1. Led for the lease: it grants a vote from then on. It goes on
        //    serving meanwhile. (Not known: counted from now.)
        let since = self.led_since.borrow().filter(|&(t, _)| t == term);
        let at = since.map_or_else(std::time::Instant::now, |(_, at)| at);
        let until = Instant::from_std(at) + self.lease + LEASE_MARGIN;
        if until > deadline {
            return Err("it has led for less than the lease, longer than allowed".into());
        }
        tokio::time::sleep_until(until).await;
        // 2. No client is served from here on: nothing this node answers can
        //    miss a change the next leader makes.
        self.yielding.send_replace(true);
        let mut yielded = self.yielded.clone();
        timeout_at(deadline, yielded.wait_for(|&down| down))
            .await
            .map_err(|_| "the term's server did not stop in time".to_owned())?
            .map_err(|_| "the node is stopping".to_owned())?;
        // 3. The voters whose logs hold all of this one's, the furthest first.
        let mut metrics = self.raft.metrics();
        let (last, ready) = loop {
            let (last, ready, successor) = {
                let m = metrics.borrow_and_update();
                let successor = self.successor(&m, term);
                if successor.is_some() {
                    (0, Vec::new(), successor)
                } else if m.state != ServerState::Leader {
                    return Err(format!("node {} lost the lead meanwhile", self.id));
                } else if m.last_log_index.unwrap_or(0) < self.committed_to.load(Ordering::SeqCst) {
                    // Metrics older than the store's last entry: wait for
                    // fresher ones (a successor must hold every entry).
                    (0, Vec::new(), None)
                } else {
                    let last = m.last_log_index.unwrap_or(0);
                    let mut ready: Vec<(u64, NodeId)> = m
                        .replication
                        .iter()
                        .flatten()
                        .filter_map(|(&n, l)| Some((l.as_ref()?.index, n)))
                        .filter(|&(i, n)| i >= last && n != self.id)
                        .filter(|&(_, n)| {
                            m.membership_config.membership().voter_ids().any(|v| v == n)
                        })
                        .collect();
                    ready.sort_unstable_by(|a, b| b.cmp(a));
                    (last, ready, None)
                }
            };
            if let Some(found) = successor {
                return Ok(found);
            }
            if !ready.is_empty() {
                break (last, ready);
            }
            match timeout_at(deadline, metrics.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err("the node is stopping".into()),
                Err(_) => return Err("no other voter caught up in time".into()),
            }
        };
        // 4. With more than three voters the other followers refuse while the
        //    lease of their vote for this node runs. A follower that stands
        //    itself has no such vote, and grants a candidate of the same term
        //    whose node id is higher: have enough of them stand first (a
        //    majority with the successor and this node), then the successor,
        //    the caught-up voter with the highest id. Without enough of them,
        //    stop the heartbeats and have the successor campaign once the
        //    lease has passed.
        let mut ready: Vec<NodeId> = ready.into_iter().map(|(_, n)| n).collect();
        let mut delay = Duration::ZERO;
        if voters > 3 {
            ready.sort_unstable_by(|a, b| b.cmp(a));
            let helped = match ready.first() {
                Some(&successor) => self.stand_first(successor, term, voters, deadline).await,
                None => false,
            };
            if !helped {
                self.raft.runtime_config().heartbeat(false);
                delay = self.lease + QUIET_MARGIN;
            }
        }
        let asked_at = Instant::now();
        let mut refusals = Vec::new();
        let mut accepted = false;
        for node in ready {
            let ask = Campaign {
                term,
                last_log: last,
                delay: delay.saturating_sub(asked_at.elapsed()),
            };
            match self.ask(node, &ask, deadline).await {
                Ok((true, _)) => {
                    accepted = true;
                    break;
                }
                Ok((false, why)) => refusals.push(why),
                Err(e) => refusals.push(e),
            }
        }
        if !accepted {
            return Err(format!("no voter would campaign: {}", refusals.join("; ")));
        }
        // 5. Until a new leader is known here.
        loop {
            if let Some(found) = self.successor(&metrics.borrow_and_update(), term) {
                return Ok(found);
            }
            match timeout_at(deadline, metrics.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err("the node is stopping".into()),
                Err(_) => return Err("no new leader was elected in time".into()),
            }
        }
    }

    /// Ask node `node` to campaign as `ask` says; its answer.
    async fn ask(
        &self,
        node: NodeId,
        ask: &Campaign,
        deadline: Instant,
    ) -> Result<(bool, String), String> {
        let peer = {
            let m = self.raft.metrics().borrow().clone();
            m.membership_config.membership().get_node(&node).cloned()
        };
        let Some(peer) = peer else {
            return Err(format!("node {node} is not a member"));
        };
        let ttl = ASK.min(deadline.saturating_duration_since(Instant::now()));
        wire::ask(&self.network.link(node, &peer), ask, ttl)
            .await
            .map_err(|e| e.to_string())
    }

    /// Have as many voters with ids below `successor`'s stand as the
    /// successor needs beside its own vote and this node's; whether enough
    /// did (each answers once it stands in a later term than `term`).
    async fn stand_first(
        &self,
        successor: NodeId,
        term: u64,
        voters: usize,
        deadline: Instant,
    ) -> bool {
        let needed = (voters / 2 + 1).saturating_sub(2);
        let lower: Vec<NodeId> = {
            let m = self.raft.metrics().borrow().clone();
            let mut v: Vec<NodeId> = m
                .membership_config
                .membership()
                .voter_ids()
                .filter(|&v| v != self.id && v < successor)
                .collect();
            v.sort_unstable_by(|a, b| b.cmp(a));
            v
        };
        let mut stood = 0;
        for node in lower {
            if stood == needed {
                break;
            }
            // Its log need not be whole: it stands only to lay its lease
            // down, and grants the successor, whose log is.
            let ask = Campaign {
                term,
                last_log: 0,
                delay: Duration::ZERO,
            };
            if let Ok((true, _)) = self.ask(node, &ask, deadline).await {
                stood += 1;
            }
        }
        stood >= needed
    }

    /// The leader after `term` and its term, once this node knows one.
    fn successor(
        &self,
        m: &openraft::RaftMetrics<NodeId, crate::types::Peer>,
        term: u64,
    ) -> Option<(NodeId, u64)> {
        let leader = m.current_leader.filter(|&l| l != self.id)?;
        (m.current_term > term).then_some((leader, m.current_term))
    }
}

impl HandOff for Handover {
    fn hand_off(&self) -> Pin<Box<dyn Future<Output = Result<NodeId, String>> + Send + '_>> {
        Box::pin(async move {
            match self.run(REMOVAL_LIMIT, true).await {
                Outcome::HandedOver { to, .. } => Ok(to),
                Outcome::NotLeader => Err("this node does not lead".to_owned()),
                Outcome::Failed(why) => Err(why),
            }
        })
    }
}
