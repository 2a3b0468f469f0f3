//! Batches whose items come from Arrow columns, for the Spark data sources: puts whose
//! bodies, priorities, delays, ttrs and tubes are read from Arrow buffers (no Python
//! object per job), the server of each key of a column (rendezvous hashing),
//! pipelined stats-job for the tube and priority of reserved jobs, and pipelined
//! reserve-job for the jobs of a replayed batch.

use std::cell::RefCell;
use std::collections::VecDeque;

use beanpole_client::batch::{pipeline, BatchFailure, Tally};
use beanpole_client::command::{expect, put_id, PutLines};
use beanpole_client::{shard, ClientError, Command, ErrorReply, Reply};
use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::items::{batch_error, id_of, unexpected, Arrow};
use super::PyClient;

/// The bytes of a contiguous buffer.
fn bytes_of(buf: &PyUntypedBuffer) -> &[u8] {
    // SAFETY: callers check the buffer is C-contiguous; it is read only here and kept
    // alive by `buf` for as long as the slice is used.
    unsafe { std::slice::from_raw_parts(buf.buf_ptr().cast::<u8>(), buf.len_bytes()) }
}

fn contiguous(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<PyUntypedBuffer> {
    let buf = PyUntypedBuffer::get(obj)?;
    if !buf.is_c_contiguous() {
        return Err(PyValueError::new_err(format!(
            "{what} buffer must be contiguous"
        )));
    }
    Ok(buf)
}

/// A fixed-width column: `(buffer, start)` whose items `start..start + len` are read.
struct Fixed {
    buf: PyUntypedBuffer,
    start: usize,
}

impl Fixed {
    fn new(obj: &Bound<'_, PyAny>, width: usize, len: usize, what: &str) -> PyResult<Fixed> {
        let (buf, start): (Bound<'_, PyAny>, usize) = obj.extract()?;
        let buf = contiguous(&buf, what)?;
        if buf.len_bytes() < (start + len) * width {
            return Err(PyValueError::new_err(format!("{what} buffer is too short")));
        }
        Ok(Fixed { buf, start })
    }

    fn u32(&self, i: usize) -> u32 {
        let at = (self.start + i) * 4;
        let raw = &bytes_of(&self.buf)[at..at + 4];
        u32::from_le_bytes(raw.try_into().unwrap_or([0; 4]))
    }
}

/// A put setting: one value for every job, or a uint32 column.
enum Setting {
    One(u32),
    Column(Fixed),
}

impl Setting {
    fn new(obj: &Bound<'_, PyAny>, len: usize, what: &str) -> PyResult<Setting> {
        if let Ok(v) = obj.extract::<u32>() {
            return Ok(Setting::One(v));
        }
        Fixed::new(obj, 4, len, what).map(Setting::Column)
    }

    fn get(&self, i: usize) -> u32 {
        match self {
            Setting::One(v) => *v,
            Setting::Column(c) => c.u32(i),
        }
    }
}

/// Per-job tubes: an int32 column of indices into `names` (a dictionary array).
struct Tubes {
    index: Fixed,
    names: Vec<String>,
}

impl Tubes {
    fn new(obj: &Bound<'_, PyAny>, len: usize) -> PyResult<Tubes> {
        let (buf, start, names): (Bound<'_, PyAny>, usize, Vec<String>) = obj.extract()?;
        let index = Fixed {
            buf: contiguous(&buf, "tube index")?,
            start,
        };
        if index.buf.len_bytes() < (start + len) * 4 {
            return Err(PyValueError::new_err("tube index buffer is too short"));
        }
        // Check every index up front, so a bad column fails before anything is sent.
        for i in 0..len {
            if index.u32(i) as usize >= names.len() {
                return Err(PyValueError::new_err("tube index out of the dictionary"));
            }
        }
        Ok(Tubes { index, names })
    }
}

/// A reserved job's tube and priority, None when the job is gone.
pub(super) type TubeAndPri = Option<(Py<PyBytes>, u32)>;

/// What a command in flight was: a `use` or the put of the row counted so far.
#[derive(Clone, Copy)]
enum Sent {
    Use,
    Put,
}

impl PyClient {
    /// See `NativeClient.put_many_columns` in `_core.pyi`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn put_columns(
        &self,
        py: Python<'_>,
        arrow: Arrow,
        pri: &Bound<'_, PyAny>,
        delay: &Bound<'_, PyAny>,
        ttr: &Bound<'_, PyAny>,
        tubes: Option<&Bound<'_, PyAny>>,
        window: usize,
    ) -> PyResult<Py<PyBytes>> {
        let len = arrow.len();
        let pri = Setting::new(pri, len, "priority")?;
        let delay = Setting::new(delay, len, "delay")?;
        let ttr = Setting::new(ttr, len, "ttr")?;
        let tubes = tubes.map(|t| Tubes::new(t, len)).transpose()?;
        let result = py.detach(|| {
            // Kinds of the commands sent and not yet answered, oldest first; kept
            // only with per-row tubes (without, every command is a put).
            let sent: RefCell<VecDeque<Sent>> = RefCell::new(VecDeque::new());
            let tracked = tubes.is_some();
            let mut tally: Tally<u64> = Tally::default();
            // One allocation for the ids, not a doubling per power of two.
            tally.done.reserve(len);
            let mut conn = self.lock();
            let mut next = 0usize;
            let mut using: Option<u32> = None;
            let mut lines = PutLines::default();
            let data = arrow.data_bytes();
            let result = pipeline(
                &mut conn,
                window,
                None,
                |q, room| -> Result<(), ClientError> {
                    while next < len && q.len() < room {
                        if let Some(t) = &tubes {
                            let want = t.index.u32(next);
                            if using != Some(want) {
                                q.push(Command::Use(t.names[want as usize].as_bytes()))?;
                                sent.borrow_mut().push_back(Sent::Use);
                                using = Some(want);
                            }
                        }
                        let (a, b) = arrow
                            .range(next)
                            .map_err(|e| ClientError::Invalid(e.to_string()))?;
                        let (p, d, t) = (pri.get(next), delay.get(next), ttr.get(next));
                        q.push_put(&mut lines, p, d, t, &data[a..b]);
                        if tracked {
                            sent.borrow_mut().push_back(Sent::Put);
                        }
                        next += 1;
                    }
                    Ok(())
                },
                |_, reply| {
                    let kind = if tracked {
                        sent.borrow_mut().pop_front().unwrap_or(Sent::Put)
                    } else {
                        Sent::Put
                    };
                    match kind {
                        Sent::Use => match reply {
                            Reply::Using(_) => tally.failed.is_none(),
                            other => {
                                let e = match expect(&Command::Use(b""), other) {
                                    Err(e) => e,
                                    Ok(r) => unexpected(&r),
                                };
                                if tally.failed.is_none() {
                                    // The row whose tube could not be used.
                                    tally.failed = Some((tally.answered, e));
                                }
                                false
                            }
                        },
                        Sent::Put => {
                            let outcome = put_id(reply);
                            let row = tally.answered;
                            tally.record(row, outcome)
                        }
                    }
                },
            );
            let result = result.map(|e| e.map(|e| PyValueError::new_err(e.to_string())));
            tally.finish(result).map_err(Box::new)
        });
        let ids = result.map_err(|f| batch_error(py, "put_many_columns", f, id_of))?;
        // Written straight into the bytes object handed to Python.
        let packed = PyBytes::new_with(py, ids.len() * 8, |out| {
            for (slot, id) in out.chunks_exact_mut(8).zip(&ids) {
                slot.copy_from_slice(&id.to_le_bytes());
            }
            Ok(())
        })?;
        Ok(packed.unbind())
    }

    /// See `NativeClient.stats_job_many` in `_core.pyi`.
    pub(super) fn tube_and_priority(
        &self,
        py: Python<'_>,
        ids: Vec<u64>,
        window: usize,
    ) -> PyResult<Vec<TubeAndPri>> {
        let rows = self
            .each_found(py, &ids, window, Command::StatsJob, |reply| match reply {
                Reply::Ok(body) => Ok(tube_and_pri(&body)),
                other => Err(other),
            })
            .map_err(|f| {
                batch_error(py, "stats_job_many", f, |py, v: Option<(Vec<u8>, u32)>| {
                    Ok(match v {
                        None => py.None(),
                        Some((t, p)) => (PyBytes::new(py, &t), p)
                            .into_pyobject(py)?
                            .into_any()
                            .unbind(),
                    })
                })
            })?;
        Ok(rows
            .into_iter()
            .map(|r| r.map(|(t, p)| (PyBytes::new(py, &t).unbind(), p)))
            .collect())
    }

    /// See `NativeClient.ttr_many` in `_core.pyi`.
    pub(super) fn ttrs(
        &self,
        py: Python<'_>,
        ids: Vec<u64>,
        window: usize,
    ) -> PyResult<Vec<Option<u32>>> {
        self.each_found(py, &ids, window, Command::StatsJob, |reply| match reply {
            Reply::Ok(body) => Ok(field_u32(&body, b"ttr: ")),
            other => Err(other),
        })
        .map_err(|f| {
            batch_error(py, "ttr_many", f, |py, v: Option<u32>| {
                Ok(v.into_pyobject(py)?.into_any().unbind())
            })
        })
    }

    /// See `NativeClient.touch_many` in `_core.pyi`.
    pub(super) fn touches(
        &self,
        py: Python<'_>,
        ids: Vec<u64>,
        window: usize,
    ) -> PyResult<Vec<bool>> {
        let rows = self
            .each_found(py, &ids, window, Command::Touch, |reply| match reply {
                Reply::Touched => Ok(Some(())),
                other => Err(other),
            })
            .map_err(|f| {
                batch_error(py, "touch_many", f, |py, v: Option<()>| {
                    Ok(v.is_some()
                        .into_pyobject(py)?
                        .to_owned()
                        .into_any()
                        .unbind())
                })
            })?;
        Ok(rows.into_iter().map(|r| r.is_some()).collect())
    }

    /// See `NativeClient.reserve_job_many` in `_core.pyi`.
    pub(super) fn reserve_jobs(
        &self,
        py: Python<'_>,
        ids: Vec<u64>,
        window: usize,
    ) -> PyResult<Vec<Reserved>> {
        let jobs = self
            .each_found(py, &ids, window, Command::ReserveJob, |reply| match reply {
                Reply::Reserved { id, body } => Ok(Some((id, body))),
                other => Err(other),
            })
            .map_err(|f| {
                batch_error(
                    py,
                    "reserve_job_many",
                    f,
                    |py, v: Option<(u64, Vec<u8>)>| {
                        Ok(match v {
                            None => py.None(),
                            Some((id, body)) => (id, PyBytes::new(py, &body))
                                .into_pyobject(py)?
                                .into_any()
                                .unbind(),
                        })
                    },
                )
            })?;
        Ok(jobs
            .into_iter()
            .map(|j| j.map(|(id, body)| (id, PyBytes::new(py, &body).unbind())))
            .collect())
    }

    /// `command(id)` for every id, pipelined, where NOT_FOUND means None: `found`
    /// turns each other reply into a value, or gives back one it did not expect.
    fn each_found<T: Send>(
        &self,
        py: Python<'_>,
        ids: &[u64],
        window: usize,
        command: fn(u64) -> Command<'static>,
        found: fn(Reply) -> Result<Option<T>, Reply>,
    ) -> Found<T> {
        py.detach(|| {
            let mut tally: Tally<Option<T>> = Tally::default();
            let mut conn = self.lock();
            let mut next = 0usize;
            let result = pipeline(
                &mut conn,
                window,
                None,
                |q, room| -> Result<(), ClientError> {
                    let end = (next + room).min(ids.len());
                    for id in &ids[next..end] {
                        q.push(command(*id))?;
                    }
                    next = end;
                    Ok(())
                },
                |index, reply| {
                    let outcome = match reply {
                        Reply::Error(ErrorReply::NotFound) => Ok(None),
                        other => found(other).map_err(|other| match expect(&command(0), other) {
                            Err(e) => e,
                            Ok(r) => unexpected(&r),
                        }),
                    };
                    tally.record(index, outcome)
                },
            );
            let result = result.map(|e| e.map(|e| PyValueError::new_err(e.to_string())));
            tally.finish(result).map_err(Box::new)
        })
    }
}

/// What [`PyClient::each_found`] returns: a value or None per id, or how it failed.
type Found<T> = Result<Vec<Option<T>>, Box<BatchFailure<Option<T>, PyErr>>>;

/// One job of a pipelined reserve-job: its id and body, or None when not found.
pub(super) type Reserved = Option<(u64, Py<PyBytes>)>;

/// A whole-number field (`name` with its `": "`) of a stats-job body.
fn field_u32(body: &[u8], name: &[u8]) -> Option<u32> {
    body.split(|&b| b == b'\n')
        .find_map(|line| line.strip_prefix(name))
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|s| s.trim().parse().ok())
}

/// The `tube` and `pri` fields of a stats-job body.
fn tube_and_pri(body: &[u8]) -> Option<(Vec<u8>, u32)> {
    let mut tube = None;
    let mut pri = None;
    for line in body.split(|&b| b == b'\n') {
        if let Some(v) = line.strip_prefix(b"tube: ") {
            let v = match v {
                [b'"', inner @ .., b'"'] => inner,
                _ => v,
            };
            tube = Some(v.to_vec());
        } else if let Some(v) = line.strip_prefix(b"pri: ") {
            pri = std::str::from_utf8(v)
                .ok()
                .and_then(|s| s.trim().parse().ok());
        }
    }
    Some((tube?, pri?))
}

/// See `beanpole._core.shard_column` in `_core.pyi`.
#[pyfunction]
#[pyo3(signature = (offsets, data, wide, start, length, validity, servers, first))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn shard_column(
    py: Python<'_>,
    offsets: &Bound<'_, PyAny>,
    data: &Bound<'_, PyAny>,
    wide: bool,
    start: usize,
    length: usize,
    validity: Option<&Bound<'_, PyAny>>,
    servers: Vec<String>,
    first: usize,
) -> PyResult<Py<PyBytes>> {
    if servers.is_empty() {
        return Err(PyValueError::new_err(
            "shard_column needs at least one server",
        ));
    }
    let arrow = Arrow::new(offsets, data, wide, start, length)?;
    let validity = validity.map(|v| contiguous(v, "validity")).transpose()?;
    if let Some(v) = &validity {
        if v.len_bytes() * 8 < start + length {
            return Err(PyValueError::new_err("validity buffer is too short"));
        }
    }
    let n = servers.len();
    let out = py.detach(|| -> PyResult<Vec<u8>> {
        let data = arrow.data_bytes();
        let bits = validity.as_ref().map(bytes_of);
        let mut out = Vec::with_capacity(length * 4);
        for i in 0..length {
            let k = start + i;
            let valid = match bits {
                None => true,
                Some(b) => b[k / 8] & (1 << (k % 8)) != 0,
            };
            let pick = if valid {
                let (a, b) = arrow.range(i)?;
                shard::pick(&servers, &data[a..b])
            } else {
                // A row without a key goes round robin, as a put without a key does.
                (first + i) % n
            };
            out.extend_from_slice(&(pick as u32).to_le_bytes());
        }
        Ok(out)
    })?;
    Ok(PyBytes::new(py, &out).unbind())
}
