//! Serving clients while this node leads: the task that watches Raft's
//! server metrics ([`run`]) starts the engine's server on the committed state
//! when the node becomes leader, and stops it when the node loses the lead.
//!
//! At the start of a term the leader waits until it has applied everything
//! committed before it (`ensure_linearizable`), then builds a store from the
//! state machine's replica (the way a restart builds one from a log), with its
//! clock no earlier than the replicated clock, and serves it on the client
//! address. The store's records go to Raft (`propose.rs`). When the term ends,
//! the server stops: replies still waiting for a commit are not sent, and the
//! connections close. While the node does not serve, the client address stays
//! bound and its connections are forwarded to the leader as sessions
//! (`forward.rs`); those outlive the accept loop, and attach to this node's own
//! server once it leads.
//!
//! The term's server makes each of its clients a session (the engine's
//! `server/carry.rs`) and, when it stops under one, hands the connection to
//! the forwarding path with what it had not answered ([`NodeCarrier`]): the client
//! keeps its connection and its reservations, as a follower's does.
//!
//! A node handing its lead over (`handover.rs`) sets `yielding`: the term's
//! server then stops as on a planned stop (no new connections, the passes in
//! flight get their commits and replies, at most [`DRAIN`]), is not started
//! again while it is set, and `yielded` says when it is down.

use std::net::TcpListener as StdListener;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use beanpole_engine::server::{
    Admin, CarriedSession, Carrier, ServerConfig, ServerHandle, SessionCarrier,
};
use beanpole_engine::wal::pipe::LogPipe;
use beanpole_engine::wal::replicate;
use openraft::ServerState;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::forward::{self, Forwarding};
use super::propose;
use crate::identity::Identity;
use crate::sm::StateView;
use crate::types::{NodeId, Raft};

/// How long a new leader waits to have applied the entries committed before
/// its term before it tries again.
const CATCH_UP: Duration = Duration::from_secs(5);
/// How often a leader that could not start serving tries again.
const RETRY: Duration = Duration::from_millis(250);
/// How long stopping a term's server may take.
const STOP: Duration = Duration::from_secs(2);
/// On a planned stop of a term's server, how long the passes in flight may
/// take to be committed (and answered) before the rest are dropped.
pub const DRAIN: Duration = Duration::from_millis(500);

/// What the leadership task needs.
pub struct Leading {
    pub id: NodeId,
    pub raft: Raft,
    /// This node's identity (forwarded sessions attach under it).
    pub identity: Arc<Identity>,
    pub view: StateView,
    /// The engine settings of the term servers (their listen socket is set
    /// here).
    pub server: ServerConfig,
    /// The client address, bound at start and kept for the node's life.
    pub client: Arc<StdListener>,
    /// The runtime forwarded connections run on (`Forwarding::runtime`).
    pub forward_on: tokio::runtime::Handle,
    /// `stats`'s `id` of every term's server: the cluster's job-id space.
    pub instance: String,
    /// How long after its proposal a commit shows no other leader can exist.
    pub lease: Duration,
    /// Drain mode (puts answered DRAINING), for every term's server from when
    /// it is set.
    pub draining: Arc<AtomicBool>,
    /// Say on stderr when this node starts and stops serving clients.
    pub announce: bool,
    /// How long a reply waits for its commit before `INTERNAL_ERROR`.
    pub commit_timeout: Duration,
    /// The term whose server runs now, and its admin calls (None while not
    /// serving). A watch channel: readers want the latest value only, and may
    /// wait for one.
    pub serving: watch::Sender<Option<(u64, Admin)>>,
    /// Set while this node hands its lead over: serve no term. A watch
    /// channel: the task wants the latest value and to wake when it changes.
    pub yielding: watch::Receiver<bool>,
    /// True once no term's server runs while `yielding` is set.
    pub yielded: watch::Sender<bool>,
    /// The term this node was last seen leading and when it was first seen
    /// leading it (just after openraft made it leader).
    pub led_since: watch::Sender<Option<(u64, Instant)>>,
    /// The fence around vote requests (the peer server's), told which lease
    /// the term served now has.
    pub fence: Arc<propose::LeaseFence>,
    /// The log index of the last entry of a term's store that was committed
    /// (every term's proposer raises it).
    pub committed_to: Arc<std::sync::atomic::AtomicU64>,
    /// How far this node's log is on disk (`LogStore::durable`).
    pub durable: crate::logstore::Durable,
}

