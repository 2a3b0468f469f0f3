//! Python bindings: `beanpole._core`.
//!
//! Only this crate depends on pyo3. It exposes [`PyServerHandle`] over the engine's
//! `ServerHandle`; every call that can block (start, stop, wait) releases the GIL.

mod admin;
mod ahead;
mod alloc;
mod binlog;
mod client;
mod cluster;
mod events;
mod table;

/// The module's Rust allocations: small blocks from mimalloc, large ones from
/// the system (`alloc.rs`). Python's own objects keep Python's allocator.
#[global_allocator]
static ALLOCATOR: alloc::Allocator = alloc::Allocator;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use beanpole_engine::events::EventHub;
use beanpole_engine::server::{
    BoundAddr, Control, ListenAddr, ServerConfig, ServerError, ServerHandle, TlsFiles,
};
use beanpole_engine::stats::StatValue;
use beanpole_engine::wal::{FsyncPolicy, LogConfig};
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// A running server (`beanpole._core.ServerHandle`).
#[pyclass(name = "ServerHandle", module = "beanpole._core", frozen)]
struct PyServerHandle {
    /// The handle, until stopped. A mutex because Python may call stop from any
    /// thread while another waits; it is never held while the server works, only
    /// while a call reads or takes the handle.
    inner: Mutex<Option<ServerHandle>>,
    /// Kept after stop so `address` and `addresses` still answer.
    addrs: Vec<BoundAddr>,
    /// Drain and stop without the handle's mutex (the signal wait uses it).
    control: Control,
    /// The server's events; kept after stop so a consumer can finish draining.
    events: Arc<EventHub>,
}

fn to_py_err(e: ServerError) -> PyErr {
    match e {
        ServerError::Bind { addr, source } => {
            let errno = source.raw_os_error().unwrap_or(0);
            PyOSError::new_err((errno, format!("cannot listen on {addr}: {source}")))
        }
        ServerError::Invalid(msg) => PyValueError::new_err(msg),
        ServerError::Log(e) => PyOSError::new_err(e.to_string()),
        ServerError::Tls(e) => PyOSError::new_err(format!("TLS: {e}")),
        ServerError::Runtime(e) => PyRuntimeError::new_err(format!("cannot start the server: {e}")),
    }
}

/// `stats` pairs as a Python dict (times as float seconds).
fn stats_dict<'py>(
    py: Python<'py>,
    pairs: Vec<(&'static str, StatValue)>,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (key, value) in pairs {
        match value {
            StatValue::Int(v) => dict.set_item(key, v)?,
            StatValue::Signed(v) => dict.set_item(key, v)?,
            StatValue::Quoted(s) | StatValue::Bare(s) => dict.set_item(key, s)?,
            StatValue::Bool(b) => dict.set_item(key, b)?,
            StatValue::Time(s, us) => dict.set_item(key, s as f64 + us as f64 / 1e6)?,
        }
    }
    Ok(dict)
}

fn address_to_py<'py>(py: Python<'py>, addr: &BoundAddr) -> PyResult<Bound<'py, PyAny>> {
    match addr {
        BoundAddr::Tcp(sa) => Ok((sa.ip().to_string(), sa.port())
            .into_pyobject(py)?
            .into_any()),
        BoundAddr::Unix(path) => Ok(path
            .to_string_lossy()
            .into_owned()
            .into_pyobject(py)?
            .into_any()),
    }
}

impl PyServerHandle {
    fn with<T>(&self, f: impl FnOnce(&ServerHandle) -> T) -> Option<T> {
        let guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        guard.as_ref().map(f)
    }
}

