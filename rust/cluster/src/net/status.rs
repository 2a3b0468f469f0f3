//! A node's status over its peer address, for `beanpole cluster status`: a
//! connection that opens with a status request (in place of a peer's hello)
//! gets one status reply and is closed. Nothing in it changes the node, and it
//! says nothing a peer of the cluster could not learn.
//!
//! ```text
//!   9 status ask   magic "BPPEER", version u16
//!  10 status       node u64, role u8, term u64, leader u64 (0: none), applied u64,
//!                  last log u64, cluster id 16 bytes, count u32, per follower (a
//!                  leader's view): node u64, known u8, matched index u64; voters:
//!                  count u32, ids u64; learners: count u32, ids u64 (the
//!                  membership this node knows)
//! ```

use std::time::Duration;

use openraft::{RaftMetrics, ServerState};
use tokio::net::TcpStream;

use thiserror::Error;

use super::wire::{self, finish, start};
use crate::codec::{CodecError, Reader};
use crate::identity::ClusterId;
use crate::types::{NodeId, Peer};

pub const STATUS_ASK: u8 = 9;
pub const STATUS: u8 = 10;

/// Why a node's status could not be had; each is one line.
#[derive(Debug, Error)]
pub enum StatusError {
    #[error("cannot connect: {0}")]
    Connect(std::io::Error),
    #[error("the link broke: {0}")]
    Broken(std::io::Error),
    #[error("not a beanpole node's answer: {0}")]
    Garbled(CodecError),
    #[error("refused: {0}")]
    Refused(String),
    #[error("no answer in time")]
    Timeout,
}

/// What a node says of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub node: NodeId,
    /// `leader`, `follower`, `candidate`, `learner` or `down` (stopping).
    pub role: &'static str,
    pub term: u64,
    pub leader: Option<NodeId>,
    /// The last log index applied to its state machine.
    pub applied: u64,
    /// The last index in its log.
    pub last_log: u64,
    pub cluster: ClusterId,
    /// A leader's view of each member's replicated log: its last index known to
    /// match the leader's (None: not known yet).
    pub matched: Vec<(NodeId, Option<u64>)>,
    /// The membership this node knows.
    pub voters: Vec<NodeId>,
    pub learners: Vec<NodeId>,
}

const ROLES: [&str; 5] = ["leader", "follower", "candidate", "learner", "down"];

fn role_code(state: ServerState) -> u8 {
    match state {
        ServerState::Leader => 0,
        ServerState::Follower => 1,
        ServerState::Candidate => 2,
        ServerState::Learner => 3,
        ServerState::Shutdown => 4,
    }
}

/// The ask frame.
pub fn ask() -> Vec<u8> {
    let mut out = start(STATUS_ASK);
    out.extend_from_slice(wire::MAGIC);
    out.extend_from_slice(&wire::VERSION.to_le_bytes());
    finish(out)
}

/// Whether `body` is a status ask of this version.
pub fn is_ask(body: &[u8]) -> bool {
    let mut r = Reader(body);
    r.take(6).ok() == Some(&wire::MAGIC[..])
        && r.u16().ok() == Some(wire::VERSION)
        && r.end().is_ok()
}

/// The status frame of a node with these metrics and cluster id.
pub fn reply(m: &RaftMetrics<NodeId, Peer>, cluster: ClusterId) -> Vec<u8> {
    let mut out = start(STATUS);
    out.extend_from_slice(&m.id.to_le_bytes());
    out.push(role_code(m.state));
    out.extend_from_slice(&m.current_term.to_le_bytes());
    out.extend_from_slice(&m.current_leader.unwrap_or(0).to_le_bytes());
    out.extend_from_slice(&m.last_applied.map_or(0, |l| l.index).to_le_bytes());
    out.extend_from_slice(&m.last_log_index.unwrap_or(0).to_le_bytes());
    out.extend_from_slice(&cluster.0);
    let matched: Vec<(NodeId, Option<u64>)> = m
        .replication
        .as_ref()
        .map(|r| r.iter().map(|(n, l)| (*n, l.map(|l| l.index))).collect())
        .unwrap_or_default();
    out.extend_from_slice(&(matched.len() as u32).to_le_bytes());
    for (node, index) in matched {
        out.extend_from_slice(&node.to_le_bytes());
        out.push(u8::from(index.is_some()));
        out.extend_from_slice(&index.unwrap_or(0).to_le_bytes());
    }
    let membership = m.membership_config.membership();
    for ids in [
        membership.voter_ids().collect::<Vec<_>>(),
        membership.learner_ids().collect::<Vec<_>>(),
    ] {
        out.extend_from_slice(&(ids.len() as u32).to_le_bytes());
        for id in ids {
            out.extend_from_slice(&id.to_le_bytes());
        }
    }
    finish(out)
}

