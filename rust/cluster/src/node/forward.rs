//! The client address while this node does not serve: each client connection
//! is forwarded to the leader as a session (docs/cluster.md, "Sessions"), so a
//! client of any node talks to the leader without knowing it, and keeps its
//! connection and its reservations when the leader changes.
//!
//! Per client connection the follower draws a session key, frames the client's
//! commands and the leader's replies exactly as the server does (`track`),
//! attaches the session to the leader over its link to the leader's peer address
//! (`net::attach`) and passes the bytes both ways. When the link to the
//! leader breaks (the leader died, or lost its majority and gave up on a
//! commit), it attaches the session to whichever node leads next, saying how
//! many commands it has replies for and what the session uses and watches, and
//! sends the unanswered commands again: the new leader answers those the old
//! one applied from their first run. A client that hangs up has its session
//! ended once the leader has answered what it sent.
//!
//! What goes to the leader when is what a server would have applied by then
//! (`track::Outbox`): commands behind a reserve that may wait are held until
//! its reply was written to the client, and after a hang-up behind such a
//! reserve they go one at a time, each on a link of its own that ends as the
//! client's input did; the start of an unfinished put goes at once, since a
//! server gives the job its id when the line arrives.
//!
//! Forwarded connections outlive the accept loop: when this node starts to
//! lead, its own server takes the client address, and its forwarded sessions
//! attach to it like any other leader. The leader's own clients are sessions
//! too (the engine's `server/carry.rs`): when its term's server stops under
//! one, the connection comes here ([`carry`]) with its commands not answered
//! and its input not applied, and goes on as a follower's client does.

use std::net::TcpListener as StdListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use beanpole_engine::server::{CarriedSession, SessionAttach, END_SESSION};
use beanpole_engine::wal::session::REPLIES_KEPT;
use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use super::track::{CommandFramer, FramedCommand, Outbox, ReplyFramer, Session};
use crate::identity::Identity;
use crate::net::mux::{Links, MuxStream};
use crate::net::{attach, wire};
use crate::types::{NodeId, Raft};

/// How long a session may go without a leader to attach to before its client
/// is closed.
const REATTACH: Duration = Duration::from_secs(10);
/// The pause between attempts to attach.
const RETRY: Duration = Duration::from_millis(50);
/// The first pause between attempts to attach (doubled up to [`RETRY`] while
/// they fail): a node just elected serves a few milliseconds later, once its
/// term's server is up, and a client that attached to a leader as it handed
/// over had its link closed at once; a fixed 50 ms kept such a client waiting
/// that long (bench: 54 ms to the first put after a SIGTERM whose hand-over
/// took 4).
const FIRST_RETRY: Duration = Duration::from_millis(2);
/// The longest a connect to the leader and its answer may take.
const CONNECT: Duration = Duration::from_secs(2);
/// Unanswered commands per session at most: fewer than the replies a leader
/// keeps, so every command sent again can be answered from its first run.
const WINDOW_COMMANDS: usize = REPLIES_KEPT - 24;
/// Unanswered bytes per session at most (then the client is read no further
/// until replies come).
const WINDOW_BYTES: usize = 4 << 20;
/// When the node stops, how long a forwarded connection may take to have its
/// session ended.
pub const END_AT_STOP: Duration = Duration::from_millis(500);

/// What every forwarded connection of this node shares.
pub struct Forwarding {
    pub raft: Raft,
    pub identity: Arc<Identity>,
    pub max_job_size: u32,
    /// Set when the node stops: every forwarded connection ends. A watch
    /// channel: a flag that many tasks wait on.
    pub stop: watch::Receiver<bool>,
    /// The forwarded connections still running.
    pub live: Live,
    /// The runtime they run on: a thread of their own, beside Raft's, so
    /// relaying a hundred clients' commands never queues ahead of an append
    /// request on Raft's one thread, nor the other way round.
    pub runtime: tokio::runtime::Handle,
    /// The links to the leaders the sessions go to, one per node, shared by
    /// every forwarded connection (`net::mux`).
    pub links: Links,
}

/// The forwarded connections running, for the node's stop to wait until they
/// have ended their sessions.
#[derive(Debug, Default)]
pub struct Live {
    /// How many run. An atomic: each connection's task changes it, the stop
    /// reads it.
    count: AtomicUsize,
    /// Wakes the stop when one ends. A Notify: a wakeup that carries nothing.
    ended: Notify,
}

/// One running forwarded connection, counted in [`Live`] while it lives.
struct Running<'a>(&'a Live);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::SeqCst);
        self.0.ended.notify_waiters();
    }
}

