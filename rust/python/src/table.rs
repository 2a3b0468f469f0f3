//! `beanpole._core.binlog_table_*`: a log directory as Arrow column buffers, for
//! the Spark source `beanpole-binlog` (`python/beanpole/spark/binlog_source.py`).
//! Each column comes back as a few `bytes` objects (validity bitmap, offsets,
//! values) that pyarrow wraps without a Python object per row.

use std::path::PathBuf;

use beanpole_engine::wal::columns::Columns;
use beanpole_engine::wal::table::{self, SegmentPlan, TableError};
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

fn os_err(e: TableError) -> PyErr {
    PyOSError::new_err(e.to_string())
}

/// One column: name, Arrow type name, rows, nulls, validity, offsets, values.
type PyColumn<'py> = (
    &'static str,
    &'static str,
    usize,
    usize,
    Option<Bound<'py, PyBytes>>,
    Option<Bound<'py, PyBytes>>,
    Bound<'py, PyBytes>,
);

fn to_python(py: Python<'_>, columns: Columns) -> Vec<PyColumn<'_>> {
    columns
        .columns
        .iter()
        .map(|c| {
            let offsets = (!c.offsets.is_empty()).then(|| PyBytes::new(py, &c.offsets));
            (
                c.name,
                c.kind.as_str(),
                c.len,
                c.nulls,
                c.validity().map(|v| PyBytes::new(py, v)),
                offsets,
                PyBytes::new(py, &c.values),
            )
        })
        .collect()
}

/// A planned segment: seq, end of its readable records, later records.
type PlannedPart<'py> = (u64, u64, Bound<'py, PyBytes>);

/// Plan a read: for each segment holding records, (seq, end, later records);
/// and the warnings (torn tails).
#[pyfunction]
pub fn binlog_table_plan<'py>(
    py: Python<'py>,
    dir: PathBuf,
) -> PyResult<(Vec<PlannedPart<'py>>, Vec<String>)> {
    let plan = py.detach(|| table::plan(&dir)).map_err(os_err)?;
    let parts = plan
        .segments
        .iter()
        .map(|s| (s.seq, s.end, PyBytes::new(py, &s.later)))
        .collect();
    Ok((parts, plan.warnings))
}

/// The live jobs homed in one planned segment, as a restart at `now_ns` sees them.
#[pyfunction]
pub fn binlog_table_jobs<'py>(
    py: Python<'py>,
    dir: PathBuf,
    seq: u64,
    end: u64,
    later: Vec<u8>,
    now_ns: i64,
) -> PyResult<Vec<PyColumn<'py>>> {
    let part = SegmentPlan { seq, end, later };
    let columns = py
        .detach(|| table::jobs(&dir, &part, now_ns))
        .map_err(os_err)?;
    Ok(to_python(py, columns))
}

/// Every record of one planned segment.
#[pyfunction]
pub fn binlog_table_records<'py>(
    py: Python<'py>,
    dir: PathBuf,
    seq: u64,
    end: u64,
) -> PyResult<Vec<PyColumn<'py>>> {
    let columns = py
        .detach(|| table::records(&dir, seq, end))
        .map_err(os_err)?;
    Ok(to_python(py, columns))
}

/// The beanstalkd binlog files holding live jobs, and the reader's warnings.
#[pyfunction]
pub fn binlog_table_beanstalkd_plan(
    py: Python<'_>,
    dir: PathBuf,
) -> PyResult<(Vec<String>, Vec<String>)> {
    py.detach(|| table::beanstalkd_plan(&dir)).map_err(os_err)
}

/// The live jobs whose latest full record is in one of the beanstalkd `files`.
#[pyfunction]
pub fn binlog_table_beanstalkd_jobs<'py>(
    py: Python<'py>,
    dir: PathBuf,
    files: Vec<String>,
    now_ns: i64,
) -> PyResult<Vec<PyColumn<'py>>> {
    let columns = py
        .detach(|| table::beanstalkd_jobs(&dir, &files, now_ns))
        .map_err(os_err)?;
    Ok(to_python(py, columns))
}

/// Add the functions above to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(binlog_table_plan, m)?)?;
    m.add_function(wrap_pyfunction!(binlog_table_jobs, m)?)?;
    m.add_function(wrap_pyfunction!(binlog_table_records, m)?)?;
    m.add_function(wrap_pyfunction!(binlog_table_beanstalkd_plan, m)?)?;
    m.add_function(wrap_pyfunction!(binlog_table_beanstalkd_jobs, m)?)?;
    Ok(())
}
