//! What the bindings need besides the class: the error classes of
//! `beanpole.client.errors`, batch items taken from Python (bodies, per-job settings,
//! Arrow buffers) and `BatchError`.

use beanpole_client::batch::{BatchFailure, Cause, Queue};
use beanpole_client::{ClientError, Command, ErrorReply, Reply};
use pyo3::buffer::{PyBuffer, PyUntypedBuffer};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyIterator, PyList, PyString, PyTuple};

pub(super) const ERRORS: &str = "beanpole.client.errors";

pub(super) fn error_class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import(ERRORS)?.getattr(name)
}

/// The exception instance for a client error.
pub(super) fn error_value<'py>(py: Python<'py>, e: &ClientError) -> PyResult<Bound<'py, PyAny>> {
    let msg = e.to_string();
    let name = match e {
        ClientError::Reply(r) => match r {
            ErrorReply::BadFormat => "BadFormatError",
            ErrorReply::Buried(id) => {
                return error_class(py, "BuriedError")?.call1((msg, *id));
            }
            ErrorReply::DeadlineSoon => "DeadlineSoonError",
            ErrorReply::Draining => "DrainingError",
            ErrorReply::ExpectedCrlf => "ExpectedCrlfError",
            ErrorReply::InternalError => "InternalError",
            ErrorReply::JobTooBig => "JobTooBigError",
            ErrorReply::NotFound => "NotFoundError",
            ErrorReply::NotIgnored => "NotIgnoredError",
            ErrorReply::OutOfMemory => "OutOfMemoryError",
            ErrorReply::TimedOut => "TimedOutError",
            ErrorReply::UnknownCommand => "UnknownCommandError",
        },
        ClientError::Connect { .. } => "ConnectFailedError",
        ClientError::Io { .. } | ClientError::Closed { .. } => "ConnectionLostError",
        ClientError::TimedOut { .. } => "ConnectionTimeoutError",
        ClientError::Unexpected { .. } => "UnknownResponseError",
        ClientError::NotConnected { .. } => "NotConnectedError",
        ClientError::Tls { .. } => "TLSError",
        ClientError::TlsSetup(_) => "TLSConfigError",
        ClientError::Invalid(_) => {
            return Ok(PyValueError::new_err(msg)
                .into_value(py)
                .into_bound(py)
                .into_any())
        }
    };
    error_class(py, name)?.call1((msg,))
}

pub(super) fn to_py(py: Python<'_>, e: &ClientError) -> PyErr {
    match error_value(py, e) {
        Ok(v) => PyErr::from_value(v),
        Err(err) => err,
    }
}

/// A per-item setting of a batch: one value for all, or one per item.
pub(super) enum Each {
    Fixed(u32),
    Items(Py<PyIterator>),
}

impl Each {
    pub(super) fn new(v: &Bound<'_, PyAny>) -> PyResult<Each> {
        if let Ok(n) = v.extract::<u32>() {
            return Ok(Each::Fixed(n));
        }
        Ok(Each::Items(PyIterator::from_object(v)?.unbind()))
    }

    pub(super) fn next(&self, py: Python<'_>, what: &str) -> PyResult<u32> {
        match self {
            Each::Fixed(n) => Ok(*n),
            Each::Items(it) => match it.bind(py).clone().next() {
                Some(v) => v?.extract::<u32>(),
                None => Err(PyValueError::new_err(format!(
                    "{what} has fewer items than the bodies"
                ))),
            },
        }
    }

    pub(super) fn fixed(&self) -> Option<u32> {
        match self {
            Each::Fixed(n) => Some(*n),
            Each::Items(_) => None,
        }
    }
}

/// Raise a batch failure as `BatchError`.
pub(super) fn batch_error<T>(
    py: Python<'_>,
    what: &str,
    failure: Box<BatchFailure<T, PyErr>>,
    convert: impl Fn(Python<'_>, T) -> PyResult<Py<PyAny>>,
) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let failure = *failure;
        let reason = match failure.cause {
            Cause::Client(e) => error_value(py, &e)?,
            Cause::Source(e) => e.into_value(py).into_bound(py).into_any(),
        };
        let msg = format!(
            "{what} stopped at item {}: {}",
            failure.index,
            reason.str()?.to_string_lossy()
        );
        let done = PyList::empty(py);
        for v in failure.done {
            done.append(convert(py, v)?)?;
        }
        let after = PyList::empty(py);
        for (i, v) in failure.after {
            after.append((i, convert(py, v)?))?;
        }
        let err =
            error_class(py, "BatchError")?.call1((msg, failure.index, reason, done, after))?;
        Ok(PyErr::from_value(err))
    };
    build().unwrap_or_else(|e| e)
}

pub(super) fn id_of(py: Python<'_>, id: u64) -> PyResult<Py<PyAny>> {
    Ok(id.into_pyobject(py)?.into_any().unbind())
}

