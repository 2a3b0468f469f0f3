//! [`ServerHandle`]: a server running on its own tokio runtime (or on one it is
//! given, `ServerConfig::runtime`), for embedding.
//!
//! `start` returns once the socket is bound (so the caller can connect at once and
//! learn the real port), `stop` ends it and waits, `wait` blocks until it ends.
//! Nothing here needs the caller to be async.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::oneshot;

use super::bind::{bind_all, SocketFiles};
use super::engine::{Engine, Running};
use super::error::ServerError;
use super::tls::{Tls, TlsError, TlsFiles};
use super::{run, BoundAddr, ListenAddr, Shared};
use crate::protocol::{DEFAULT_MAX_JOB_SIZE, MAX_JOB_SIZE_LIMIT};
use crate::stats::StatValue;

/// What a server is started with.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The addresses to listen on (`-l`, repeatable).
    pub listen: Vec<ListenAddr>,
    /// Listening sockets inherited from a service manager (systemd socket
    /// activation), served before the `listen` addresses. Each is duplicated: the
    /// caller still owns these descriptors and should close them after `start`.
    pub listen_fds: Vec<RawFd>,
    /// Permissions of the Unix sockets bound here (`--unix-mode`); None leaves them
    /// to the umask.
    pub unix_mode: Option<u32>,
    pub max_job_size: u32,
    pub verbose: u8,
    /// Worker threads; 0 means half the cores, at least one (none of its own
    /// with `runtime`).
    pub threads: usize,
    /// The write-ahead log (`-b`), if any.
    pub log: Option<crate::wal::LogConfig>,
    /// Certificate and key of the `tls:` listeners (and the CA of client
    /// certificates, for mutual TLS); needed when one of `listen` is TLS.
    pub tls: Option<TlsFiles>,
    /// `--max-connections`: more are closed at once; 0 means no limit.
    pub max_connections: usize,
    /// `--max-memory`: bytes the jobs may take before puts get OUT_OF_MEMORY; 0
    /// means no limit.
    pub max_memory: u64,
    /// With a replicated log (a cluster leader's): how long a detached session
    /// (a follower's client whose forwarding connection is gone) keeps its
    /// reservations before they are released (`--session-grace-ms`).
    pub session_grace: Duration,
    /// With a replicated log (a cluster leader's): makes every client a session
    /// and takes the connections the server stops under (`carry.rs`).
    pub carrier: Option<super::Carrier>,
    /// Serve on this runtime instead of one of the server's own (a cluster
    /// leader's term server shares its node's Raft runtime: see `engine.rs`).
    pub runtime: Option<tokio::runtime::Handle>,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            listen: vec![ListenAddr::Tcp(([127, 0, 0, 1], 11300).into())],
            listen_fds: Vec::new(),
            unix_mode: None,
            max_job_size: DEFAULT_MAX_JOB_SIZE,
            verbose: 0,
            threads: 0,
            log: None,
            tls: None,
            max_connections: 0,
            max_memory: 0,
            session_grace: Duration::from_nanos(crate::store::session::SESSION_GRACE),
            carrier: None,
            runtime: None,
        }
    }
}

/// Set once the server task has finished.
#[derive(Debug, Default)]
pub struct Done {
    /// Whether the server has finished. A std mutex because waiters are plain
    /// threads; it also orders the creation of `wake_fd` against `set`.
    finished: Mutex<bool>,
    /// Signals `finished`; a std condvar because waiters are plain threads
    /// (`wait` is called from Python with the GIL released).
    cond: Condvar,
    /// An eventfd that becomes readable once finished, for waiters that also
    /// watch other file descriptors (made on first use).
    wake_fd: OnceLock<OwnedFd>,
}

impl Done {
    fn set(&self) {
        let mut finished = self.finished.lock().unwrap_or_else(PoisonError::into_inner);
        *finished = true;
        if let Some(fd) = self.wake_fd.get() {
            raise_eventfd(fd);
        }
        drop(finished);
        self.cond.notify_all();
    }