/// Read a status frame's body.
pub fn read_reply(body: &[u8]) -> Result<Status, CodecError> {
    let mut r = Reader(body);
    let node = r.u64()?;
    let role = *ROLES.get(r.u8()? as usize).ok_or(CodecError::Truncated)?;
    let term = r.u64()?;
    let leader = Some(r.u64()?).filter(|&l| l != 0);
    let applied = r.u64()?;
    let last_log = r.u64()?;
    let cluster = ClusterId(r.take(16)?.try_into().map_err(|_| CodecError::Truncated)?);
    let count = r.u32()?;
    let mut matched = Vec::new();
    for _ in 0..count {
        let node = r.u64()?;
        let known = r.u8()? != 0;
        let index = r.u64()?;
        matched.push((node, known.then_some(index)));
    }
    let mut ids = || -> Result<Vec<NodeId>, CodecError> {
        let count = r.u32()?;
        (0..count).map(|_| r.u64()).collect()
    };
    let voters = ids()?;
    let learners = ids()?;
    r.end()?;
    Ok(Status {
        node,
        role,
        term,
        leader,
        applied,
        last_log,
        cluster,
        matched,
        voters,
        learners,
    })
}

/// Ask the node at `addr` (its peer address) for its status, within `timeout`.
pub async fn query(addr: &str, timeout: Duration) -> Result<Status, StatusError> {
    let body = ask_once(addr, &ask(), STATUS, timeout).await?;
    read_reply(&body).map_err(StatusError::Garbled)
}

/// Send `frame` as the first and only request of a new connection to `addr`
/// and read the one answer, which must be of kind `answer` (a refusal is
/// [`StatusError::Refused`]); its body. All within `timeout`.
pub async fn ask_once(
    addr: &str,
    frame: &[u8],
    answer: u8,
    timeout: Duration,
) -> Result<Vec<u8>, StatusError> {
    let ask = async {
        let mut stream = TcpStream::connect(addr)
            .await
            .map_err(StatusError::Connect)?;
        wire::write_frame(&mut stream, frame)
            .await
            .map_err(StatusError::Broken)?;
        let (kind, body) = wire::read_frame(&mut stream, 1 << 20)
            .await
            .map_err(StatusError::Broken)?;
        match kind {
            k if k == answer => Ok(body),
            wire::REFUSED => Err(StatusError::Refused(
                wire::read_refused(&body).unwrap_or_default(),
            )),
            _ => Err(StatusError::Garbled(CodecError::Truncated)),
        }
    };
    tokio::time::timeout(timeout, ask)
        .await
        .map_err(|_| StatusError::Timeout)?
}

/// The name of a Raft role, as status shows it.
pub fn role_name(state: ServerState) -> &'static str {
    ROLES[role_code(state) as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_reads_back_as_written() {
        let mut m = RaftMetrics::<NodeId, Peer>::new_initial(2);
        m.state = ServerState::Leader;
        m.current_term = 7;
        m.current_leader = Some(2);
        m.last_log_index = Some(40);
        let mut replication = std::collections::BTreeMap::new();
        replication.insert(1, None);
        replication.insert(
            3,
            Some(openraft::LogId::new(
                openraft::CommittedLeaderId::new(7, 2),
                38,
            )),
        );
        m.replication = Some(replication);
        let frame = reply(&m, ClusterId([9; 16]));
        let status = read_reply(&frame[5..]).expect("reads back");
        assert_eq!(
            status,
            Status {
                node: 2,
                role: "leader",
                term: 7,
                leader: Some(2),
                applied: 0,
                last_log: 40,
                cluster: ClusterId([9; 16]),
                matched: vec![(1, None), (3, Some(38))],
                voters: vec![],
                learners: vec![],
            }
        );
        assert!(is_ask(&ask()[5..]));
        assert!(!is_ask(b"BPPEER\x02\x00"));
        assert!(read_reply(&frame[5..frame.len() - 1]).is_err());
    }
}
