//! The calling side of the transport: openraft's network factory ([`Network`])
//! and the link it makes per call site ([`PeerLink`]), over pooled TCP
//! connections to each peer's `peer` address.
//!
//! openraft makes a link for its replication stream to a peer and a short-lived
//! one for each election's votes and each leadership check. All of a peer's
//! links share one pool of connections: a call takes an idle connection (or
//! dials and shakes hands), sends its request, reads the reply and puts the
//! connection back. So in steady state one connection per peer carries the
//! traffic, and a vote made while a large append is on the wire gets a
//! connection of its own rather than waiting behind it. A call that fails or
//! runs out of time drops its connection (its state is unknown); the next call
//! dials again. Imports the wire format, the identity and the cluster's types.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError, RemoteError, Timeout,
    Unreachable,
};
use openraft::network::{Backoff, RPCOption, RPCTypes, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use tokio::io::BufReader;
use tokio::net::TcpStream;
use tokio::time::{timeout_at, Instant};

use super::wire::{self, Failure, Frame, Hello};
use super::{NetConfig, NetError, Refusal};
use crate::identity::Identity;
use crate::types::{NodeId, Peer, TypeConfig};

/// openraft's network factory for one node: where its links' pools live.
#[derive(Debug, Clone)]
pub struct Network {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    identity: Arc<Identity>,
    config: NetConfig,
    /// Each peer's pool. A std mutex: held to find or add a pool, never across
    /// an await.
    pools: Mutex<HashMap<NodeId, Arc<Pool>>>,
}

/// A connection to a peer, read through a buffer: a reply usually takes one
/// system call rather than one per field. A call reads its whole reply, and
/// nothing else comes unasked, so a connection back in the pool has nothing
/// buffered.
type Conn = BufReader<TcpStream>;

/// A connection's read buffer.
const READ_BUFFER: usize = 16 << 10;

/// The idle connections to one peer at one address.
#[derive(Debug)]
struct Pool {
    target: NodeId,
    addr: String,
    /// A std mutex: held to push or pop a connection, never across an await.
    idle: Mutex<Vec<Conn>>,
}

impl Pool {
    fn take(&self) -> Option<Conn> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop()
    }

    fn give(&self, conn: Conn, most: usize) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < most {
            idle.push(conn);
        }
    }
}

