//! tokio networking: listeners, one task per connection, one clock task.
//!
//! Shape: [`run`] accepts on every listener until `shutdown` resolves; every connection runs
//! [`conn::serve`]; [`clock::run`] sleeps until the store's next deadline. All of
//! them share one [`Shared`]: the store behind a mutex, the clock's alarm, the stop
//! flag and the count of running connections.

mod admin;
mod bind;
mod carry;
mod caught;
mod clock;
mod conn;
mod engine;
mod error;
mod handle;
mod input;
mod limits;
mod listener;
mod out;
mod session;
mod signal;
mod spare;
mod tls;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

pub use self::admin::{Admin, AdminError, Snapshot};
pub use self::bind::bind_ahead;
pub use self::carry::{CarriedSession, Carrier, SessionCarrier};
#[cfg(feature = "fault-injection")]
pub use self::conn::FAULT_PANIC;
pub use self::error::ServerError;
pub use self::handle::{Control, Done, ServerConfig, ServerHandle};
pub use self::input::Socket;
pub use self::listener::{BoundAddr, ListenAddr, Listener};
pub use self::session::{SessionAttach, SessionRefused, END_SESSION};
pub use self::tls::{TlsError, TlsFiles, HANDSHAKE_TIMEOUT};
use crate::events::EventHub;
use crate::stats::{self, ProcessInfo, StatValue};
use crate::store::{Store, Wakeup};

/// Default `binlog-max-size` reported when no log is configured (beanstalkd's default
/// segment size).
const DEFAULT_SEGMENT_SIZE: u64 = 10 * 1024 * 1024;

/// The store's clock reading at server start: about 36 years in nanoseconds.
pub const TIME_BASE: u64 = 1 << 60;

/// State shared by every task of one server.
pub struct Shared {
    /// The queue. A plain mutex: it is held only while the in-memory state changes
    /// (never across an await or any I/O), so contention is short and an async
    /// mutex would only add overhead.
    store: Mutex<Store>,
    /// Wakes the clock task when an earlier deadline appears than the one it sleeps
    /// for. `Notify` keeps a permit if the clock is not sleeping yet, so a re-arm is
    /// never lost.
    clock: Notify,
    /// The deadline (ns) the clock task sleeps until; u64::MAX when none. Read and
    /// written with the store lock held, so it is always consistent with the store.
    armed: AtomicU64,
    epoch: Instant,
    verbose: u8,
    /// Set once when the server stops; connections and the clock check it whenever
    /// they are signalled. Written with the store lock held (see [`Shared::stop_all`]).
    stopping: AtomicBool,
    /// The connection tasks still running.
    live: listener::Live,
    fixed: FixedInfo,
    /// The write-ahead log's hand-over to its writer thread, when there is a log.
    pub(crate) log_pipe: Option<Arc<crate::wal::pipe::LogPipe>>,
    /// Whether that log is a cluster's (`wal/replicate.rs`).
    pub(crate) replicated: bool,
    /// Events for admin hooks and log lines for the host's logger.
    pub(crate) events: Arc<EventHub>,
    /// The certificates of the `tls:` listeners, when the server has any.
    tls: Option<Arc<tls::Tls>>,
    /// `--max-connections` and the connections it refused.
    limits: limits::Limits,
    /// The runtime serving the connections (for sessions a cluster follower
    /// hands over from another thread).
    runtime: Option<tokio::runtime::Handle>,
    /// A cluster leader's term server: its clients are sessions, carried to
    /// the next leader when the server stops under them (`carry.rs`).
    carrier: Option<Carrier>,
    /// On a runtime shared with others (`engine.rs`): the server's tasks there,
    /// which end when it is given up on.
    tasks: Option<Arc<engine::Tasks>>,
}

