//! `beanpole._core.binlog_*`: the offline log tools for `beanpole binlog`.

use std::path::PathBuf;

use beanpole_engine::wal::format::{Record, StoredState};
use beanpole_engine::wal::tools;
use beanpole_engine::wal::LogError;
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

fn os_err(e: LogError) -> PyErr {
    PyOSError::new_err(e.to_string())
}

fn state_name(s: StoredState) -> &'static str {
    match s {
        StoredState::Ready => "ready",
        StoredState::Delayed => "delayed",
        StoredState::Buried => "buried",
        StoredState::Reserved => "reserved",
    }
}

fn record_dict<'py>(
    py: Python<'py>,
    segment: u64,
    offset: u64,
    record: &Record,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("segment", segment)?;
    d.set_item("offset", offset)?;
    d.set_item("id", record.id())?;
    match record {
        Record::Job(j) => {
            d.set_item("kind", "job")?;
            d.set_item("tube", String::from_utf8_lossy(&j.tube).into_owned())?;
            d.set_item("state", state_name(j.fields.state))?;
            d.set_item("pri", j.fields.pri)?;
            d.set_item("delay", j.fields.delay)?;
            d.set_item("ttr", j.fields.ttr)?;
            d.set_item("created", j.fields.created)?;
            d.set_item("ready_at", j.fields.ready_at)?;
            d.set_item("bury_seq", j.fields.bury_seq)?;
            d.set_item("reserves", j.fields.reserves)?;
            d.set_item("timeouts", j.fields.timeouts)?;
            d.set_item("releases", j.fields.releases)?;
            d.set_item("buries", j.fields.buries)?;
            d.set_item("kicks", j.fields.kicks)?;
            d.set_item("body", PyBytes::new(py, &j.body))?;
        }
        Record::Reserve { .. } => d.set_item("kind", "reserve")?,
        Record::Release {
            pri,
            delay,
            ready_at,
            ..
        } => {
            d.set_item("kind", "release")?;
            d.set_item("pri", pri)?;
            d.set_item("delay", delay)?;
            d.set_item("ready_at", ready_at)?;
        }
        Record::Bury { pri, bury_seq, .. } => {
            d.set_item("kind", "bury")?;
            d.set_item("pri", pri)?;
            d.set_item("bury_seq", bury_seq)?;
        }
        Record::Kick { .. } => d.set_item("kind", "kick")?,
        Record::Timeout { .. } => d.set_item("kind", "timeout")?,
        Record::Delete { .. } => d.set_item("kind", "delete")?,
        Record::NextId { next_id } => {
            d.set_item("kind", "next-id")?;
            d.set_item("next_id", next_id)?;
        }
        Record::Hold {
            owner,
            deadline,
            seq,
            ..
        } => {
            d.set_item("kind", "hold")?;
            d.set_item("owner", owner)?;
            d.set_item("deadline", deadline)?;
            d.set_item("seq", seq)?;
        }
        Record::Return { .. } => d.set_item("kind", "return")?,
        Record::Outcome { owner, seq, reply } => {
            d.set_item("kind", "outcome")?;
            d.set_item("owner", owner)?;
            d.set_item("seq", seq)?;
            d.set_item("reply", PyBytes::new(py, reply.as_slice()))?;
        }
        Record::End { owner } => {
            d.set_item("kind", "end")?;
            d.set_item("owner", owner)?;
        }
        Record::Pause { tube, delay, until } => {
            d.set_item("kind", "pause")?;
            d.set_item("tube", String::from_utf8_lossy(tube).into_owned())?;
            d.set_item("delay", delay)?;
            d.set_item("until", until)?;
        }
    }
    Ok(d)
}

/// Every record of the log in `dir`, and the problems that stopped reading.
#[pyfunction]
pub fn binlog_dump<'py>(
    py: Python<'py>,
    dir: PathBuf,
) -> PyResult<(Bound<'py, PyList>, Vec<String>)> {
    let dump = py.detach(|| tools::dump(&dir)).map_err(os_err)?;
    let list = PyList::empty(py);
    for r in &dump.records {
        list.append(record_dict(py, r.segment, r.offset, &r.record)?)?;
    }
    Ok((list, dump.problems))
}

/// Replay without changing anything; raises OSError where the server would refuse.
#[pyfunction]
pub fn binlog_verify<'py>(py: Python<'py>, dir: PathBuf) -> PyResult<Bound<'py, PyDict>> {
    let r = py.detach(|| tools::verify(&dir)).map_err(os_err)?;
    let d = PyDict::new(py);
    d.set_item("segments", r.segments.clone())?;
    d.set_item("records", r.records)?;
    d.set_item("jobs", r.jobs.len())?;
    d.set_item("next_id", r.next_id)?;
    d.set_item("warnings", r.warnings.clone())?;
    Ok(d)
}

/// Rewrite the live jobs into fresh segments and drop the old ones.
#[pyfunction]
#[pyo3(signature = (dir, segment_size = 10485760))]
pub fn binlog_compact(py: Python<'_>, dir: PathBuf, segment_size: u64) -> PyResult<(usize, usize)> {
    py.detach(|| tools::compact(&dir, segment_size))
        .map_err(os_err)
}

/// Convert a beanstalkd binlog directory into a beanpole log.
#[pyfunction]
#[pyo3(signature = (src, dst, segment_size = 10485760))]
pub fn binlog_import(
    py: Python<'_>,
    src: PathBuf,
    dst: PathBuf,
    segment_size: u64,
) -> PyResult<(usize, Vec<String>)> {
    py.detach(|| tools::import(&src, &dst, segment_size))
        .map_err(os_err)
}
