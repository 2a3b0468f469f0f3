//! `bind_ahead`: the listening sockets of `beanpole serve` made before the rest of the
//! program has loaded (see `beanpole_engine::server::bind_ahead`); the server adopts
//! them later as it adopts a service manager's sockets.
//!
//! Imports the engine's server module only; nothing else of the bindings.

use std::os::fd::IntoRawFd;

use beanpole_engine::server::{bind_ahead as bind_sockets, ListenAddr};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// Bind the TCP addresses `listen` (`-l` values; `port` for those without one) as the
/// server's start would; the listening sockets' descriptors, now the caller's. A Unix
/// or TLS address, or one that does not parse, raises ValueError; a bind that fails,
/// OSError.
#[pyfunction]
pub(crate) fn bind_ahead(py: Python<'_>, listen: Vec<String>, port: u16) -> PyResult<Vec<i32>> {
    let addrs = listen
        .iter()
        .map(|l| ListenAddr::parse(l, port))
        .collect::<Result<Vec<_>, _>>()
        .map_err(PyValueError::new_err)?;
    let fds = py
        .detach(|| bind_sockets(&addrs))
        .map_err(crate::to_py_err)?;
    Ok(fds.into_iter().map(IntoRawFd::into_raw_fd).collect())
}
