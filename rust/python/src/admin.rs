//! `beanpole._core.Admin`: the in-process admin calls of a running server.
//!
//! Every call releases the GIL while it takes the store lock, so Python threads go
//! on while the engine works. A missing tube or job raises `KeyError`; the Python
//! layer turns it into `beanpole.NotFoundError`.

use beanpole_engine::server::{Admin, AdminError};
use beanpole_engine::stats::{self, StatValue, TubeStats};
use beanpole_engine::store::Which;
use pyo3::exceptions::{PyKeyError, PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use crate::PyServerHandle;

/// The admin calls of one server (`beanpole._core.Admin`).
#[pyclass(name = "Admin", module = "beanpole._core", frozen)]
pub(crate) struct PyAdmin {
    inner: Admin,
}

fn to_py_err(e: AdminError) -> PyErr {
    match e {
        AdminError::NoTube(_) | AdminError::NoJob(_) => PyKeyError::new_err(e.to_string()),
        AdminError::NoLogRoom => PyOSError::new_err(e.to_string()),
        AdminError::Reserved(_) | AdminError::NotKickable(_) => {
            PyValueError::new_err(e.to_string())
        }
    }
}

fn which_arg(state: &str) -> PyResult<Which> {
    match state {
        "ready" => Ok(Which::Ready),
        "delayed" => Ok(Which::Delayed),
        "buried" => Ok(Which::Buried),
        _ => Err(PyValueError::new_err(format!(
            "state must be ready, delayed or buried, got {state:?}"
        ))),
    }
}

/// A peeked job as `(id, body size, the body's first max_bytes bytes)`; the CRLF
/// that ends a stored body is not counted or shown.
fn peeked<'py>(
    py: Python<'py>,
    (id, body): (u64, impl AsRef<[u8]>),
    max_bytes: usize,
) -> PyResult<Bound<'py, PyTuple>> {
    let body = body.as_ref();
    let size = body.len().saturating_sub(2);
    let shown = PyBytes::new(py, &body[..size.min(max_bytes)]);
    (id, size, shown).into_pyobject(py)
}

fn set_stat(dict: &Bound<'_, PyDict>, key: &str, value: StatValue) -> PyResult<()> {
    match value {
        StatValue::Int(v) => dict.set_item(key, v),
        StatValue::Signed(v) => dict.set_item(key, v),
        StatValue::Quoted(s) | StatValue::Bare(s) => dict.set_item(key, s),
        StatValue::Bool(b) => dict.set_item(key, b),
        StatValue::Time(s, us) => dict.set_item(key, s as f64 + us as f64 / 1e6),
    }
}

fn pairs_dict<'py>(
    py: Python<'py>,
    pairs: Vec<(&'static str, StatValue)>,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (key, value) in pairs {
        set_stat(&dict, key, value)?;
    }
    Ok(dict)
}

/// One tube as a tuple in `stats-tube` order: name, then the 13 numbers.
fn tube_tuple<'py>(py: Python<'py>, t: &TubeStats) -> PyResult<Bound<'py, PyTuple>> {
    let name = String::from_utf8_lossy(&t.name);
    let items: [Bound<'py, PyAny>; 14] = [
        name.into_pyobject(py)?.into_any(),
        t.urgent.into_pyobject(py)?.into_any(),
        t.ready.into_pyobject(py)?.into_any(),
        t.reserved.into_pyobject(py)?.into_any(),
        t.delayed.into_pyobject(py)?.into_any(),
        t.buried.into_pyobject(py)?.into_any(),
        t.total_jobs.into_pyobject(py)?.into_any(),
        t.using.into_pyobject(py)?.into_any(),
        t.watching.into_pyobject(py)?.into_any(),
        t.waiting.into_pyobject(py)?.into_any(),
        t.cmd_delete.into_pyobject(py)?.into_any(),
        t.cmd_pause_tube.into_pyobject(py)?.into_any(),
        t.pause.into_pyobject(py)?.into_any(),
        t.pause_time_left.into_pyobject(py)?.into_any(),
    ];
    PyTuple::new(py, items)
}

fn u32_arg(what: &str, value: i64) -> PyResult<u32> {
    u32::try_from(value)
        .map_err(|_| PyValueError::new_err(format!("{what} {value} is not in 0..=4294967295")))
}