/// Process facts that never change while the server runs.
struct FixedInfo {
    id: String,
    hostname: String,
    os: String,
    platform: String,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("verbose", &self.verbose)
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// A server's shared state; with a log, its recovered jobs move into the store.
    /// With a replicated log, a detached session ends after `session_grace`.
    pub fn new(
        max_job_size: u32,
        verbose: u8,
        log: Option<&mut crate::wal::OpenedLog>,
        session_grace: Duration,
    ) -> Shared {
        let (hostname, os, platform) = stats::process::uname();
        let epoch = Instant::now();
        let mut store = Store::new(max_job_size);
        let events = Arc::new(EventHub::new(verbose));
        store.set_events(Arc::clone(&events));
        let mut log_pipe = None;
        // With a log, `stats`'s id names the directory's job-id space, which outlives
        // the process (wal/instance.rs); without one it is drawn now, as beanstalkd's.
        let mut id = None;
        if let Some(log) = log {
            id = Some(log.instance.clone());
            if log.pipe.is_replicated() {
                // Before `attach_log`: the sessions a takeover restores are
                // detached with this grace time.
                let grace = u64::try_from(session_grace.as_nanos()).unwrap_or(u64::MAX);
                store.enable_sessions(grace);
            }
            store.attach_log(log, TIME_BASE);
            log.pipe.set_events(Arc::clone(&events));
            log_pipe = Some(Arc::clone(&log.pipe));
        }
        Shared {
            store: Mutex::new(store),
            clock: Notify::new(),
            armed: AtomicU64::new(u64::MAX),
            epoch,
            verbose,
            stopping: AtomicBool::new(false),
            live: listener::Live::default(),
            fixed: FixedInfo {
                id: id.unwrap_or_else(stats::process::instance_id),
                hostname,
                os,
                platform,
            },
            replicated: log_pipe.as_ref().is_some_and(|p| p.is_replicated()),
            log_pipe,
            events,
            tls: None,
            limits: limits::Limits::default(),
            runtime: None,
            carrier: None,
            tasks: None,
        }
    }

    /// Spawn a task of this server's on the runtime it runs on. On a runtime of
    /// its own, the runtime's end drops whatever is left; on a shared one the task
    /// ends once the server is given up on.
    pub(crate) fn spawn<F>(&self, task: F) -> tokio::task::JoinHandle<()>
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        match &self.tasks {
            None => tokio::spawn(task),
            Some(tasks) => tasks.spawn(task),
        }
    }

    /// The store's clock: nanoseconds on the monotonic clock, counted from
    /// [`TIME_BASE`] at server start (so jobs restored from a log can have been
    /// created before the server started).
    pub fn now(&self) -> u64 {
        TIME_BASE + self.epoch.elapsed().as_nanos() as u64
    }

    /// Lock the store. A panic elsewhere while it was held does not make the state
    /// unusable for the rest (every change completes before anything can fail), so
    /// poisoning is ignored.
    pub fn lock(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// After a batch of changes, with the lock still held: collect the wakeups and
    /// say whether the clock must be re-armed. Call [`Shared::finish`] after unlocking.
    pub fn settle(&self, store: &mut Store) -> Settled {
        self.settle_pass(store, true)
    }

    /// [`Shared::settle`] for the clock's passes, whose results no client reads:
    /// a cluster leader past its lease journals no read barrier for them.
    pub fn settle_timers(&self, store: &mut Store) -> Settled {
        self.settle_pass(store, false)
    }

    fn settle_pass(&self, store: &mut Store, read: bool) -> Settled {
        let wakeups = if store.has_wakeups() {
            store.take_wakeups()
        } else {
            Vec::new()
        };
        let mut rearm = false;
        if let Some(next) = store.next_deadline() {
            if next < self.armed.load(Ordering::Relaxed) {
                self.armed.store(next, Ordering::Relaxed);
                rearm = true;
            }
        }
        let mut log = store.flush_log();
        if self.replicated {
            if read && log.is_none() && !self.log_pipe.as_ref().is_some_and(|p| p.lease_valid()) {
                // A read-only pass of a leader whose lease ran out: it replies
                // after a no-op's commit shows it still led after the read.
                store.journal_barrier();
                log = store.flush_log();
            }
            // A cluster leader's store may show changes not yet committed: every
            // reply, a read's too, waits until what its pass saw is committed.
            log = log.or_else(|| store.log_position());
        }
        Settled {
            wakeups,
            rearm,
            log,
        }
    }

    /// Deliver what [`Shared::settle`] collected, outside the lock. Returns the log
    /// position the replies of the batch must wait for, if it journaled anything.
    pub fn finish(&self, settled: Settled) -> Option<u64> {
        for w in settled.wakeups {
            w.wake();
        }
        if settled.rearm {
            self.clock.notify_one();
        }
        settled.log
    }

    /// Have the log records up to `position` written without waiting for them
    /// (for changes no reply depends on).
    pub fn write_log(&self, position: Option<u64>) {
        if let (Some(pipe), Some(position)) = (&self.log_pipe, position) {
            pipe.write_through(position);
        }
    }

    /// Whether the server is stopping: a signalled connection or clock ends.
    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Tell every connection and the clock to end. Connections see it at their next
    /// wait; one that registers later finds the flag set when it connects.
    fn stop_all(&self) {
        let wakeups = {
            let mut store = self.lock();
            self.stopping.store(true, Ordering::Release);
            store.wake_all();
            store.take_wakeups()
        };
        for w in wakeups {
            w.wake();
        }
        self.clock.notify_one();
    }

    /// The full `stats` as ordered pairs.
    pub fn stats_pairs(&self, store: &Store) -> Vec<(&'static str, StatValue)> {
        stats::server_pairs(&store.stats(), &self.process_info(store))
    }

    fn process_info(&self, store: &Store) -> ProcessInfo {
        let log = store.log_stats().unwrap_or(crate::store::LogStats {
            max_size: DEFAULT_SEGMENT_SIZE,
            ..Default::default()
        });
        let (utime, stime) = stats::process::rusage();
        ProcessInfo {
            pid: std::process::id(),
            version: crate::PROTOCOL_VERSION.to_owned(),
            rusage_utime: utime,
            rusage_stime: stime,
            uptime: self.epoch.elapsed().as_secs(),
            binlog_oldest_index: log.oldest_index,
            binlog_current_index: log.current_index,
            binlog_records_migrated: log.records_migrated,
            binlog_records_written: log.records_written,
            binlog_max_size: log.max_size,
            id: self.fixed.id.clone(),
            hostname: self.fixed.hostname.clone(),
            os: self.fixed.os.clone(),
            platform: self.fixed.platform.clone(),
        }
    }
}