impl Live {
    fn enter(&self) -> Running<'_> {
        self.count.fetch_add(1, Ordering::SeqCst);
        Running(self)
    }

    /// Wait until no forwarded connection runs.
    pub async fn idle(&self) {
        loop {
            let ended = self.ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if self.count.load(Ordering::SeqCst) == 0 {
                return;
            }
            ended.await;
        }
    }
}

/// Accept client connections on a copy of `listener` and forward each, until
/// aborted (the connections go on).
pub fn spawn(listener: &Arc<StdListener>, ctx: Arc<Forwarding>) -> JoinHandle<()> {
    let copy = listener.try_clone();
    let runtime = ctx.runtime.clone();
    runtime.spawn(async move {
        // Made here: a listener belongs to the runtime it is made on.
        let Ok(listener) = copy.and_then(|l| {
            l.set_nonblocking(true)?;
            TcpListener::from_std(l)
        }) else {
            return;
        };
        loop {
            match listener.accept().await {
                Ok((client, _)) => {
                    tokio::spawn(forward(client, Arc::clone(&ctx)));
                }
                // Out of descriptors or the like: wait, as the engine's accept
                // loop does.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    })
}

/// How a stretch of forwarding ended.
enum End {
    /// The client quit, and the leader has answered everything before it.
    Quit,
    /// The client's input ended (or it left) and the leader has answered
    /// what it sent: the session is to end.
    Hangup,
    /// The client's input ended with commands held back, and the leader has
    /// answered what it was sent: the next one goes on a new link
    /// (`Outbox::next_alone`).
    Next,
    /// The link to the leader broke: attach again.
    Link,
    /// The node stops.
    Stopped,
}

/// What a client connection has done so far.
#[derive(Default)]
struct ClientState {
    /// Its input ended: nothing more to read; the leader's link is half-closed
    /// after the last command, as the client's was.
    eof: bool,
    /// A write to it failed: its replies are dropped.
    gone: bool,
    /// Bytes of the client's unfinished command (see [`unfinished`]) written
    /// to the current link.
    unfinished_sent: u64,
    /// Commands going one at a time: the rest of the input after the last
    /// command has been sent.
    rest_sent: bool,
}

/// Forward one client connection until it ends.
async fn forward(client: TcpStream, ctx: Arc<Forwarding>) {
    let _ = client.set_nodelay(true);
    let Ok(owner) = session_key() else {
        return;
    };
    let framer = CommandFramer::new(ctx.max_job_size);
    let session = Session::new(WINDOW_BYTES);
    let tracked = (framer, session, Outbox::new());
    carry_on(client, owner, tracked, ClientState::default(), ctx).await;
}

/// Go on with a client of this node's own server, which stopped under it (its
/// term ended, or a commit did not come in time), as a forwarded session: the
/// commands it was not answered are sent to the next leader with the rest.
pub fn carry(carried: CarriedSession, ctx: Arc<Forwarding>) {
    tokio::spawn(async move {
        let Ok(client) = TcpStream::from_std(carried.stream) else {
            return;
        };
        let mut framer = CommandFramer::new(ctx.max_job_size);
        let watched = carried.watch.into_iter().map(Bytes::from).collect();
        let mut session = Session::resumed(
            WINDOW_BYTES,
            carried.acked,
            Bytes::from(carried.use_tube),
            watched,
        );
        framer.push(&carried.input);
        // As the client's reads would have: commands behind a reserve that may
        // wait are held until it is answered.
        let mut outbox = Outbox::new();
        while let Some(cmd) = framer.next_command() {
            let Some(cmd) = outbox.offer(cmd) else {
                continue;
            };
            if session.send(cmd).is_err() {
                break;
            }
        }
        if carried.eof {
            outbox.client_ended();
        }
        let state = ClientState {
            eof: carried.eof,
            ..ClientState::default()
        };
        carry_on(client, carried.owner, (framer, session, outbox), state, ctx).await;
    });
}

/// Forward a client connection as session `owner` until it ends, from where
/// its framer, session and outbox (`tracked`) and `state` say it is.
async fn carry_on(
    client: TcpStream,
    owner: u64,
    tracked: (CommandFramer, Session, Outbox),
    mut state: ClientState,
    ctx: Arc<Forwarding>,
) {
    let (mut framer, mut session, mut outbox) = tracked;
    let _running = ctx.live.enter();
    let (mut cr, mut cw) = client.into_split();
    let mut stop = ctx.stop.clone();
    // When a reply last came.
    let mut progress = Instant::now();
    // The pause before attaching again after a link that answered nothing.
    let mut pause = FIRST_RETRY;
    loop {
        let acked_before = session.acked();
        let attached = tokio::select! {
            a = attach_anywhere(&ctx, owner, session.acked(), &session) => Some(a),
            _ = stop.changed() => None,
        };
        let link = match attached {
            Some(Some(link)) => link,
            Some(None) => return,
            None => {
                drop((cr, cw));
                end_at_stop(&ctx, owner, &session).await;
                return;
            }
        };
        let (mut lr, mut lw) = (link.clone(), link);
        state.unfinished_sent = 0;
        if start_link(&mut lw, &framer, &mut session, &mut outbox, &mut state)
            .await
            .is_err()
        {
            continue;
        }
        let end = tokio::select! {
            e = pump(&mut cr, &mut cw, &mut lr, &mut lw, &mut framer, &mut session, &mut outbox, &mut state) => e,
            _ = stop.changed() => End::Stopped,
        };
        match end {
            End::Quit => return,
            End::Stopped => {
                drop((cr, cw, lr, lw));
                end_at_stop(&ctx, owner, &session).await;
                return;
            }
            End::Hangup => {
                drop((lr, lw));
                let _ = attach_anywhere(&ctx, owner, END_SESSION, &session).await;
                return;
            }
            End::Next => {
                progress = Instant::now();
                continue;
            }
            End::Link => {
                // A link that broke with nothing answered on it (a leader
                // that keeps failing, a path that cannot carry the session,
                // or one whose term ended as the session attached): try again
                // after a pause that grows while that goes on, and give up
                // once nothing has been answered for as long as a leader may
                // take to appear.
                if session.acked() > acked_before {
                    progress = Instant::now();
                    pause = FIRST_RETRY;
                } else if progress.elapsed() > REATTACH {
                    return;
                } else {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(RETRY);
                }
                continue;
            }
        }
    }
}

/// What goes first on a new link: what the last leader did not answer, and
/// then what the client sent since, as far as it may go now. When commands go
/// one at a time, that is the next held command (or the input the client left
/// after the last), followed by the end of input.
async fn start_link(
    lw: &mut MuxStream,
    framer: &CommandFramer,
    session: &mut Session,
    outbox: &mut Outbox,
    state: &mut ClientState,
) -> std::io::Result<()> {
    let mut resend: Vec<FramedCommand> = session.unanswered().cloned().collect();
    if session.quit_sent() {
        resend.push(quit());
    }
    if outbox.one_by_one() && resend.is_empty() {
        if let Some(cmd) = outbox.next_alone() {
            if session.send(cmd.clone()).is_ok() {
                resend.push(cmd);
            }
        }
    }
    send_all(lw, &resend, 0).await?;
    if outbox.one_by_one() {
        if resend.is_empty() {
            send_unfinished(lw, framer, state).await?;
            state.rest_sent = true;
        }
        return lw.shutdown().await;
    }
    if !session.quit_sent() && !outbox.holding() {
        send_unfinished(lw, framer, state).await?;
        if state.eof {
            lw.shutdown().await?;
        }
    }
    Ok(())
}

/// Pass bytes both ways until the session ends or the leader's link breaks.
#[allow(clippy::too_many_arguments)]
async fn pump(
    cr: &mut OwnedReadHalf,
    cw: &mut OwnedWriteHalf,
    lr: &mut MuxStream,
    lw: &mut MuxStream,
    framer: &mut CommandFramer,
    session: &mut Session,
    outbox: &mut Outbox,
    state: &mut ClientState,
) -> End {
    let mut replies = ReplyFramer::new();
    loop {
        // Held commands count against the window as sent ones do.
        let read_client = !state.eof
            && !state.gone
            && !session.quit_sent()
            && session.held() + outbox.held_bytes() <= WINDOW_BYTES
            && session.unanswered().len() + outbox.held_len() < WINDOW_COMMANDS;
        tokio::select! {
            read = cr.read_buf(framer.input_mut()), if read_client => {
                let mut out = Vec::new();
                while let Some(cmd) = framer.next_command() {
                    let Some(cmd) = outbox.offer(cmd) else {
                        continue;
                    };
                    let quits = !cmd.expects_reply();
                    if session.send(cmd.clone()).is_err() {
                        break;
                    }
                    out.push(cmd);
                    if quits {
                        break;
                    }
                }
                if send_new(lw, &out, state).await.is_err() {
                    return End::Link;
                }
                let ended = !matches!(read, Ok(n) if n > 0);
                if ended {
                    // The client sent all it will (it may still read).
                    state.eof = true;
                    if outbox.client_ended() {
                        // A reserve may be waiting: the leader sees the end
                        // now and answers it as a server does a client that
                        // hung up; what is held goes one command at a time.
                        if lw.shutdown().await.is_err() {
                            return End::Link;
                        }
                        continue;
                    }
                }
                if !session.quit_sent() && !outbox.holding() {
                    // A put's line takes its id when it arrives, even if its
                    // body never comes: the leader gets a command's start as
                    // it comes, and after the end of input whatever was left,
                    // then the same end.
                    if send_unfinished(lw, framer, state).await.is_err()
                        || (ended && lw.shutdown().await.is_err())
                    {
                        return End::Link;
                    }
                }
            }
            read = lr.read_buf(replies.input_mut()) => {
                if !matches!(read, Ok(n) if n > 0) {
                    let answered = session.unanswered().len() == 0;
                    let more = outbox.held_len() > 0
                        || (!state.rest_sent && !unfinished(framer, true).0.is_empty());
                    return match (answered, session.quit_sent(), state.eof || state.gone) {
                        (true, true, _) => End::Quit,
                        (true, false, true) if outbox.one_by_one() && !state.gone && more => {
                            End::Next
                        }
                        (true, false, true) => End::Hangup,
                        _ => End::Link,
                    };
                }
                loop {
                    let reply = match replies.next_reply() {
                        Ok(Some(r)) => r,
                        Ok(None) => break,
                        // Not the server's protocol: nothing more can be trusted.
                        Err(_) => return End::Hangup,
                    };
                    // The leader could not commit in time: the next one knows
                    // whether the commands took effect, and answers them.
                    if reply.line() == b"INTERNAL_ERROR" {
                        return End::Link;
                    }
                    let Ok(cmd) = session.receive(&reply) else {
                        return End::Hangup;
                    };
                    if !state.gone && cw.write_all(reply.bytes()).await.is_err() {
                        // The client left: as a server stops at a reply it cannot
                        // write, stop the leader at once; the session then ends.
                        state.gone = true;
                        return End::Hangup;
                    }
                    // A reserve answered: what was held behind it goes now.
                    let mut out = outbox.answered(&cmd);
                    out.retain(|c| session.send(c.clone()).is_ok());
                    if send_all(lw, &out, 0).await.is_err() {
                        return End::Link;
                    }
                    if !session.quit_sent()
                        && !outbox.holding()
                        && send_unfinished(lw, framer, state).await.is_err()
                    {
                        return End::Link;
                    }
                }
            }
        }
    }
}

/// The client's unfinished command as far as it goes to the leader now: a
/// put's line and what came of its body (see `CommandFramer::begun`), and once
/// the client's input has ended (`eof`), whatever it left after its last
/// command. The bytes, and how many thrown-away bytes follow them.
fn unfinished(framer: &CommandFramer, eof: bool) -> (&[u8], u64) {
    match framer.begun() {
        Some(begun) => begun,
        None if eof => (framer.pending(), 0),
        None => (&[], 0),
    }
}

/// Send what [`unfinished`] gives that this link has not had yet.
async fn send_unfinished(
    lw: &mut MuxStream,
    framer: &CommandFramer,
    state: &mut ClientState,
) -> std::io::Result<()> {
    let (bytes, filler) = unfinished(framer, state.eof);
    let total = bytes.len() as u64 + filler;
    if total > state.unfinished_sent {
        write_wire(lw, bytes, filler, state.unfinished_sent).await?;
        state.unfinished_sent = total;
    }
    Ok(())
}

/// Send commands the client completed: the first may have been begun on this
/// link already (see [`send_unfinished`]).
async fn send_new(
    lw: &mut MuxStream,
    cmds: &[FramedCommand],
    state: &mut ClientState,
) -> std::io::Result<()> {
    if cmds.is_empty() {
        return Ok(());
    }
    let skip = std::mem::take(&mut state.unfinished_sent);
    send_all(lw, cmds, skip).await
}

/// The node stops and closes the client's connection: end its session as a
/// hang-up would, so its jobs come back now rather than after the grace time
/// (nobody can attach it again: its key is this node's).
async fn end_at_stop(ctx: &Forwarding, owner: u64, session: &Session) {
    let _ = tokio::time::timeout(
        END_AT_STOP,
        attach_anywhere(ctx, owner, END_SESSION, session),
    )
    .await;
}

/// A `quit` of the follower's own.
fn quit() -> FramedCommand {
    let mut framer = CommandFramer::new(0);
    framer.push(b"quit\r\n");
    framer
        .next_command()
        .unwrap_or_else(|| unreachable!("quit frames as one command"))
}

/// Send commands as the server reads them: each one's bytes, and for an
/// oversized put as many filler bytes as the server throws away; the first
/// `skip` of those bytes were sent before.
async fn send_all(lw: &mut MuxStream, cmds: &[FramedCommand], skip: u64) -> std::io::Result<()> {
    let mut skip = skip;
    for c in cmds {
        write_wire(lw, &c.bytes, c.discard, skip).await?;
        skip = 0;
    }
    Ok(())
}

/// What an oversized put's thrown-away bytes are sent as.
static FILLER: [u8; 64 << 10] = [b'x'; 64 << 10];

/// Write the bytes the server reads for `bytes` followed by `filler`
/// thrown-away bytes, from offset `from` on. Each write goes straight into
/// the link's queue (one frame), so nothing is gathered first.
async fn write_wire(
    lw: &mut MuxStream,
    bytes: &[u8],
    filler: u64,
    from: u64,
) -> std::io::Result<()> {
    let start = usize::try_from(from).map_or(bytes.len(), |f| f.min(bytes.len()));
    if start < bytes.len() {
        lw.write_all(&bytes[start..]).await?;
    }
    let mut left = (bytes.len() as u64 + filler).saturating_sub(from.max(bytes.len() as u64));
    while left > 0 {
        let n = left.min(FILLER.len() as u64) as usize;
        lw.write_all(&FILLER[..n]).await?;
        left -= n as u64;
    }
    Ok(())
}

/// A random session key (never 0).
pub(super) fn session_key() -> std::io::Result<u64> {
    loop {
        let mut b = [0u8; 8];
        getrandom::fill(&mut b).map_err(|e| std::io::Error::other(e.to_string()))?;
        let k = u64::from_le_bytes(b);
        if k != 0 {
            return Ok(k);
        }
    }
}

/// Attach the session to whichever node leads, trying until [`REATTACH`] has
/// passed; None if it cannot be (no leader, or the replies the session needs
/// are no longer kept). With `acked` [`END_SESSION`], ask that it end instead.
async fn attach_anywhere(
    ctx: &Forwarding,
    owner: u64,
    acked: u64,
    session: &Session,
) -> Option<MuxStream> {
    let deadline = Instant::now() + REATTACH;
    let request = SessionAttach {
        owner,
        acked,
        use_tube: session.used().to_vec(),
        watch: session.watched().iter().map(|t| t.to_vec()).collect(),
    };
    let mut metrics = ctx.raft.metrics();
    let mut pause = FIRST_RETRY;
    loop {
        let target = {
            let m = metrics.borrow_and_update();
            m.current_leader.and_then(|l| {
                m.membership_config
                    .membership()
                    .get_node(&l)
                    .map(|n| (l, n.peer.clone()))
            })
        };
        if let Some((leader, addr)) = target {
            match attach_once(ctx, leader, &addr, &request).await {
                Try::Attached(link) => return Some(link),
                Try::Lost => return None,
                Try::Again => {}
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        // A new leader, or a moment, before the next try (a moment too once
        // Raft has stopped and its metrics no longer change).
        let wait = left.min(pause);
        pause = (pause * 2).min(RETRY);
        if let Ok(Err(_)) = tokio::time::timeout(wait, metrics.changed()).await {
            tokio::time::sleep(wait).await;
        }
    }
}

/// What one attach request came to.
enum Try {
    Attached(MuxStream),
    /// Not now (no answer, not the leader, attached elsewhere still).
    Again,
    /// The session cannot be carried on.
    Lost,
}

/// One attach request to node `leader` at its peer address `addr`.
async fn attach_once(ctx: &Forwarding, leader: NodeId, addr: &str, request: &SessionAttach) -> Try {
    let frame = attach::attach(&attach::Attach {
        from: ctx.identity.node(),
        to: leader,
        cluster: ctx.identity.cluster(),
        session: request.clone(),
    });
    let work = async {
        let me = ctx.identity.node();
        let cluster = ctx.identity.cluster();
        let mut link = ctx.links.open(me, cluster, leader, addr).await.ok()?;
        link.write_all(&frame).await.ok()?;
        // Exactly one frame: the replies that follow it stay in the stream.
        let (kind, body) = wire::read_frame(&mut link, 64).await.ok()?;
        Some((link, kind, body))
    };
    match tokio::time::timeout(CONNECT, work).await {
        Ok(Some((link, attach::ATTACHED, body))) => match attach::read_attached(&body) {
            Some(attach::Attached::Yes) => Try::Attached(link),
            Some(attach::Attached::Lost) => Try::Lost,
            _ => Try::Again,
        },
        _ => Try::Again,
    }
}
