//! The answering side of the transport: accepts peer connections on a node's
//! `peer` address, checks each one's handshake, and hands its requests to the
//! local Raft, one request and reply at a time per connection.
//!
//! A connection that says something that is not a beanpole peer's frame, names
//! another node or another cluster, or stops halfway through a frame for longer
//! than the frame timeout, is closed; nothing a peer sends can make the server
//! panic or hold more than one frame's bytes. Imports the wire format, the
//! identity and the cluster's types.
//!
//! A node adds [`Hooks`]: how it hands its lead over before a membership
//! change removes it, and a [`VoteFence`] told before a vote request that
//! could unseat it reaches Raft (and after, whether it was granted), so that a
//! leader stops answering reads from its lease before it can grant one, and
//! a [`CatchUp`] gate that keeps a node's vote back while it rejoins with an
//! empty directory (`node/rejoin.rs`), told of each append it takes, and a
//! [`PeerWatch`] told when each peer's appends arrive and when its
//! connections end (`node/vacancy.rs`: a leader's process gone).

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{AppendEntriesResponse, VoteResponse};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::{JoinHandle, JoinSet};

use super::members::HandOff;

/// What a node adds to its peer server.
#[derive(Clone, Default)]
pub struct Hooks {
    /// How it hands its lead over when a membership change removes it.
    pub hand_off: Option<Arc<dyn HandOff>>,
    /// Told around each vote request for a term above this node's.
    pub fence: Option<Arc<dyn VoteFence>>,
    /// Whether this node may vote yet, and what each append brought it.
    pub catch_up: Option<Arc<dyn CatchUp>>,
    /// Told of each peer's appends and of the end of its connections.
    pub watch: Option<Arc<dyn PeerWatch>>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("hand_off", &self.hand_off.is_some())
            .field("fence", &self.fence.is_some())
            .field("catch_up", &self.catch_up.is_some())
            .field("watch", &self.watch.is_some())
            .finish()
    }
}

/// Around a vote request that could make this node grant its vote (a higher
/// term's): `before` it reaches Raft, and `after` with whether the vote was
/// granted (true too when the request was dropped halfway, not knowing).
pub trait VoteFence: Send + Sync {
    fn before(&self);
    fn after(&self, granted: bool);
}

/// Keeps a rejoining node's vote back: a vote request whose candidate's log
/// ends at `candidate_last` reaches Raft only if `may_vote` (which may learn
/// from it that the node can vote from now on), and is refused otherwise;
/// `appended` is told, after each append Raft took, the leader's term, the log
/// id this node now holds in common with it, and its commit.
pub trait CatchUp: Send + Sync {
    fn may_vote(&self, candidate_last: Option<&LogId>) -> bool;
    fn appended(&self, term: u64, matched: Option<&LogId>, commit: Option<&LogId>);
}

/// Told, for each peer connection past its handshake, of every append Raft
/// took from the node at its other end (`heard`, after Raft has it), and of
/// the connection's end, however it ended (`ended`).
pub trait PeerWatch: Send + Sync {
    fn heard(&self, from: NodeId);
    fn ended(&self, from: NodeId);
}

/// Calls [`PeerWatch::ended`] once, when dropped.
struct Watched<'a> {
    watch: &'a dyn PeerWatch,
    from: NodeId,
}

impl Drop for Watched<'_> {
    fn drop(&mut self) {
        self.watch.ended(self.from);
    }
}

/// Calls `after` once, when dropped: with the answer if there was one.
struct Fenced<'a> {
    fence: &'a dyn VoteFence,
    granted: bool,
}

impl Drop for Fenced<'_> {
    fn drop(&mut self) {
        self.fence.after(self.granted);
    }
}
use super::wire::{self, Hello};
use super::NetConfig;
use super::{handover, members, mux, status};
use crate::identity::Identity;
use crate::types::{LogId, NodeId, Raft};

/// A connection's read buffer after the handshake: an append of a few hundred
/// puts arrives in one read.
const READ_BUFFER: usize = 64 << 10;

/// A running peer server. Stopping it (or dropping it) closes the listener and
/// every connection it accepted.
#[derive(Debug)]
pub struct PeerServer {
    addr: SocketAddr,
    accept: JoinHandle<()>,
}

impl PeerServer {
    /// Serve peers on `listener` for `raft`, the node `identity` names.
    pub fn start(
        listener: TcpListener,
        raft: Raft,
        identity: Arc<Identity>,
        config: NetConfig,
    ) -> std::io::Result<PeerServer> {
        Self::start_with(listener, raft, identity, config, Hooks::default())
    }

