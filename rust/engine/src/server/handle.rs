//! [`ServerHandle`]: a server running on its own tokio runtime, for embedding.
//!
//! `start` returns once the socket is bound (so the caller can connect at once and
//! learn the real port), `stop` ends it and waits, `wait` blocks until it ends.
//! Nothing here needs the caller to be async.

use std::io;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use thiserror::Error;
use tokio::sync::oneshot;

use super::engine::{Engine, Running};
use super::{run, BoundAddr, ListenAddr, Listener, Shared};
use crate::protocol::{DEFAULT_MAX_JOB_SIZE, MAX_JOB_SIZE_LIMIT};
use crate::stats::StatValue;

/// What a server is started with.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: ListenAddr,
    pub max_job_size: u32,
    pub verbose: u8,
    /// Worker threads; 0 means half the cores, at least one.
    pub threads: usize,
    /// The write-ahead log (`-b`), if any.
    pub log: Option<crate::wal::LogConfig>,
    /// `--max-connections`: more are closed at once; 0 means no limit.
    pub max_connections: usize,
    /// `--max-memory`: bytes the jobs may take before puts get OUT_OF_MEMORY; 0
    /// means no limit.
    pub max_memory: u64,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            listen: ListenAddr::Tcp(([127, 0, 0, 1], 11300).into()),
            max_job_size: DEFAULT_MAX_JOB_SIZE,
            verbose: 0,
            threads: 0,
            log: None,
            max_connections: 0,
            max_memory: 0,
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
    addr: BoundAddr,
    /// The log's writer and directory lock, kept until the server has stopped.
    log: Option<crate::wal::OpenedLog>,
}

impl ServerHandle {
    /// Bind and start serving; returns once the socket is listening.
    pub fn start(config: ServerConfig) -> Result<ServerHandle, ServerError> {
        if config.max_job_size > MAX_JOB_SIZE_LIMIT {
            return Err(ServerError::Invalid(format!(
                "max job size {} is over the limit of {MAX_JOB_SIZE_LIMIT} bytes",
                config.max_job_size
            )));
        }
        let engine = Engine::new(worker_threads(config.threads)).map_err(ServerError::Runtime)?;
        // The log comes first: a locked or corrupt directory fails the start before
        // anything listens.
        let mut log = match &config.log {
            Some(lc) => Some(crate::wal::open(lc, config.max_job_size)?),
            None => None,
        };
        let listener = engine
            .block_on(async { Listener::bind(&config.listen) })
            .map_err(|e| ServerError::Bind {
                addr: describe(&config.listen),
                source: e,
            })?;
        let addr = listener.local_addr().map_err(|e| ServerError::Bind {
            addr: describe(&config.listen),
            source: e,
        })?;
        let shared = Arc::new(Shared::new(
            config.max_job_size,
            config.verbose,
            log.as_mut(),
        ));
        shared.limits.set_max_connections(config.max_connections);
        shared.lock().set_max_memory(config.max_memory);
        if let Err(e) = super::limits::raise_fd_limit() {
            eprintln!("beanpole: cannot raise the open files limit: {e}");
        }
        let (tx, rx) = oneshot::channel::<()>();
        let done = Arc::new(Done::default());
        let task_done = Arc::clone(&done);
        let task_shared = Arc::clone(&shared);
        let runtime = engine
            .run(async move {
                run(listener, task_shared, async {
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
            addr,
            log,
        })
    }

    /// The address actually bound (with the real port when 0 was asked for).
    pub fn local_addr(&self) -> &BoundAddr {
        &self.addr
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

    /// Stop accepting, close every connection, and wait up to `timeout` for the
    /// connection tasks to end. Safe to call more than once.
    pub fn stop(&mut self, timeout: Duration) {
        self.signal_stop();
        self.done.wait(Some(timeout));
        if let Some(rt) = self.runtime.take() {
            rt.stop(timeout);
        }
        if let BoundAddr::Unix(path) = &self.addr {
            let _ = std::fs::remove_file(path);
        }
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

fn describe(addr: &ListenAddr) -> String {
    match addr {
        ListenAddr::Tcp(a) => a.to_string(),
        ListenAddr::Unix(p) => format!("unix:{}", p.display()),
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
