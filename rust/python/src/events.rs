//! `beanpole._core.EventStream` (admin hook events and engine log lines) and the
//! signal wait behind `Server.serve_forever`.

use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use beanpole_engine::events::{Batch, EventKind, EventStream};
use beanpole_engine::server::Control;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;

/// One event as Python receives it:
/// `(kind, job_id, tube, priority, at, detail)`.
type EventTuple = (
    &'static str,
    Option<u64>,
    Option<String>,
    Option<u32>,
    f64,
    Option<String>,
);

/// The receiving end of a server's event queue.
#[pyclass(name = "EventStream", module = "beanpole._core", frozen)]
#[derive(Debug)]
pub struct PyEventStream {
    inner: Arc<EventStream>,
}

impl PyEventStream {
    pub fn new(inner: EventStream) -> PyEventStream {
        PyEventStream {
            inner: Arc::new(inner),
        }
    }
}

#[pymethods]
impl PyEventStream {
    /// Wait (without the GIL) up to `timeout` seconds, forever when None, for events
    /// and return up to `max` of them; an empty list when none came in time, None
    /// once the server has stopped and everything queued has been taken.
    #[pyo3(signature = (max = 1024, timeout = None))]
    fn next_batch(
        &self,
        py: Python<'_>,
        max: usize,
        timeout: Option<f64>,
    ) -> Option<Vec<EventTuple>> {
        let timeout = timeout.map(|t| Duration::from_secs_f64(t.max(0.0)));
        let stream = Arc::clone(&self.inner);
        match py.detach(move || stream.next_batch(max.max(1), timeout)) {
            Batch::Closed => None,
            Batch::Idle => Some(Vec::new()),
            Batch::Events(events) => Some(
                events
                    .into_iter()
                    .map(|e| {
                        (
                            e.kind.name(),
                            e.job_id,
                            e.tube.map(String::from),
                            e.priority,
                            e.at,
                            e.detail,
                        )
                    })
                    .collect(),
            ),
        }
    }
}

/// Parse hook kind names.
pub fn kinds(names: Vec<String>) -> PyResult<Vec<EventKind>> {
    names
        .iter()
        .map(|n| {
            EventKind::from_name(n)
                .filter(|k| *k != EventKind::Message)
                .ok_or_else(|| PyValueError::new_err(format!("unknown event kind {n:?}")))
        })
        .collect()
}

/// Every hook kind's name.
pub fn kind_names() -> Vec<&'static str> {
    EventKind::ALL
        .iter()
        .filter(|k| **k != EventKind::Message)
        .map(|k| k.name())
        .collect()
}

/// Wait until `fd` (Python's signal wakeup fd) is readable, the server has
/// finished, or `timeout` passes. Acts on the signals read at once, before Python
/// gets to run its handlers: a drain signal drains, a stop signal begins the stop.
/// Returns (server finished, signal numbers read).
pub fn wait_signal(
    control: &Control,
    fd: RawFd,
    timeout: Option<Duration>,
    stop: &[i32],
    drain: &[i32],
) -> PyResult<(bool, Vec<i32>)> {
    let done_fd = control
        .done()
        .wake_fd()
        .map_err(|e| PyOSError::new_err(format!("cannot wait for the server: {e}")))?;
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut seen = Vec::new();
    loop {
        let mut fds = [
            libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: done_fd,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ms = match deadline {
            None => -1,
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                i32::try_from(left.as_micros().div_ceil(1000)).unwrap_or(i32::MAX)
            }
        };
        // SAFETY: `fds` is a live array of two pollfd structs.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
        if n < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() == std::io::ErrorKind::Interrupted {
                // A signal whose handler is not ours; its byte (if any) is read next.
                if !seen.is_empty() {
                    break;
                }
                continue;
            }
            return Err(PyOSError::new_err(format!(
                "cannot wait for signals: {err}"
            )));
        }
        if fds[0].revents != 0 {
            read_signals(fd, &mut seen);
        }
        if fds[1].revents != 0 || !seen.is_empty() || n == 0 {
            break;
        }
    }
    for sig in &seen {
        if drain.contains(sig) {
            control.drain();
        }
        if stop.contains(sig) {
            control.begin_stop();
        }
    }
    Ok((control.done().wait(Some(Duration::ZERO)), seen))
}

/// Read every byte waiting on the (non-blocking) wakeup fd: one per signal.
fn read_signals(fd: RawFd, seen: &mut Vec<i32>) {
    let mut buf = [0u8; 64];
    loop {
        // SAFETY: reads at most buf.len() bytes into a live buffer.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            return;
        }
        seen.extend(buf[..n as usize].iter().map(|&b| i32::from(b)));
    }
}