    /// [`PeerServer::start`], with the node's [`Hooks`].
    pub fn start_with(
        listener: TcpListener,
        raft: Raft,
        identity: Arc<Identity>,
        config: NetConfig,
        hooks: Hooks,
    ) -> std::io::Result<PeerServer> {
        let addr = listener.local_addr()?;
        let accept = tokio::spawn(accept_loop(listener, raft, identity, config, hooks));
        Ok(PeerServer { addr, accept })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Close the listener and all accepted connections, and wait until they are.
    pub async fn stop(mut self) {
        self.accept.abort();
        // The accept task owns the connections' JoinSet: ending it aborts them.
        let _ = (&mut self.accept).await;
    }
}

impl Drop for PeerServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    raft: Raft,
    identity: Arc<Identity>,
    config: NetConfig,
    hooks: Hooks,
) {
    // A semaphore, not a counter: a connection's permit goes back when its
    // task ends, however it ends.
    let permits = Arc::new(Semaphore::new(config.max_connections));
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
                    continue; // over the limit: dropped, so closed
                };
                let (raft, identity, config) = (raft.clone(), Arc::clone(&identity), config.clone());
                let hooks = hooks.clone();
                conns.spawn(async move {
                    let _permit = permit;
                    let _ = serve(stream, raft, identity, config, hooks).await;
                });
            }
            // Reap finished connections so the set does not grow.
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

/// Read one frame: waiting for its start as long as it takes (links idle
/// between calls), then its rest within the frame timeout. The connection's
/// first frame, after which it may become something else (a session's link).
async fn first_frame(stream: &mut TcpStream, config: &NetConfig) -> std::io::Result<wire::Frame> {
    let mut first = [0u8; 1];
    if stream.read(&mut first).await? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    let rest = async {
        let mut chained = (&first[..]).chain(&mut *stream);
        wire::read_frame(&mut chained, config.max_frame).await
    };
    tokio::time::timeout(config.frame_timeout, rest)
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))?
}

/// The same for the requests after the handshake, read through a buffer: a
/// frame usually takes one system call rather than one per field.
async fn next_frame(
    stream: &mut BufReader<TcpStream>,
    config: &NetConfig,
) -> std::io::Result<wire::Frame> {
    if stream.fill_buf().await?.is_empty() {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    tokio::time::timeout(
        config.frame_timeout,
        wire::read_frame(stream, config.max_frame),
    )
    .await
    .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))?
}

async fn serve(
    mut stream: TcpStream,
    raft: Raft,
    identity: Arc<Identity>,
    config: NetConfig,
    hooks: Hooks,
) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let (kind, body) = first_frame(&mut stream, &config).await?;
    if kind == members::CHANGE {
        let answer = match members::read_change(&body) {
            Some(change) => {
                let token = config.admin_token.as_deref();
                let durable = config.durable.as_ref();
                members::act(&raft, token, change, hooks.hand_off.as_deref(), durable).await
            }
            None => wire::refused("not a membership change of this version"),
        };
        return wire::write_frame(&mut stream, &answer).await;
    }
    if kind == mux::LINK {
        return mux::serve(stream, &body, identity, &config).await;
    }
    if kind == status::STATUS_ASK && status::is_ask(&body) {
        let metrics = raft.metrics().borrow().clone();
        return wire::write_frame(&mut stream, &status::reply(&metrics, identity.cluster())).await;
    }
    let hello = match (kind, wire::read_hello(&body)) {
        (wire::HELLO, Some(hello)) => hello,
        _ => {
            let refusal = wire::refused("not a beanpole peer handshake of this version");
            return wire::write_frame(&mut stream, &refusal).await;
        }
    };
    if let Some(reason) = refuse(&hello, &identity) {
        return wire::write_frame(&mut stream, &wire::refused(&reason)).await;
    }
    let welcome = wire::welcome(identity.node(), identity.cluster());
    wire::write_frame(&mut stream, &welcome).await?;
    // From here on its end is told, whatever ends it.
    let _watched = hooks.watch.as_deref().map(|watch| Watched {
        watch,
        from: hello.from,
    });
    // Only requests and their replies from here on, one at a time, so the
    // buffer never holds bytes of anything else.
    let mut stream = BufReader::with_capacity(READ_BUFFER, stream);
    loop {
        let (kind, body) = next_frame(&mut stream, &config).await?;
        // Shared: an append's entries keep slices of it, not copies.
        let body = Bytes::from(body);
        let reply = match answer(&raft, hello.from, kind, &body, &hooks).await {
            Some(reply) => reply,
            // Not a request: the connection is of no use any more.
            None => return Ok(()),
        };
        wire::write_frame(&mut stream, &reply).await?;
    }
}

