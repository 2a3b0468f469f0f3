//! A leader's request to the follower it hands its lead to: "stand for
//! election now" (or after a delay), sent over an established peer connection
//! (after the hello, so the cluster and both nodes are checked as for Raft's own
//! requests), answered once and the connection kept.
//!
//! ```text
//!  13 campaign    term u64 (the leader's), last log index u64 (the leader's,
//!                 which the follower must hold), delay u64 (milliseconds before
//!                 it stands; 0: at once)
//!  14 campaigned  ok u8, message str (what it does, or why it will not)
//! ```
//!
//! A follower takes the request only from the leader it follows, in that
//! leader's term, and only if it is a voter whose log holds the leader's last
//! index; anything else is refused with the reason, and it does nothing. The
//! leader side is `node/handover.rs`.

use std::time::Duration;

use super::client::PeerLink;
use super::wire::{finish, start};
use super::NetError;
use crate::codec::{self, CodecError, Reader};
use crate::types::{NodeId, Raft};

pub const CAMPAIGN: u8 = 13;
pub const CAMPAIGNED: u8 = 14;

/// How long a node asked to stand at once waits for its new term to show
/// before it answers.
const STANDING: Duration = Duration::from_millis(200);

/// What a leader asks of its successor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Campaign {
    /// The term the leader leads.
    pub term: u64,
    /// The leader's last log index: the successor must hold it.
    pub last_log: u64,
    /// How long the successor waits before it stands for election.
    pub delay: Duration,
}

pub fn campaign(c: &Campaign) -> Vec<u8> {
    let mut out = start(CAMPAIGN);
    out.extend_from_slice(&c.term.to_le_bytes());
    out.extend_from_slice(&c.last_log.to_le_bytes());
    let delay = u64::try_from(c.delay.as_millis()).unwrap_or(u64::MAX);
    out.extend_from_slice(&delay.to_le_bytes());
    finish(out)
}

pub fn read_campaign(body: &[u8]) -> Result<Campaign, CodecError> {
    let mut r = Reader(body);
    let term = r.u64()?;
    let last_log = r.u64()?;
    let delay = Duration::from_millis(r.u64()?);
    r.end()?;
    Ok(Campaign {
        term,
        last_log,
        delay,
    })
}

pub fn campaigned(ok: bool, message: &str) -> Vec<u8> {
    let mut out = start(CAMPAIGNED);
    out.push(u8::from(ok));
    codec::put_str(&mut out, message);
    finish(out)
}

pub fn read_campaigned(body: &[u8]) -> Result<(bool, String), CodecError> {
    let mut r = Reader(body);
    let ok = r.u8()? != 0;
    let message = r.string()?;
    r.end()?;
    Ok((ok, message))
}

/// Why this node (`raft`) will not stand for election as node `from` asks, if
/// it will not.
fn refusal(raft: &Raft, from: NodeId, ask: &Campaign) -> Option<String> {
    let m = raft.metrics().borrow().clone();
    let me = m.id;
    if !m
        .membership_config
        .membership()
        .voter_ids()
        .any(|v| v == me)
    {
        return Some(format!("node {me} is not a voter"));
    }
    if m.state != openraft::ServerState::Follower {
        let role = super::status::role_name(m.state);
        return Some(format!("node {me} is a {role}, not a follower"));
    }
    if m.current_leader != Some(from) || m.current_term != ask.term {
        return Some(format!(
            "node {me} follows {} in term {}, not node {from} in term {}",
            m.current_leader
                .map_or_else(|| "no leader".to_owned(), |l| format!("node {l}")),
            m.current_term,
            ask.term
        ));
    }
    let have = m.last_log_index.unwrap_or(0);
    if have < ask.last_log {
        return Some(format!(
            "node {me} holds the log to index {have}, not to {}",
            ask.last_log
        ));
    }
    None
}

/// Act on a campaign request from node `from` (the hello's): the answer frame.
/// The election is triggered before the answer when there is no delay, and by
/// a task of its own after the delay otherwise.
pub async fn act(raft: &Raft, from: NodeId, ask: Campaign) -> Vec<u8> {
    if let Some(why) = refusal(raft, from, &ask) {
        return campaigned(false, &why);
    }
    let me = raft.metrics().borrow().id;
    if ask.delay.is_zero() {
        if let Err(e) = raft.trigger().elect().await {
            return campaigned(false, &format!("node {me} cannot stand: {e}"));
        }
        // Answered once it stands (openraft takes the request on its own
        // thread): a leader that has others stand before its successor asks
        // the successor only when their votes for it are laid down.
        let mut metrics = raft.metrics();
        let standing = metrics.wait_for(|m| m.current_term > ask.term);
        return match tokio::time::timeout(STANDING, standing).await {
            Ok(Ok(_)) => campaigned(true, &format!("node {me} stands for election")),
            _ => campaigned(false, &format!("node {me} did not stand in time")),
        };
    }
    let raft = raft.clone();
    tokio::spawn(async move {
        tokio::time::sleep(ask.delay).await;
        // Still the same leader's follower (it may have gone on, or another
        // node may have been elected meanwhile): only then stand.
        if refusal(&raft, from, &ask).is_none() {
            let _ = raft.trigger().elect().await;
        }
    });
    campaigned(
        true,
        &format!(
            "node {me} stands for election in {} ms",
            ask.delay.as_millis()
        ),
    )
}

/// Ask the node at the other end of `link` to campaign; its answer (ok,
/// message), within `ttl`.
pub async fn ask(link: &PeerLink, c: &Campaign, ttl: Duration) -> Result<(bool, String), NetError> {
    let (kind, body) = link.call(&campaign(c), ttl).await?;
    if kind != CAMPAIGNED {
        return Err(link.bad(format!("frame kind {kind} for a campaign's answer")));
    }
    read_campaigned(&body).map_err(|e| link.bad(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_campaign_and_its_answer_read_back() {
        let c = Campaign {
            term: 7,
            last_log: 420,
            delay: Duration::from_millis(550),
        };
        let frame = campaign(&c);
        assert_eq!(frame[4], CAMPAIGN);
        assert_eq!(read_campaign(&frame[5..]), Ok(c));
        assert!(read_campaign(&frame[5..frame.len() - 1]).is_err());
        let frame = campaigned(false, "node 3 is not a voter");
        assert_eq!(
            read_campaigned(&frame[5..]),
            Ok((false, "node 3 is not a voter".to_owned()))
        );
        assert!(read_campaigned(&frame[5..frame.len() - 2]).is_err());
    }
}