/// The bytes of a body from Python: bytes, str (UTF-8, when allowed) or a buffer.
pub(super) fn push_body(
    q: &mut Queue<'_>,
    item: &Bound<'_, PyAny>,
    utf8: bool,
    pri: u32,
    delay: u32,
    ttr: u32,
) -> PyResult<()> {
    let put = |q: &mut Queue<'_>, body: &[u8]| {
        q.push(Command::Put {
            pri,
            delay,
            ttr,
            body,
        })
        .map_err(|e| PyValueError::new_err(e.to_string()))
    };
    if let Ok(b) = item.cast::<PyBytes>() {
        return put(q, b.as_bytes());
    }
    if let Ok(s) = item.cast::<PyString>() {
        if !utf8 {
            return Err(PyTypeError::new_err(
                "cannot send a str body with encoding=None",
            ));
        }
        return put(q, s.to_str()?.as_bytes());
    }
    let buf = PyBuffer::<u8>::get(item)?;
    put(q, &buf.to_vec(item.py())?)
}

/// Raw pointers to an Arrow array's offsets and data, kept alive by their buffers.
pub(super) struct Arrow {
    offsets: PyUntypedBuffer,
    data: PyUntypedBuffer,
    /// Offsets are i64 (large_binary, large_string) rather than i32.
    wide: bool,
    start: usize,
    len: usize,
}

impl Arrow {
    /// Take the buffers of an array of `len` items starting at item `start`.
    pub(super) fn new(
        offsets: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
        wide: bool,
        start: usize,
        len: usize,
    ) -> PyResult<Arrow> {
        let arrow = Arrow {
            offsets: PyUntypedBuffer::get(offsets)?,
            data: PyUntypedBuffer::get(data)?,
            wide,
            start,
            len,
        };
        if !arrow.offsets.is_c_contiguous() || !arrow.data.is_c_contiguous() {
            return Err(PyValueError::new_err("arrow buffers must be contiguous"));
        }
        // Check the last offset up front, so a bad array fails before anything is sent.
        if len > 0 {
            arrow.range(len - 1)?;
        }
        Ok(arrow)
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The byte range of item `i` (0-based in the array's slice).
    pub(super) fn range(&self, i: usize) -> PyResult<(usize, usize)> {
        let width = if self.wide { 8 } else { 4 };
        let read = |k: usize| -> PyResult<usize> {
            let at = (self.start + k) * width;
            let bytes = self.offsets_bytes();
            let raw = bytes
                .get(at..at + width)
                .ok_or_else(|| PyValueError::new_err("arrow offsets buffer is too short"))?;
            let v = if self.wide {
                i64::from_le_bytes(raw.try_into().unwrap_or([0; 8]))
            } else {
                i64::from(i32::from_le_bytes(raw.try_into().unwrap_or([0; 4])))
            };
            usize::try_from(v).map_err(|_| PyValueError::new_err("negative arrow offset"))
        };
        let (a, b) = (read(i)?, read(i + 1)?);
        if a > b || b > self.data.len_bytes() {
            return Err(PyValueError::new_err(
                "arrow offsets out of the data buffer",
            ));
        }
        Ok((a, b))
    }

    pub(super) fn offsets_bytes(&self) -> &[u8] {
        // SAFETY: the buffer is C-contiguous (checked in `new`), read-only here, and
        // kept alive by `self.offsets` for as long as the slice is used.
        unsafe {
            std::slice::from_raw_parts(
                self.offsets.buf_ptr().cast::<u8>(),
                self.offsets.len_bytes(),
            )
        }
    }

    pub(super) fn data_bytes(&self) -> &[u8] {
        // SAFETY: as for `offsets_bytes`.
        unsafe {
            std::slice::from_raw_parts(self.data.buf_ptr().cast::<u8>(), self.data.len_bytes())
        }
    }
}

pub(super) fn unexpected(reply: &Reply) -> ClientError {
    ClientError::Unexpected {
        addr: String::new(),
        line: reply.describe(),
    }
}

/// A job id from an int or anything with an integer `id` attribute (a Job).
pub(super) fn id_from(item: &Bound<'_, PyAny>) -> PyResult<u64> {
    if let Ok(id) = item.extract::<u64>() {
        return Ok(id);
    }
    match item.getattr("id") {
        Ok(id) => id.extract::<u64>(),
        Err(_) => Err(PyTypeError::new_err(format!(
            "expected a job id or a Job, got {}",
            item.get_type().name()?
        ))),
    }
}

pub(super) fn job_tuple(py: Python<'_>, job: (u64, Vec<u8>)) -> PyResult<Py<PyAny>> {
    let (id, body) = job;
    Ok(PyTuple::new(
        py,
        [
            id.into_pyobject(py)?.into_any(),
            PyBytes::new(py, &body).into_any(),
        ],
    )?
    .into_any()
    .unbind())
}