impl Network {
    /// The network of the node `identity` names.
    pub fn new(identity: Arc<Identity>, config: NetConfig) -> Network {
        Network {
            shared: Arc::new(Shared {
                identity,
                config,
                pools: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// A link to node `target` at its `peer` address (what openraft's
    /// `new_client` gives; also usable directly).
    pub fn link(&self, target: NodeId, peer: &Peer) -> PeerLink {
        let mut pools = self.shared.pools.lock().unwrap_or_else(|e| e.into_inner());
        let pool = pools
            .entry(target)
            .and_modify(|pool| {
                // The node moved: its old connections go with the old pool.
                if pool.addr != peer.peer {
                    *pool = Arc::new(Pool {
                        target,
                        addr: peer.peer.clone(),
                        idle: Mutex::new(Vec::new()),
                    });
                }
            })
            .or_insert_with(|| {
                Arc::new(Pool {
                    target,
                    addr: peer.peer.clone(),
                    idle: Mutex::new(Vec::new()),
                })
            });
        PeerLink {
            shared: Arc::clone(&self.shared),
            pool: Arc::clone(pool),
        }
    }
}

/// What a refused vote request `asked` of node `voter` says about the voter:
/// None for a vote granted, or refused for another reason (a live leader's
/// lease, a higher term, a rejoining node that keeps its vote back).
fn refusal(
    asked: &VoteRequest<NodeId>,
    answer: &VoteResponse<NodeId>,
    voter: NodeId,
) -> Option<Refusal> {
    if answer.vote_granted {
        return None;
    }
    let ours = asked.last_log_id.as_ref();
    let theirs = answer.last_log_id.as_ref();
    if theirs > ours {
        return Some(Refusal::LongerLog);
    }
    let rival = answer.vote.leader_id();
    let standing = rival.term == asked.vote.leader_id().term
        && rival.voted_for() == Some(voter)
        && !answer.vote.is_committed();
    // A rejoining node's refusal says no log (`server.rs`): it is not behind.
    (standing && theirs.is_some() && theirs < ours).then_some(Refusal::RivalBehind)
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = PeerLink;

    async fn new_client(&mut self, target: NodeId, node: &Peer) -> PeerLink {
        self.link(target, node)
    }
}

/// Calls from this node to one peer.
#[derive(Debug)]
pub struct PeerLink {
    shared: Arc<Shared>,
    pool: Arc<Pool>,
}

impl PeerLink {
    /// Send `frame` and read its reply within `ttl`: on a kept connection
    /// first, and once more on a new one if the kept one had gone stale (Raft's
    /// requests may be delivered twice).
    pub async fn call(&self, frame: &[u8], ttl: Duration) -> Result<Frame, NetError> {
        let max = self.shared.config.max_frame;
        if frame.len() - 4 > max {
            return Err(NetError::TooLarge {
                size: frame.len() - 4,
                max,
            });
        }
        let deadline = Instant::now() + ttl;
        let exchange = async {
            if let Some(mut conn) = self.pool.take() {
                if let Ok(reply) = round_trip(&mut conn, frame, max).await {
                    self.pool.give(conn, self.shared.config.idle_per_peer);
                    return Ok(reply);
                }
            }
            let mut conn = self.dial(deadline).await?;
            let reply = round_trip(&mut conn, frame, max)
                .await
                .map_err(|source| self.io_err(source))?;
            self.pool.give(conn, self.shared.config.idle_per_peer);
            Ok(reply)
        };
        match timeout_at(deadline, exchange).await {
            Ok(result) => result,
            Err(_) => Err(NetError::Timeout {
                target: self.pool.target,
                addr: self.pool.addr.clone(),
                after: ttl,
            }),
        }
    }

    /// Connect and shake hands, within the connect timeout and `deadline`.
    async fn dial(&self, deadline: Instant) -> Result<Conn, NetError> {
        let (target, addr) = (self.pool.target, &self.pool.addr);
        let limit = deadline.min(Instant::now() + self.shared.config.connect_timeout);
        let connect_err = |source| NetError::Connect {
            target,
            addr: addr.clone(),
            source,
        };
        let identity = &self.shared.identity;
        let handshake = async {
            let conn = TcpStream::connect(addr.as_str()).await?;
            conn.set_nodelay(true)?;
            let mut conn = BufReader::with_capacity(READ_BUFFER, conn);
            let hello = wire::hello(&Hello {
                from: identity.node(),
                to: target,
                cluster: identity.cluster(),
            });
            wire::write_frame(&mut conn, &hello).await?;
            let answer = wire::read_frame(&mut conn, self.shared.config.max_frame).await?;
            Ok::<_, std::io::Error>((conn, answer))
        };
        let (conn, (kind, body)) = match timeout_at(limit, handshake).await {
            Ok(Ok(done)) => done,
            Ok(Err(source)) => return Err(connect_err(source)),
            Err(_) => return Err(connect_err(std::io::ErrorKind::TimedOut.into())),
        };
        match kind {
            wire::WELCOME => {
                let (found, theirs) = wire::read_welcome(&body).map_err(|e| self.bad(e))?;
                if found != target {
                    return Err(NetError::WrongNode {
                        target,
                        addr: addr.clone(),
                        found,
                    });
                }
                let ours = identity.cluster();
                if !theirs.is_unset() && !ours.is_unset() && theirs != ours {
                    return Err(NetError::OtherCluster {
                        target,
                        addr: addr.clone(),
                        theirs,
                        ours,
                    });
                }
                // Learning the cluster's id writes the marker: once per node.
                identity.adopt(theirs)?;
                Ok(conn)
            }
            wire::REFUSED => Err(NetError::Refused {
                target,
                addr: addr.clone(),
                reason: wire::read_refused(&body).map_err(|e| self.bad(e))?,
            }),
            other => Err(self.bad(format!("frame kind {other} for a handshake"))),
        }
    }

    fn io_err(&self, source: std::io::Error) -> NetError {
        NetError::Io {
            target: self.pool.target,
            addr: self.pool.addr.clone(),
            source,
        }
    }

    pub(super) fn bad(&self, reason: impl ToString) -> NetError {
        NetError::Protocol {
            target: self.pool.target,
            addr: self.pool.addr.clone(),
            reason: reason.to_string(),
        }
    }

    /// openraft's kind of error for a failed call.
    fn rpc_err<E: std::error::Error>(
        &self,
        err: NetError,
        action: RPCTypes,
    ) -> RPCError<NodeId, Peer, E> {
        match err {
            NetError::Timeout { after, .. } => RPCError::Timeout(Timeout {
                action,
                id: self.shared.identity.node(),
                target: self.pool.target,
                timeout: after,
            }),
            NetError::Connect { .. }
            | NetError::Refused { .. }
            | NetError::WrongNode { .. }
            | NetError::OtherCluster { .. }
            | NetError::Identity(_) => RPCError::Unreachable(Unreachable::new(&err)),
            NetError::Io { .. } | NetError::Protocol { .. } | NetError::TooLarge { .. } => {
                RPCError::Network(NetworkError::new(&err))
            }
        }
    }

    /// A reply frame's body, or the remote's fatal error. The error is
    /// openraft's own type, which its trait returns: its size is not ours.
    #[allow(clippy::result_large_err)]
    fn reply<E: std::error::Error>(
        &self,
        (kind, body): Frame,
        action: RPCTypes,
    ) -> Result<Vec<u8>, RPCError<NodeId, Peer, RaftError<NodeId, E>>> {
        match kind {
            wire::REPLY => Ok(body),
            wire::FAILED => match wire::read_failed(&body) {
                Ok(Failure::Fatal(fatal)) => Err(RPCError::RemoteError(RemoteError::new(
                    self.pool.target,
                    RaftError::Fatal(fatal),
                ))),
                Ok(Failure::Mismatch(_)) => {
                    Err(self.rpc_err(self.bad("a snapshot mismatch for another call"), action))
                }
                Err(e) => Err(self.rpc_err(self.bad(e), action)),
            },
            other => Err(self.rpc_err(self.bad(format!("frame kind {other} as a reply")), action)),
        }
    }
}

async fn round_trip(conn: &mut Conn, frame: &[u8], max: usize) -> std::io::Result<Frame> {
    wire::write_frame(conn, frame).await?;
    wire::read_frame(conn, max).await
}

impl RaftNetwork<TypeConfig> for PeerLink {
    async fn append_entries(
        &mut self,
        mut rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, Peer, RaftError<NodeId>>> {
        let action = RPCTypes::AppendEntries;
        // openraft may count an entry committed before this leader's own copy
        // is on disk (logstore/mod.rs): a follower applies what it is told is
        // committed, so it is told no more than this node has on disk.
        if let Some(durable) = &self.shared.config.durable {
            let on_disk = durable.borrow().last;
            if rpc.leader_commit.map(|c| c.index) > on_disk.map(|d| d.index) {
                rpc.leader_commit = on_disk;
            }
        }
        let frame = wire::append(&rpc);
        let reply = match self.call(&frame, option.hard_ttl()).await {
            // Fewer entries fit: openraft sends the first part and the rest after.
            Err(NetError::TooLarge { .. }) if rpc.entries.len() > 1 => {
                let half = rpc.entries.len() as u64 / 2;
                return Err(RPCError::PayloadTooLarge(
                    PayloadTooLarge::new_entries_hint(half),
                ));
            }
            Err(e) => return Err(self.rpc_err(e, action)),
            Ok(reply) => reply,
        };
        let body = self.reply(reply, action)?;
        wire::read_append_reply(&body).map_err(|e| self.rpc_err(self.bad(e), action))
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, Peer, RaftError<NodeId, InstallSnapshotError>>,
    > {
        let action = RPCTypes::InstallSnapshot;
        let reply = self
            .call(&wire::snapshot(&rpc), option.hard_ttl())
            .await
            .map_err(|e| self.rpc_err(e, action))?;
        if reply.0 == wire::FAILED {
            if let Ok(Failure::Mismatch(m)) = wire::read_failed(&reply.1) {
                return Err(RPCError::RemoteError(RemoteError::new(
                    self.pool.target,
                    RaftError::APIError(InstallSnapshotError::SnapshotMismatch(m)),
                )));
            }
        }
        let body = self.reply(reply, action)?;
        wire::read_snapshot_reply(&body).map_err(|e| self.rpc_err(self.bad(e), action))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, Peer, RaftError<NodeId>>> {
        let action = RPCTypes::Vote;
        let reply = self
            .call(&wire::vote_request(&rpc), option.hard_ttl())
            .await
            .map_err(|e| self.rpc_err(e, action))?;
        let body = self.reply(reply, action)?;
        let mut answer =
            wire::read_vote_reply(&body).map_err(|e| self.rpc_err(self.bad(e), action))?;
        if let Some(refusals) = &self.shared.config.refusals {
            if let Some(why) = refusal(&rpc, &answer, self.pool.target) {
                if why == Refusal::LongerLog {
                    // openraft would hold this node's campaigns back from now
                    // until it next stands by its own timer, however long
                    // that is: the node decides instead (`node/campaign.rs`).
                    answer.last_log_id = None;
                }
                refusals.refused(why);
            }
        }
        Ok(answer)
    }

    fn backoff(&self) -> Backoff {
        Backoff::new(std::iter::repeat(self.shared.config.backoff))
    }
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, Vote};

    use super::*;
    use crate::types::LogId;

    fn at(term: u64, index: u64) -> Option<LogId> {
        Some(LogId::new(CommittedLeaderId::new(term, 1), index))
    }

    /// Node 2 stands in term 5 with its log at (4, 10); node 3 answers.
    fn answer(vote: Vote<NodeId>, last: Option<LogId>, granted: bool) -> Option<Refusal> {
        let asked = VoteRequest::new(Vote::new(5, 2), at(4, 10));
        refusal(&asked, &VoteResponse::new(vote, last, granted), 3)
    }

    #[test]
    fn a_refusal_is_told_for_what_it_says_of_the_voter() {
        // Granted: nothing to tell.
        assert_eq!(answer(Vote::new(5, 2), at(4, 12), true), None);
        // A longer log, whatever the reason it refused (a leader's lease here).
        assert_eq!(
            answer(Vote::new_committed(4, 1), at(4, 12), false),
            Some(Refusal::LongerLog)
        );
        assert_eq!(
            answer(Vote::new(5, 3), at(4, 11), false),
            Some(Refusal::LongerLog)
        );
        // A rival standing in the same term with a shorter log.
        assert_eq!(
            answer(Vote::new(5, 3), at(4, 9), false),
            Some(Refusal::RivalBehind)
        );
        assert_eq!(
            answer(Vote::new(5, 3), at(3, 40), false),
            Some(Refusal::RivalBehind)
        );
        // Not a rival: it voted for another node, in a later term, or as a
        // leader's follower; or its log is as long; or it says no log (a
        // rejoining node keeping its vote back).
        assert_eq!(answer(Vote::new(5, 1), at(4, 9), false), None);
        assert_eq!(answer(Vote::new(6, 3), at(4, 9), false), None);
        assert_eq!(answer(Vote::new_committed(5, 3), at(4, 9), false), None);
        assert_eq!(answer(Vote::new(5, 3), at(4, 10), false), None);
        assert_eq!(answer(Vote::new(5, 3), None, false), None);
    }
}