    /// A file descriptor that is readable once the server has finished.
    pub fn wake_fd(&self) -> io::Result<RawFd> {
        let finished = self.finished.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(fd) = self.wake_fd.get() {
            return Ok(fd.as_raw_fd());
        }
        // SAFETY: eventfd takes no pointers; a non-negative result is a new fd we own.
        let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` was just created and is owned by nothing else.
        let fd = self
            .wake_fd
            .get_or_init(|| unsafe { OwnedFd::from_raw_fd(raw) });
        if *finished {
            raise_eventfd(fd);
        }
        Ok(fd.as_raw_fd())
    }

    /// Block until the server has stopped or `timeout` passes; true if stopped.
    pub fn wait(&self, timeout: Option<Duration>) -> bool {
        let guard = self.finished.lock().unwrap_or_else(PoisonError::into_inner);
        match timeout {
            None => *self
                .cond
                .wait_while(guard, |f| !*f)
                .unwrap_or_else(PoisonError::into_inner),
            Some(t) => {
                let (guard, _) = self
                    .cond
                    .wait_timeout_while(guard, t, |f| !*f)
                    .unwrap_or_else(PoisonError::into_inner);
                *guard
            }
        }
    }
}

fn raise_eventfd(fd: &OwnedFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64 to an fd we own. A full counter
    // (EAGAIN) already reads as raised.
    unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
}

/// Ends the accept loop. A oneshot: shutdown happens once. Behind a std mutex
/// shared by the handle and its [`Control`]s, held only to take the sender.
type ShutdownTx = Arc<Mutex<Option<oneshot::Sender<()>>>>;

/// What may act on a server without owning its handle (drain, begin the stop),
/// e.g. from a thread that waits for signals.
#[derive(Debug, Clone)]
pub struct Control {
    /// Weak: a `Control` kept after the stop must not keep the queue (and the
    /// log's open files) alive.
    shared: Weak<Shared>,
    shutdown: ShutdownTx,
    done: Arc<Done>,
}

impl Control {
    /// Enter drain mode: puts are answered DRAINING from now on.
    pub fn drain(&self) {
        if let Some(shared) = self.shared.upgrade() {
            shared.lock().set_draining(true);
        }
    }

    /// End the accept loop and tell every connection to finish; the handle's
    /// `stop` completes the stop.
    pub fn begin_stop(&self) {
        send_shutdown(&self.shutdown);
    }

    /// Set once the server has finished.
    pub fn done(&self) -> &Arc<Done> {
        &self.done
    }
}

fn send_shutdown(shutdown: &ShutdownTx) {
    let tx = shutdown
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    if let Some(tx) = tx {
        let _ = tx.send(());
    }
}

/// A running server.
#[derive(Debug)]
pub struct ServerHandle {
    runtime: Option<Running>,
    shutdown: ShutdownTx,
    done: Arc<Done>,
    shared: Arc<Shared>,
    /// Every address listened on, in the order given.
    addrs: Vec<BoundAddr>,
    /// The Unix socket files bound here, removed once the server has stopped.
    socket_files: SocketFiles,
    /// The log's writer and directory lock, kept until the server has stopped.
    log: Option<crate::wal::OpenedLog>,
}

impl ServerHandle {
    /// Bind and start serving; returns once every socket is listening.
    pub fn start(config: ServerConfig) -> Result<ServerHandle, ServerError> {
        ServerHandle::start_with(config, None)
    }

    /// [`ServerHandle::start`] with a log opened by the caller (a cluster
    /// leader's replicated one, `wal::replicate`) instead of `config.log`.
    pub fn start_with_log(
        config: ServerConfig,
        log: crate::wal::OpenedLog,
    ) -> Result<ServerHandle, ServerError> {
        ServerHandle::start_with(config, Some(log))
    }

    fn start_with(
        config: ServerConfig,
        opened: Option<crate::wal::OpenedLog>,
    ) -> Result<ServerHandle, ServerError> {
        if config.max_job_size > MAX_JOB_SIZE_LIMIT {
            return Err(ServerError::Invalid(format!(
                "max job size {} is over the limit of {MAX_JOB_SIZE_LIMIT} bytes",
                config.max_job_size
            )));
        }
        let has_tls_listener = config
            .listen
            .iter()
            .any(|a| matches!(a, ListenAddr::Tls(_)));
        let tls = match &config.tls {
            Some(files) if has_tls_listener => Some(Arc::new(Tls::new(files.clone())?)),
            None if has_tls_listener => {
                return Err(ServerError::Invalid(
                    "a tls: listener needs a certificate and a key (--tls-cert, --tls-key)".into(),
                ))
            }
            _ => None,
        };
        let engine = match &config.runtime {
            Some(handle) => Engine::on(handle.clone()),
            None => Engine::new(worker_threads(config.threads)).map_err(ServerError::Runtime)?,
        };
        // The log comes first: a locked or corrupt directory fails the start before
        // anything listens.
        let mut log = match (&config.log, opened) {
            (_, Some(opened)) => Some(opened),
            (Some(lc), None) => Some(crate::wal::open(lc, config.max_job_size)?),
            (None, None) => None,
        };
        let bound = engine
            .block_on(async { bind_all(&config.listen, &config.listen_fds, config.unix_mode) })?;
        let listeners = bound.listeners;
        let mut shared = Shared::new(
            config.max_job_size,
            config.verbose,
            log.as_mut(),
            config.session_grace,
        );
        shared.tls = tls;
        if shared.replicated {
            shared.carrier = config.carrier.clone();
        }
        shared.runtime = Some(engine.handle());
        shared.tasks = engine.tasks();
        shared.limits.set_max_connections(config.max_connections);
        shared.lock().set_max_memory(config.max_memory);
        let shared = Arc::new(shared);
        if let Err(e) = super::limits::raise_fd_limit() {
            shared.events.log(crate::events::level::WARNING, || {
                format!("cannot raise the open files limit: {e}")
            });
        }
        let (tx, rx) = oneshot::channel::<()>();
        let done = Arc::new(Done::default());
        let task_done = Arc::clone(&done);
        let task_shared = Arc::clone(&shared);
        let runtime = engine
            .run(async move {
                run(listeners, task_shared, async {
                    let _ = rx.await;
                })
                .await;
                task_done.set();
            })
            .map_err(ServerError::Runtime)?;
        Ok(ServerHandle {
            runtime: Some(runtime),
            shutdown: Arc::new(Mutex::new(Some(tx))),
            done,
            shared,
            addrs: bound.addrs,
            socket_files: bound.files,
            log,
        })
    }

    /// The first address listened on (with the real port when 0 was asked for).
    pub fn local_addr(&self) -> &BoundAddr {
        &self.addrs[0]
    }

    /// Every address listened on, in the order given (inherited sockets first).
    pub fn local_addrs(&self) -> &[BoundAddr] {
        &self.addrs
    }

    pub fn is_running(&self) -> bool {
        !self.done.wait(Some(Duration::ZERO))
    }

    /// Enter drain mode: puts are answered DRAINING from now on.
    pub fn drain(&self) {
        self.shared.lock().set_draining(true);
    }

    pub fn is_draining(&self) -> bool {
        self.shared.lock().draining()
    }

    /// The log's health: (writes or fsyncs failing now, errors seen so far).
    pub fn log_health(&self) -> Option<(bool, u64)> {
        self.shared.log_pipe.as_ref().map(|p| {
            (
                p.failing(),
                p.errors.load(std::sync::atomic::Ordering::Relaxed),
            )
        })
    }

    /// Read the TLS certificate files again: connections accepted from now on use
    /// them, open ones keep theirs. On error the certificates in force are kept.
    /// False when the server has no TLS listener.
    pub fn reload_tls(&self) -> Result<bool, TlsError> {
        match &self.shared.tls {
            None => Ok(false),
            Some(tls) => tls.reload().map(|()| true),
        }
    }

    /// TLS handshakes that failed or timed out so far (None without TLS).
    pub fn tls_failed_handshakes(&self) -> Option<u64> {
        self.shared.tls.as_ref().map(|t| {
            t.failed_handshakes
                .load(std::sync::atomic::Ordering::Relaxed)
        })
    }

    /// Connections closed at once because `--max-connections` were open.
    pub fn connections_refused(&self) -> u64 {
        self.shared.limits.refused()
    }

    /// The bytes the jobs take, as `--max-memory` counts them.
    pub fn job_bytes(&self) -> u64 {
        self.shared.lock().job_bytes()
    }

    /// The `stats` values, as ordered pairs.
    pub fn stats(&self) -> Vec<(&'static str, StatValue)> {
        let store = self.shared.lock();
        self.shared.stats_pairs(&store)
    }

    /// The server's events (admin hooks, log lines).
    pub fn events(&self) -> &Arc<crate::events::EventHub> {
        &self.shared.events
    }

    /// Begin stopping without waiting: the accept loop ends and every connection
    /// is told to finish. [`ServerHandle::stop`] completes it.
    pub fn begin_stop(&self) {
        self.signal_stop();
    }

    /// Stop accepting, close every connection, and wait up to `timeout` for the
    /// connection tasks to end. Safe to call more than once.
    pub fn stop(&mut self, timeout: Duration) {
        if self.runtime.is_some() {
            self.shared
                .events
                .server_event(crate::events::EventKind::Shutdown, || None);
        }
        self.signal_stop();
        self.done.wait(Some(timeout));
        if let Some(rt) = self.runtime.take() {
            rt.stop(timeout);
        }
        self.socket_files.remove();
        if let Some(mut log) = self.log.take() {
            // Everything journaled is written (and synced, unless -F) before the
            // directory lock is released.
            let _ = self.shared.lock().flush_log();
            log.pipe.stop();
            if let Some(writer) = log.writer.take() {
                let _ = writer.join();
            }
        }
        // The event stream ends once its consumer has taken what is queued.
        self.shared.events.close();
        self.done.set();
    }

    fn signal_stop(&self) {
        send_shutdown(&self.shutdown);
    }

    /// A [`Control`] for this server.
    pub fn control(&self) -> Control {
        Control {
            shared: Arc::downgrade(&self.shared),
            shutdown: Arc::clone(&self.shutdown),
            done: Arc::clone(&self.done),
        }
    }

    /// Block until the server has stopped or `timeout` passes; true if stopped.
    pub fn wait(&self, timeout: Option<Duration>) -> bool {
        self.done.wait(timeout)
    }

    /// Something to wait on for the end of the server without borrowing the handle.
    pub fn waiter(&self) -> Arc<Done> {
        Arc::clone(&self.done)
    }

    // -- in-process admin calls (see admin.rs) --

    /// The admin calls of this server (stats, tubes, pause, kick, snapshots).
    pub fn admin(&self) -> super::Admin {
        super::Admin::new(Arc::clone(&self.shared))
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if self.runtime.is_some() {
            self.stop(Duration::from_secs(1));
        }
    }
}

/// Worker threads for `threads` (0: half the cores, at least one). The queue state
/// sits behind one lock, so extra workers help only with parsing and system calls;
/// measured on 2 cores shared with clients, one worker gave lower latency and higher
/// throughput than two in every pipeline-1 scenario of bench/.
fn worker_threads(threads: usize) -> usize {
    if threads > 0 {
        return threads;
    }
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    (cores / 2).max(1)
}