/// One term's running server and its proposer.
struct Serving {
    term: u64,
    handle: ServerHandle,
    proposer: JoinHandle<()>,
    /// Tells the proposer to end once what is queued is submitted and
    /// answered (a planned stop). A Notify: one signal, kept until taken.
    finish: Arc<tokio::sync::Notify>,
    /// The store's pipe: closed at the term's end so replies waiting for a
    /// commit give up at once.
    pipe: Arc<LogPipe>,
}

/// Takes the term servers' clients over when a server stops under them.
struct NodeCarrier {
    forwarding: Arc<Forwarding>,
    /// The node's forwarding runtime, where forwarded connections run.
    runtime: tokio::runtime::Handle,
}

impl SessionCarrier for NodeCarrier {
    fn new_owner(&self) -> u64 {
        // A key nobody else draws: 64 random bits. Without randomness, a key
        // that changes (time and a counter), rather than refusing the client.
        forward::session_key().unwrap_or_else(|_| {
            static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            (t ^ NEXT.fetch_add(1, Ordering::Relaxed).rotate_left(48)) | 1
        })
    }

    fn carry(&self, session: CarriedSession) {
        let _entered = self.runtime.enter();
        forward::carry(session, Arc::clone(&self.forwarding));
    }
}

/// Watch the metrics until Raft stops, serving while this node leads.
pub async fn run(leading: Leading) {
    // The server metrics (vote, role, leader, membership) change only when one
    // of those does; the whole metrics change with every entry appended,
    // replicated or applied, and would wake this task for each.
    let mut metrics = leading.raft.server_metrics();
    // Ends every forwarded connection when the node stops. A watch channel: a
    // flag many tasks wait on.
    let (stop, stopped) = watch::channel(false);
    let forwarding = Arc::new(Forwarding {
        raft: leading.raft.clone(),
        identity: Arc::clone(&leading.identity),
        max_job_size: leading.server.max_job_size,
        stop: stopped,
        live: forward::Live::default(),
        runtime: leading.forward_on.clone(),
        links: Default::default(),
    });
    let carrier = Carrier(Arc::new(NodeCarrier {
        forwarding: Arc::clone(&forwarding),
        runtime: leading.forward_on.clone(),
    }));
    let mut relay = Some(forward::spawn(&leading.client, Arc::clone(&forwarding)));
    let mut serving: Option<Serving> = None;
    let mut yielding = leading.yielding.clone();
    let mut yield_open = true;
    loop {
        let (leader, term) = {
            let m = metrics.borrow_and_update();
            (
                m.state == ServerState::Leader && m.current_leader == Some(leading.id),
                m.vote.leader_id().get_term(),
            )
        };
        if leader && leading.led_since.borrow().map(|(t, _)| t) != Some(term) {
            leading.led_since.send_replace(Some((term, Instant::now())));
        }
        let yields = *yielding.borrow_and_update();
        let leads = leader && !yields;
        if serving.as_ref().is_some_and(|s| !leads || s.term != term) {
            if let Some(s) = serving.take() {
                let term = s.term;
                stop_term(&leading, s, yields.then_some(DRAIN)).await;
                if leading.announce {
                    crate::say::say!(
                        "beanpole: node {} no longer leads (term {term}): forwarding clients to the leader",
                        leading.id
                    );
                }
            }
            relay = Some(forward::spawn(&leading.client, Arc::clone(&forwarding)));
        }
        if leads && serving.is_none() {
            if let Some(started) = start_term(&leading, term, &carrier).await {
                if let Some(d) = relay.take() {
                    d.abort();
                }
                leading
                    .serving
                    .send_replace(Some((started.term, started.handle.admin())));
                if leading.announce {
                    crate::say::say!(
                        "beanpole: node {} leads (term {}): serving clients",
                        leading.id,
                        started.term
                    );
                }
                serving = Some(started);
            }
        }
        let down = yields && serving.is_none();
        if *leading.yielded.borrow() != down {
            leading.yielded.send_replace(down);
        }
        let retry = leads && serving.is_none();
        tokio::select! {
            changed = metrics.changed() => {
                if changed.is_err() {
                    break;
                }
            }
            changed = yielding.changed(), if yield_open => {
                yield_open = changed.is_ok();
            }
            () = tokio::time::sleep(RETRY), if retry => {}
        }
    }
    if let Some(s) = serving.take() {
        stop_term(&leading, s, None).await;
    }
    if let Some(d) = relay.take() {
        d.abort();
    }
    let _ = stop.send(true);
    // The forwarded connections end their sessions (their jobs come back now).
    let _ = tokio::time::timeout(
        forward::END_AT_STOP + Duration::from_millis(100),
        forwarding.live.idle(),
    )
    .await;
}