#[pymethods]
impl PyServerHandle {
    #[staticmethod]
    #[pyo3(signature = (
        listen, port, max_job_size, verbose = 0, threads = 0,
        binlog_dir = None, fsync_ms = None, no_fsync = false,
        segment_size = 10485760, skip_corrupt = false,
        unix_mode = None, listen_fds = None,
        tls_cert = None, tls_key = None, tls_client_ca = None,
        max_connections = 0, max_memory = 0,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn start(
        py: Python<'_>,
        listen: Vec<String>,
        port: i64,
        max_job_size: i64,
        verbose: i64,
        threads: i64,
        binlog_dir: Option<std::path::PathBuf>,
        fsync_ms: Option<i64>,
        no_fsync: bool,
        segment_size: i64,
        skip_corrupt: bool,
        unix_mode: Option<u32>,
        listen_fds: Option<Vec<i32>>,
        tls_cert: Option<std::path::PathBuf>,
        tls_key: Option<std::path::PathBuf>,
        tls_client_ca: Option<std::path::PathBuf>,
        max_connections: i64,
        max_memory: i64,
    ) -> PyResult<PyServerHandle> {
        let max_connections = usize::try_from(max_connections).map_err(|_| {
            PyValueError::new_err(format!(
                "max connections {max_connections} must be 0 or more"
            ))
        })?;
        let max_memory = u64::try_from(max_memory).map_err(|_| {
            PyValueError::new_err(format!("max memory {max_memory} must be 0 or more"))
        })?;
        let port = u16::try_from(port)
            .map_err(|_| PyValueError::new_err(format!("port {port} is not in 0..=65535")))?;
        let max_job_size = u32::try_from(max_job_size).map_err(|_| {
            PyValueError::new_err(format!(
                "max job size {max_job_size} is not in 0..=1073741824"
            ))
        })?;
        let threads = usize::try_from(threads)
            .map_err(|_| PyValueError::new_err(format!("threads {threads} must be 0 or more")))?;
        let listen = listen
            .iter()
            .map(|text| ListenAddr::parse(text, port))
            .collect::<Result<Vec<_>, _>>()
            .map_err(PyValueError::new_err)?;
        let log = match binlog_dir {
            None => None,
            Some(dir) => {
                let fsync = if no_fsync {
                    FsyncPolicy::Never
                } else {
                    match fsync_ms {
                        None => beanpole_engine::wal::DEFAULT_FSYNC,
                        Some(0) => FsyncPolicy::Always,
                        Some(ms) => FsyncPolicy::Every(Duration::from_millis(
                            u64::try_from(ms).map_err(|_| {
                                PyValueError::new_err(format!(
                                    "fsync interval {ms} ms must be 0 or more"
                                ))
                            })?,
                        )),
                    }
                };
                let segment_size = u64::try_from(segment_size)
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| {
                        PyValueError::new_err(format!(
                            "segment size {segment_size} must be positive"
                        ))
                    })?;
                Some(LogConfig {
                    dir,
                    fsync,
                    segment_size,
                    skip_corrupt,
                    faults: None,
                })
            }
        };
        let config = ServerConfig {
            listen,
            listen_fds: listen_fds.unwrap_or_default(),
            unix_mode,
            max_job_size,
            verbose: u8::try_from(verbose.clamp(0, 255)).unwrap_or(u8::MAX),
            threads,
            log,
            tls: match (tls_cert, tls_key) {
                (Some(cert), Some(key)) => Some(TlsFiles {
                    cert,
                    key,
                    client_ca: tls_client_ca,
                }),
                (None, None) => None,
                _ => {
                    return Err(PyValueError::new_err(
                        "TLS needs both a certificate and a key",
                    ))
                }
            },
            max_connections,
            max_memory,
            // A single server has no sessions: only a cluster's term servers
            // use the grace time.
            ..ServerConfig::default()
        };
        let handle = py
            .detach(|| ServerHandle::start(config))
            .map_err(to_py_err)?;
        let addrs = handle.local_addrs().to_vec();
        let control = handle.control();
        let events = Arc::clone(handle.events());
        Ok(PyServerHandle {
            inner: Mutex::new(Some(handle)),
            addrs,
            control,
            events,
        })
    }

    /// The first address: `(host, port)` for TCP, the socket path for a Unix socket.
    #[getter]
    fn address<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        address_to_py(py, &self.addrs[0])
    }

    /// Every address listened on, in order, each as `address` gives it.
    #[getter]
    fn addresses<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        self.addrs.iter().map(|a| address_to_py(py, a)).collect()
    }

    #[getter]
    fn running(&self) -> bool {
        self.with(ServerHandle::is_running).unwrap_or(false)
    }

    #[getter]
    fn draining(&self) -> bool {
        self.with(ServerHandle::is_draining).unwrap_or(false)
    }

    fn drain(&self) -> PyResult<()> {
        self.with(ServerHandle::drain)
            .ok_or_else(|| PyRuntimeError::new_err("the server is stopped"))
    }

    #[pyo3(signature = (timeout = 5.0))]
    fn stop(&self, py: Python<'_>, timeout: f64) {
        let handle = self
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(mut handle) = handle {
            let timeout = Duration::from_secs_f64(timeout.max(0.0));
            py.detach(move || handle.stop(timeout));
        }
    }

    #[pyo3(signature = (timeout = None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> bool {
        let timeout = timeout.map(|t| Duration::from_secs_f64(t.max(0.0)));
        py.detach(|| {
            // Wait on a clone of the done flag without holding the mutex, so stop()
            // from another thread is not blocked by this wait.
            let guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            match guard.as_ref() {
                None => true,
                Some(h) => {
                    let waiter = h.waiter();
                    drop(guard);
                    waiter.wait(timeout)
                }
            }
        })
    }

    /// Begin stopping at once (stop accepting, tell connections to finish); `stop`
    /// completes it.
    fn begin_stop(&self) {
        self.control.begin_stop();
    }

    /// Block without the GIL until `fd` (a signal wakeup fd) is readable, the
    /// server has finished or `timeout` passes; act on the signals read (drain or
    /// begin the stop) before returning (finished, signal numbers).
    #[pyo3(signature = (fd, timeout = None, stop_signals = Vec::new(), drain_signals = Vec::new()))]
    fn wait_signal(
        &self,
        py: Python<'_>,
        fd: i32,
        timeout: Option<f64>,
        stop_signals: Vec<i32>,
        drain_signals: Vec<i32>,
    ) -> PyResult<(bool, Vec<i32>)> {
        let timeout = timeout.map(|t| Duration::from_secs_f64(t.max(0.0)));
        let control = &self.control;
        py.detach(|| events::wait_signal(control, fd, timeout, &stop_signals, &drain_signals))
    }

    /// Start the event queue (`capacity` events) and return its receiving end.
    fn subscribe_events(&self, py: Python<'_>, capacity: usize) -> events::PyEventStream {
        events::PyEventStream::new(py, self.events.subscribe(capacity))
    }

    /// Produce events of exactly these kinds from now on.
    fn set_event_kinds(&self, kinds: Vec<String>) -> PyResult<()> {
        self.events.set_kinds(&events::kinds(kinds)?);
        Ok(())
    }

    /// Send the engine's log lines through the event queue (instead of stderr).
    fn set_log_messages(&self, on: bool) {
        self.events.set_messages(on);
    }

    /// Events dropped because the queue was full.
    #[getter]
    fn events_dropped(&self) -> u64 {
        self.events.dropped()
    }

    /// Read the TLS certificate files again for new connections; False when the
    /// server has no TLS listener. Raises OSError (keeping the certificates in
    /// force) if the files are unreadable or invalid.
    fn reload_tls(&self, py: Python<'_>) -> PyResult<bool> {
        let guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let handle = guard
            .as_ref()
            .ok_or_else(|| PyRuntimeError::new_err("the server is stopped"))?;
        py.detach(|| handle.reload_tls())
            .map_err(|e| PyOSError::new_err(format!("TLS: {e}")))
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let pairs = self
            .with(ServerHandle::stats)
            .ok_or_else(|| PyRuntimeError::new_err("the server is stopped"))?;
        let dict = stats_dict(py, pairs)?;
        // Not part of the wire stats (whose `version` is the protocol's): beanpole's own.
        dict.set_item("beanpole-version", beanpole_engine::VERSION)?;
        // Nor is the log's health.
        if let Some(Some((failing, errors))) = self.with(ServerHandle::log_health) {
            dict.set_item("log-failing", failing)?;
            dict.set_item("log-errors", errors)?;
        }
        if let Some(Some(failed)) = self.with(ServerHandle::tls_failed_handshakes) {
            dict.set_item("tls-failed-handshakes", failed)?;
        }
        // Nor are the limits' figures: connections refused by --max-connections, and
        // the bytes the jobs take as --max-memory counts them.
        if let Some((refused, job_bytes)) = self.with(|h| (h.connections_refused(), h.job_bytes()))
        {
            dict.set_item("connections-refused", refused)?;
            dict.set_item("job-bytes", job_bytes)?;
        }
        Ok(dict)
    }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", beanpole_engine::VERSION)?;
    m.add_class::<PyServerHandle>()?;
    m.add_class::<cluster::PyClusterNode>()?;
    m.add_function(wrap_pyfunction!(cluster::cluster_status, m)?)?;
    m.add_function(wrap_pyfunction!(cluster::cluster_change, m)?)?;
    m.add_class::<events::PyEventStream>()?;
    m.add("EVENT_KINDS", events::kind_names())?;
    m.add_class::<admin::PyAdmin>()?;
    m.add_class::<client::PyClient>()?;
    m.add_function(wrap_pyfunction!(ahead::bind_ahead, m)?)?;
    m.add_function(wrap_pyfunction!(binlog::binlog_dump, m)?)?;
    m.add_function(wrap_pyfunction!(binlog::binlog_verify, m)?)?;
    m.add_function(wrap_pyfunction!(binlog::binlog_compact, m)?)?;
    m.add_function(wrap_pyfunction!(binlog::binlog_import, m)?)?;
    m.add_function(wrap_pyfunction!(client::shard_column, m)?)?;
    table::register(m)?;
    Ok(())
}
