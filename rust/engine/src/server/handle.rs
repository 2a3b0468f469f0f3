//! [`ServerHandle`]: a server running on its own tokio runtime, for embedding.
//!
//! `start` returns once the socket is bound (so the caller can connect at once and
//! learn the real port), `stop` ends it and waits, `wait` blocks until it ends.
//! Nothing here needs the caller to be async.

use std::io;
use std::os::fd::RawFd;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use thiserror::Error;
use tokio::sync::oneshot;

use super::bind::{bind_all, SocketFiles};
use super::engine::{Engine, Running};
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
    /// Worker threads; 0 means half the cores, at least one.
    pub threads: usize,
    /// The write-ahead log (`-b`), if any.
    pub log: Option<crate::wal::LogConfig>,
    /// Certificate and key of the `tls:` listeners (and the CA of client
    /// certificates, for mutual TLS); needed when one of `listen` is TLS.
    pub tls: Option<TlsFiles>,
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
        }
    }
}

/// Why a server could not start.
#[derive(Debug, Error)]
pub enum ServerError {
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: String, source: io::Error },
    #[error("invalid setting: {0}")]
    Invalid(String),
    #[error("cannot start the runtime: {0}")]
    Runtime(io::Error),
    #[error(transparent)]
    Log(#[from] crate::wal::LogError),
    #[error("TLS: {0}")]
    Tls(#[from] TlsError),
}

/// Set once the server task has finished.
#[derive(Debug, Default)]
pub struct Done {
    finished: Mutex<bool>,
    /// Signals `finished`; a std condvar because waiters are plain threads
    /// (`wait` is called from Python with the GIL released).
    cond: Condvar,
}

impl Done {
    fn set(&self) {
        *self.finished.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.cond.notify_all();
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

/// A running server.
#[derive(Debug)]
pub struct ServerHandle {
    runtime: Option<Running>,
    /// Ends the accept loop. A oneshot: shutdown happens once.
    shutdown: Mutex<Option<oneshot::Sender<()>>>,
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
        let engine = Engine::new(worker_threads(config.threads)).map_err(ServerError::Runtime)?;
        // The log comes first: a locked or corrupt directory fails the start before
        // anything listens.
        let mut log = match &config.log {
            Some(lc) => Some(crate::wal::open(lc, config.max_job_size)?),
            None => None,
        };
        let bound = engine
            .block_on(async { bind_all(&config.listen, &config.listen_fds, config.unix_mode) })?;
        let listeners = bound.listeners;
        let mut shared = Shared::new(config.max_job_size, config.verbose, log.as_mut());
        shared.tls = tls;
        let shared = Arc::new(shared);
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
            shutdown: Mutex::new(Some(tx)),
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

    /// The `stats` values, as ordered pairs.
    pub fn stats(&self) -> Vec<(&'static str, StatValue)> {
        let store = self.shared.lock();
        self.shared.stats_pairs(&store)
    }

    /// Stop accepting, close every connection, and wait up to `timeout` for the
    /// connection tasks to end. Safe to call more than once.
    pub fn stop(&mut self, timeout: Duration) {
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
        self.done.set();
    }

    fn signal_stop(&self) {
        let tx = self
            .shutdown
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(tx) = tx {
            let _ = tx.send(());
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