#[pymethods]
impl PyAdmin {
    #[new]
    fn new(handle: &PyServerHandle) -> PyResult<PyAdmin> {
        handle
            .with(|h| PyAdmin { inner: h.admin() })
            .ok_or_else(|| PyRuntimeError::new_err("the server is stopped"))
    }

    fn tube_stats<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyDict>> {
        let t = py
            .detach(|| self.inner.tube_stats(name.as_bytes()))
            .map_err(to_py_err)?;
        pairs_dict(py, stats::tube_pairs(&t))
    }

    fn job_stats<'py>(&self, py: Python<'py>, id: u64) -> PyResult<Bound<'py, PyDict>> {
        let j = py.detach(|| self.inner.job_stats(id)).map_err(to_py_err)?;
        pairs_dict(py, stats::job_pairs(&j))
    }

    fn tubes(&self, py: Python<'_>) -> Vec<String> {
        py.detach(|| self.inner.tubes())
            .into_iter()
            .map(|n| String::from_utf8_lossy(&n).into_owned())
            .collect()
    }

    fn pause(&self, py: Python<'_>, name: &str, seconds: i64) -> PyResult<()> {
        let seconds = u32_arg("seconds", seconds)?;
        py.detach(|| self.inner.pause(name.as_bytes(), seconds))
            .map_err(to_py_err)
    }

    fn kick(&self, py: Python<'_>, name: &str, bound: i64) -> PyResult<u32> {
        let bound = u32_arg("bound", bound)?;
        py.detach(|| self.inner.kick(name.as_bytes(), bound))
            .map_err(to_py_err)
    }

    /// `peek ID`: `(id, body size, first max_bytes bytes of the body)`.
    fn peek_job<'py>(
        &self,
        py: Python<'py>,
        id: u64,
        max_bytes: usize,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let job = py.detach(|| self.inner.peek_job(id)).map_err(to_py_err)?;
        peeked(py, job, max_bytes)
    }

    /// The next `state` (ready, delayed, buried) job of tube `name`, as `peek_job`
    /// gives it, or None when it has none.
    fn peek<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        state: &str,
        max_bytes: usize,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let which = which_arg(state)?;
        let job = py
            .detach(|| self.inner.peek(name.as_bytes(), which))
            .map_err(to_py_err)?;
        job.map(|j| peeked(py, j, max_bytes)).transpose()
    }

    fn kick_job(&self, py: Python<'_>, id: u64) -> PyResult<()> {
        py.detach(|| self.inner.kick_job(id)).map_err(to_py_err)
    }

    fn delete(&self, py: Python<'_>, id: u64) -> PyResult<()> {
        py.detach(|| self.inner.delete(id)).map_err(to_py_err)
    }

    /// Delete up to `limit` of tube `name`'s `state` jobs under one lock; returns
    /// how many were deleted.
    fn clear(&self, py: Python<'_>, name: &str, state: &str, limit: i64) -> PyResult<u32> {
        let which = which_arg(state)?;
        let limit = u32_arg("limit", limit)?;
        py.detach(|| self.inner.clear(name.as_bytes(), which, limit))
            .map_err(to_py_err)
    }

    /// `(stats dict, [tube tuple, ...], other tube tuple or None)` read under one
    /// acquisition of the lock; `max_tubes` keeps only the tubes with the most jobs.
    #[pyo3(signature = (max_tubes = None))]
    fn snapshot<'py>(
        &self,
        py: Python<'py>,
        max_tubes: Option<usize>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let snap = py.detach(|| self.inner.snapshot(max_tubes));
        let server = pairs_dict(py, snap.server)?;
        // Beside the wire's `version` (the protocol's): beanpole's own.
        server.set_item("beanpole-version", beanpole_engine::VERSION)?;
        if let Some((failing, errors)) = snap.log_health {
            server.set_item("log-failing", failing)?;
            server.set_item("log-errors", errors)?;
        }
        let tubes = PyList::empty(py);
        for t in &snap.tubes {
            tubes.append(tube_tuple(py, t)?)?;
        }
        let other = match &snap.other {
            Some(t) => tube_tuple(py, t)?.into_any(),
            None => py.None().into_bound(py),
        };
        PyTuple::new(py, [server.into_any(), tubes.into_any(), other])
    }

    /// How long the latest snapshot held the store lock, in seconds.
    #[getter]
    fn last_snapshot_lock_seconds(&self) -> f64 {
        self.inner.last_snapshot_lock_ns() as f64 / 1e9
    }
}