/// Wakeups and a clock re-arm, to deliver once the lock is released.
#[must_use]
#[allow(missing_debug_implementations)]
pub struct Settled {
    wakeups: Vec<Arc<dyn Wakeup>>,
    rearm: bool,
    log: Option<u64>,
}

/// Serve `listeners` (one accept task each) until `shutdown` resolves, then close
/// every listener and every connection.
pub async fn run(
    listeners: Vec<Listener>,
    shared: Arc<Shared>,
    shutdown: impl std::future::Future,
) {
    let clock = shared.spawn(clock::run(Arc::clone(&shared)));
    // A cluster leader's commits reach the waiting connections from this
    // runtime (`LogPipe::acknowledge`).
    let relay = shared
        .log_pipe
        .as_ref()
        .filter(|pipe| pipe.is_replicated())
        .map(|pipe| {
            let pipe = Arc::clone(pipe);
            shared.spawn(async move { pipe.relay_acks().await })
        });
    // A watch channel: every accept task waits on the same one change, and a task
    // that starts waiting after it was sent still sees it.
    let (stop_accepting, accepting) = tokio::sync::watch::channel(false);
    let accepts: Vec<_> = listeners
        .into_iter()
        .map(|listener| {
            let task_shared = Arc::clone(&shared);
            let mut accepting = accepting.clone();
            shared.spawn(async move {
                let shared = task_shared;
                let stop = async move {
                    let _ = accepting.wait_for(|&stop| stop).await;
                };
                listener::accept_loop(listener, &shared, stop).await;
            })
        })
        .collect();
    shutdown.await;
    let _ = stop_accepting.send(true);
    for accept in accepts {
        let _ = accept.await;
    }
    shared.stop_all();
    shared.live.wait_for_none().await;
    let _ = clock.await;
    if let Some(relay) = relay {
        relay.abort();
    }
}