/// Start serving term `term`, once everything committed before it is applied;
/// None if the node no longer leads it or the server cannot start.
async fn start_term(leading: &Leading, term: u64, carrier: &Carrier) -> Option<Serving> {
    match tokio::time::timeout(CATCH_UP, leading.raft.ensure_linearizable()).await {
        Ok(Ok(_)) => {}
        _ => return None,
    }
    // Not only what it knows to be committed: everything in its log. A node
    // restarted with its own committed vote leads again in the same term
    // (openraft 0.9 restores it), and `ensure_linearizable` then waits only
    // for its term's first entry, though later ones may have been committed
    // and acknowledged before the stop (the saved committed index, written
    // unsynced, lags or is lost with a power loss). A leader's whole log is
    // committed once a majority matches it.
    let last = leading.raft.metrics().borrow().last_log_index;
    let applied = leading.raft.wait(Some(CATCH_UP));
    if applied
        .applied_index_at_least(last, "the leader's log applied")
        .await
        .is_err()
    {
        return None;
    }
    {
        let m = leading.raft.metrics();
        let m = m.borrow();
        if m.current_term != term || m.state != ServerState::Leader {
            return None;
        }
    }
    let (recovered, clock) = {
        let state = leading.view.lock();
        (state.replica.to_recovered(), state.clock)
    };
    let lease = Arc::new(propose::Lease::new(
        leading.lease,
        Arc::clone(&leading.fence),
    ));
    let (sink, rx) = propose::Proposals::new(Arc::clone(&lease), leading.commit_timeout);
    let opened = replicate::opened(
        recovered,
        sink,
        clock,
        leading.instance.clone(),
        format!("cluster node {}", leading.id),
    );
    let pipe = Arc::clone(&opened.pipe);
    let mut config = leading.server.clone();
    config.listen = Vec::new();
    config.listen_fds = vec![leading.client.as_raw_fd()];
    config.carrier = Some(carrier.clone());
    // On Raft's runtime (this task's): the store's passes reach the proposer,
    // and commits the waiting connections, without waking another thread.
    config.runtime = Some(tokio::runtime::Handle::current());
    let started =
        tokio::task::spawn_blocking(move || ServerHandle::start_with_log(config, opened)).await;
    match started {
        Ok(Ok(handle)) => {
            if leading.draining.load(Ordering::SeqCst) {
                handle.drain();
            }
            leading.fence.serve(Some(Arc::clone(&lease)));
            let finish = Arc::new(tokio::sync::Notify::new());
            let to = propose::Acknowledge {
                pipe: Arc::clone(&pipe),
                lease,
                committed_to: Arc::clone(&leading.committed_to),
                durable: leading.durable.clone(),
                state: leading.view.clone(),
            };
            let proposer = tokio::spawn(propose::run(
                leading.raft.clone(),
                rx,
                to,
                clock,
                Arc::clone(&finish),
            ));
            Some(Serving {
                term,
                handle,
                proposer,
                finish,
                pipe,
            })
        }
        Ok(Err(e)) => {
            crate::say::say!(
                "beanpole: node {}: cannot serve term {term}: {e}",
                leading.id
            );
            None
        }
        Err(_) => None,
    }
}

/// Stop a term's server (its connections close; unacknowledged replies are
/// never sent) and its proposer. With `drain` (a planned stop), the server
/// first stops accepting and tells its connections to finish, and the passes
/// in flight have that long to be committed and answered.
async fn stop_term(leading: &Leading, serving: Serving, drain: Option<Duration>) {
    leading.serving.send_replace(None);
    leading.fence.serve(None);
    let Serving {
        mut handle,
        mut proposer,
        finish,
        pipe,
        ..
    } = serving;
    if let Some(drain) = drain {
        let control = handle.control();
        control.begin_stop();
        let done = Arc::clone(control.done());
        let _ = tokio::task::spawn_blocking(move || done.wait(Some(drain))).await;
    }
    // Connections waiting for a commit of this term end now (unanswered), not
    // when the stop's patience runs out.
    pipe.close();
    let _ = tokio::task::spawn_blocking(move || handle.stop(STOP)).await;
    if let Some(drain) = drain {
        // The store is gone: the proposer submits what is queued, has the
        // answers and ends; from then on nothing of this term goes into the
        // log (the hand-over's successor must hold all of it).
        finish.notify_one();
        let _ = tokio::time::timeout(drain, &mut proposer).await;
    }
    proposer.abort();
}