/// Why a peer's handshake is refused, if it is; a peer that knows the cluster
/// teaches it to a node that does not yet.
fn refuse(hello: &Hello, identity: &Identity) -> Option<String> {
    let me: NodeId = identity.node();
    if hello.to != me {
        return Some(format!("this is node {me}, not node {}", hello.to));
    }
    if hello.from == me {
        return Some(format!("node {me} called itself"));
    }
    // Learning the cluster's id writes the marker: once per node.
    identity.adopt(hello.cluster).err().map(|e| e.to_string())
}

/// The reply frame to a request of node `from`, or `None` for a frame that
/// is not one.
async fn answer(
    raft: &Raft,
    from: NodeId,
    kind: u8,
    body: &Bytes,
    hooks: &Hooks,
) -> Option<Vec<u8>> {
    Some(match kind {
        handover::CAMPAIGN => handover::act(raft, from, handover::read_campaign(body).ok()?).await,
        wire::APPEND => {
            let request = wire::read_append(body).ok()?;
            let term = request.vote.leader_id().term;
            let commit = request.leader_commit;
            let sent_to = request
                .entries
                .last()
                .map(|e| e.log_id)
                .or(request.prev_log_id);
            match raft.append_entries(request).await {
                Ok(resp) => {
                    if let Some(gate) = hooks.catch_up.as_deref() {
                        let matched = match &resp {
                            AppendEntriesResponse::Success => sent_to,
                            AppendEntriesResponse::PartialSuccess(upto) => *upto,
                            _ => None,
                        };
                        gate.appended(term, matched.as_ref(), commit.as_ref());
                    }
                    // A leader this node follows (not one its term has passed).
                    let followed = !matches!(resp, AppendEntriesResponse::HigherVote(_));
                    if let Some(watch) = hooks.watch.as_deref().filter(|_| followed) {
                        watch.heard(from);
                    }
                    wire::append_reply(&resp)
                }
                Err(RaftError::Fatal(fatal)) => wire::failed(&fatal),
                Err(RaftError::APIError(never)) => match never {},
            }
        }
        wire::VOTE => {
            let request = wire::read_vote_request(body).ok()?;
            if let Some(gate) = hooks.catch_up.as_deref() {
                if !gate.may_vote(request.last_log_id.as_ref()) {
                    return Some(wire::vote_reply(&refused_vote(raft)));
                }
            }
            let higher = request.vote.leader_id().term > raft.metrics().borrow().current_term;
            let mut fenced = hooks.fence.as_deref().filter(|_| higher).map(|fence| {
                fence.before();
                // Until the answer is known, as if granted.
                Fenced {
                    fence,
                    granted: true,
                }
            });
            let answer = raft.vote(request).await;
            if let Some(fenced) = fenced.as_mut() {
                fenced.granted = matches!(&answer, Ok(r) if r.vote_granted);
            }
            drop(fenced);
            match answer {
                Ok(resp) => wire::vote_reply(&resp),
                Err(RaftError::Fatal(fatal)) => wire::failed(&fatal),
                Err(RaftError::APIError(never)) => match never {},
            }
        }
        wire::SNAPSHOT => match raft.install_snapshot(wire::read_snapshot(body).ok()?).await {
            Ok(resp) => wire::snapshot_reply(&resp),
            Err(RaftError::Fatal(fatal)) => wire::failed(&fatal),
            Err(RaftError::APIError(InstallSnapshotError::SnapshotMismatch(m))) => {
                wire::mismatch(&m)
            }
        },
        _ => return None,
    })
}

/// The answer of a node that keeps its vote back: its own vote, not granted.
/// A candidate takes it as a vote lost (and learns of a higher vote, as from
/// any refusal). Its log is not said: a rejoining node's is no reason for a
/// candidate to hold its next campaign back.
fn refused_vote(raft: &Raft) -> VoteResponse<NodeId> {
    VoteResponse {
        vote: raft.metrics().borrow().vote,
        vote_granted: false,
        last_log_id: None,
    }
}
