//! Membership changes asked of a node over its peer address, for `beanpole
//! cluster add|promote|remove`: a connection that opens with a change request
//! (in place of a peer's hello) gets one answer and is closed. A node acts on
//! one only if it was started with an admin token (`--admin-token-file`) and
//! the request carries the same token; only the leader can change membership,
//! the others answer with who leads.
//!
//! ```text
//!  11 change   magic "BPPEER", version u16, op u8 (1 add, 2 promote, 3 remove),
//!              node u64, client str, peer str, token str
//!  12 answer   ok u8, message str
//! ```
//!
//! - add: the node becomes a learner (with its addresses from the cluster file)
//!   and the answer comes once it has caught up with the leader's log;
//! - promote: a learner becomes a voter;
//! - remove: a voter or learner leaves (a voter through a joint configuration).
//!   Removing the leader first hands its lead to the most up-to-date voter
//!   ([`HandOff`], `node/handover.rs`), which then takes the same request and
//!   removes it; if that cannot be done, the leader removes itself and the
//!   others elect a leader once the change is committed (slower: about a
//!   second without a leader).

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use openraft::ChangeMembers;

use super::status::{self, StatusError};
use super::wire::{self, finish, start};
use crate::codec::{self, CodecError, Reader};
use crate::logstore::{wait_durable, Durable};
use crate::types::{NodeId, Peer, Raft};

pub const CHANGE: u8 = 11;
pub const ANSWER: u8 = 12;

/// How long the old leader waits for its successor's answer to the removal
/// it passes on.
const PASS_ON: Duration = Duration::from_secs(60);

/// What removing the leader asks of it first: hand its lead to another voter
/// and stop serving clients. The new leader's id, or why not (the node then
/// serves again if it still leads).
pub trait HandOff: Send + Sync {
    fn hand_off(&self) -> Pin<Box<dyn Future<Output = Result<NodeId, String>> + Send + '_>>;
}

/// A membership change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Add,
    Promote,
    Remove,
}

impl Op {
    fn code(self) -> u8 {
        match self {
            Op::Add => 1,
            Op::Promote => 2,
            Op::Remove => 3,
        }
    }

    fn from_code(code: u8) -> Option<Op> {
        match code {
            1 => Some(Op::Add),
            2 => Some(Op::Promote),
            3 => Some(Op::Remove),
            _ => None,
        }
    }
}

/// A change request: what, of which node (with its addresses), and the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub op: Op,
    pub node: NodeId,
    pub addresses: Peer,
    pub token: String,
}

pub fn change(c: &Change) -> Vec<u8> {
    let mut out = start(CHANGE);
    out.extend_from_slice(wire::MAGIC);
    out.extend_from_slice(&wire::VERSION.to_le_bytes());
    out.push(c.op.code());
    out.extend_from_slice(&c.node.to_le_bytes());
    codec::put_str(&mut out, &c.addresses.client);
    codec::put_str(&mut out, &c.addresses.peer);
    codec::put_str(&mut out, &c.token);
    finish(out)
}

/// A change request's fields; `None` if the body is not one of this version.
pub fn read_change(body: &[u8]) -> Option<Change> {
    let mut r = Reader(body);
    if r.take(6).ok()? != wire::MAGIC || r.u16().ok()? != wire::VERSION {
        return None;
    }
    let op = Op::from_code(r.u8().ok()?)?;
    let node = r.u64().ok()?;
    let client = r.string().ok()?;
    let peer = r.string().ok()?;
    let token = r.string().ok()?;
    r.end().ok()?;
    Some(Change {
        op,
        node,
        addresses: Peer { client, peer },
        token,
    })
}

pub fn answer(ok: bool, message: &str) -> Vec<u8> {
    let mut out = start(ANSWER);
    out.push(u8::from(ok));
    codec::put_str(&mut out, message);
    finish(out)
}

pub fn read_answer(body: &[u8]) -> Result<(bool, String), CodecError> {
    let mut r = Reader(body);
    let ok = r.u8()? != 0;
    let message = r.string()?;
    r.end()?;
    Ok((ok, message))
}

/// Whether `given` is the node's token, compared in time independent of where
/// they differ.
fn same_token(given: &str, expected: &str) -> bool {
    let (a, b) = (given.as_bytes(), expected.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// Act on a change request as this node (`raft`, admin token `token`, how it
/// hands its lead over, if it can, and how far its log is on disk): the answer
/// frame.
pub async fn act(
    raft: &Raft,
    token: Option<&str>,
    change: Change,
    hand_off: Option<&dyn HandOff>,
    durable: Option<&Durable>,
) -> Vec<u8> {
    let Some(token) = token else {
        return answer(
            false,
            "this node takes no membership changes: start it with --admin-token-file",
        );
    };
    if !same_token(&change.token, token) {
        return answer(false, "wrong admin token");
    }
    let (leader, voters, learners) = {
        let m = raft.metrics().borrow().clone();
        let membership = m.membership_config.membership().clone();
        let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
        let learners: BTreeSet<NodeId> = membership.learner_ids().collect();
        (m.current_leader.filter(|&l| l == m.id), voters, learners)
    };
    let Some(me) = leader else {
        return answer(false, "this node is not the leader; ask the leader");
    };
    let node = change.node;
    if change.op == Op::Remove && node == me && voters.len() > 1 {
        if let Some(hand_off) = hand_off {
            match hand_off.hand_off().await {
                Ok(next) => return pass_on(raft, next, &change).await,
                Err(why) => crate::say::say!(
                    "beanpole: node {me}: could not hand the lead over before leaving ({why}); \
                     leaving as leader"
                ),
            }
        }
    }
    let result = match change.op {
        Op::Add => {
            if voters.contains(&node) {
                return answer(false, &format!("node {node} is a voter already"));
            }
            raft.add_learner(node, change.addresses, true)
                .await
                .map(|r| {
                    (
                        r.log_id.index,
                        format!("node {node} is a learner and has caught up"),
                    )
                })
        }
        Op::Promote => {
            if !learners.contains(&node) {
                return answer(
                    false,
                    &format!("node {node} is not a learner: add it first"),
                );
            }
            let ids: BTreeSet<NodeId> = [node].into();
            raft.change_membership(ChangeMembers::AddVoterIds(ids), false)
                .await
                .map(|r| (r.log_id.index, format!("node {node} is a voter")))
        }
        Op::Remove => {
            let ids: BTreeSet<NodeId> = [node].into();
            if voters.contains(&node) {
                if voters.len() == 1 {
                    return answer(false, &format!("node {node} is the only voter"));
                }
                raft.change_membership(ChangeMembers::RemoveVoters(ids), false)
                    .await
                    .map(|r| (r.log_id.index, format!("node {node} has left the cluster")))
            } else if learners.contains(&node) {
                raft.change_membership(ChangeMembers::RemoveNodes(ids), false)
                    .await
                    .map(|r| (r.log_id.index, format!("node {node} has left the cluster")))
            } else {
                return answer(false, &format!("node {node} is not a member"));
            }
        }
    };
    match result {
        Ok((index, message)) => {
            // Committed may mean on a follower's disk only, so far (a leader's
            // own appends: logstore/mod.rs): answered once on this one's too.
            if let Some(durable) = durable {
                if !wait_durable(&mut durable.clone(), index).await {
                    return answer(false, "this node's raft log has stopped");
                }
            }
            answer(true, &message)
        }
        Err(e) => answer(false, &e.to_string()),
    }
}

/// After this node handed its lead to `next`, ask `next` to make the change
/// (this node's removal): its answer, said to come through this node.
async fn pass_on(raft: &Raft, next: NodeId, change: &Change) -> Vec<u8> {
    let addr = {
        let m = raft.metrics().borrow().clone();
        let membership = m.membership_config.membership().clone();
        membership.get_node(&next).map(|p| p.peer.clone())
    };
    let Some(addr) = addr else {
        return answer(
            false,
            &format!("node {next} now leads, but this node does not know its address"),
        );
    };
    let node = change.node;
    match request(&addr, change, PASS_ON).await {
        Ok((ok, message)) => answer(
            ok,
            &format!("node {node} handed the lead to node {next}; {message}"),
        ),
        Err(e) => answer(
            false,
            &format!("node {node} handed the lead to node {next}, which did not answer: {e}"),
        ),
    }
}

/// Send `change` to the node whose peer address is `addr`; its answer (ok,
/// message), within `timeout`.
pub async fn request(
    addr: &str,
    change: &Change,
    timeout: Duration,
) -> Result<(bool, String), StatusError> {
    let body = status::ask_once(addr, &self::change(change), ANSWER, timeout).await?;
    read_answer(&body).map_err(StatusError::Garbled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_reads_back_and_tokens_compare_whole() {
        let c = Change {
            op: Op::Promote,
            node: 4,
            addresses: Peer {
                client: "127.0.0.1:1".into(),
                peer: "127.0.0.1:2".into(),
            },
            token: "s3cret".into(),
        };
        let frame = change(&c);
        assert_eq!(read_change(&frame[5..]), Some(c));
        assert_eq!(read_change(&frame[5..frame.len() - 1]), None);
        let frame = answer(true, "done");
        assert_eq!(read_answer(&frame[5..]).ok(), Some((true, "done".into())));
        assert!(same_token("abc", "abc"));
        assert!(!same_token("abd", "abc"));
        assert!(!same_token("ab", "abc"));
        assert!(!same_token("", "abc"));
    }
}
