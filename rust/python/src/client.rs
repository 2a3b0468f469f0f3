//! `beanpole._core.NativeClient`: one client connection for `beanpole.client`.
//!
//! Every method releases the GIL while it talks to the server. The connection sits
//! behind a mutex that is only ever locked with the GIL released, so a thread
//! waiting for the mutex never holds the GIL that the owner may need back (batches
//! take the GIL again, briefly, to pull the next chunk of items from Python).
//! Errors are raised as the classes of `beanpole.client.errors`.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use beanpole_client::batch::{pipeline, Queue, Tally};
use beanpole_client::command::{self, PutLines};
use beanpole_client::{
    Address, ClientError, Closer, Command, Connection, ErrorReply, Reply, TlsFiles, TlsSettings,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyIterator};

mod columns;
mod items;

pub(crate) use columns::shard_column;

use items::{batch_error, id_from, id_of, job_tuple, push_body, to_py, unexpected, Arrow, Each};

/// One client connection.
#[derive(Debug)]
#[pyclass(name = "NativeClient", module = "beanpole._core", frozen)]
pub struct PyClient {
    /// A mutex because Python threads may share a client; one call at a time owns
    /// the socket. Locked only with the GIL released (see the module comment).
    conn: Mutex<Connection>,
    /// Shuts the socket down from another thread, to wake a blocked call.
    closer: Option<Closer>,
    address: String,
}

impl PyClient {
    fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn call(&self, py: Python<'_>, cmd: Command<'_>) -> PyResult<Reply> {
        py.detach(|| self.lock().call(cmd))
            .map_err(|e| to_py(py, &e))
    }

    fn job(py: Python<'_>, reply: Reply) -> PyResult<(u64, Py<PyBytes>)> {
        match reply {
            Reply::Reserved { id, body } | Reply::Found { id, body } => {
                Ok((id, PyBytes::new(py, &body).unbind()))
            }
            other => Err(to_py(py, &unexpected(&other))),
        }
    }

    fn unit(&self, py: Python<'_>, cmd: Command<'_>) -> PyResult<()> {
        self.call(py, cmd).map(|_| ())
    }

    fn count(&self, py: Python<'_>, cmd: Command<'_>) -> PyResult<u64> {
        match self.call(py, cmd)? {
            Reply::Watching(n) | Reply::Kicked(Some(n)) | Reply::Inserted(n) => Ok(n),
            other => Err(to_py(py, &unexpected(&other))),
        }
    }

    fn body(&self, py: Python<'_>, cmd: Command<'_>) -> PyResult<Py<PyBytes>> {
        match self.call(py, cmd)? {
            Reply::Ok(body) | Reply::Using(body) => Ok(PyBytes::new(py, &body).unbind()),
            other => Err(to_py(py, &unexpected(&other))),
        }
    }

    /// Run a batch of id commands (delete, release, bury): the ids done, in order.
    fn id_batch(
        &self,
        py: Python<'_>,
        what: &str,
        ids: &Bound<'_, PyAny>,
        window: usize,
        make: impl Fn(u64) -> Command<'static> + Send + Sync,
    ) -> PyResult<Vec<u64>> {
        let ids = PyIterator::from_object(ids)?.unbind();
        let result = py.detach(|| {
            // Ids sent and not yet answered: pushed by the source, popped per reply.
            let in_flight: RefCell<VecDeque<u64>> = RefCell::new(VecDeque::new());
            let mut tally = Tally::default();
            let mut conn = self.lock();
            let result = pipeline(
                &mut conn,
                window,
                None,
                |q, room| {
                    Python::attach(|py| {
                        let it = ids.bind(py);
                        for _ in 0..room {
                            let Some(item) = it.clone().next() else { break };
                            let id = id_from(&item?)?;
                            q.push(make(id))
                                .map_err(|e| PyValueError::new_err(e.to_string()))?;
                            in_flight.borrow_mut().push_back(id);
                        }
                        Ok(())
                    })
                },
                |index, reply| {
                    let id = in_flight.borrow_mut().pop_front().unwrap_or_default();
                    let outcome = command::expect(&make(id), reply).map(|_| id);
                    tally.record(index, outcome)
                },
            );
            tally.finish(result).map_err(Box::new)
        });
        result.map_err(|f| batch_error(py, what, f, id_of))
    }
}

/// A positive, finite number of seconds, or no limit.
fn timeout_of(timeout: Option<f64>) -> PyResult<Option<Duration>> {
    match timeout {
        None => Ok(None),
        Some(t) if t > 0.0 && t.is_finite() => Ok(Some(Duration::from_secs_f64(t))),
        Some(t) => Err(PyValueError::new_err(format!(
            "timeout {t} must be a positive number of seconds or None"
        ))),
    }
}

/// Our own duplicate of `fd`, checked to be a Unix socket.
fn unix_stream_from(fd: i32) -> PyResult<UnixStream> {
    // SAFETY: fcntl only reads its arguments; a bad descriptor is refused with EBADF.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        let err = std::io::Error::last_os_error();
        return Err(PyValueError::new_err(format!(
            "file descriptor {fd}: {err}"
        )));
    }
    // SAFETY: `dup` was just made by fcntl and nothing else owns it.
    let owned = unsafe { OwnedFd::from_raw_fd(dup) };
    let stream = UnixStream::from(owned);
    // getsockname on a descriptor that is not a Unix socket fails here.
    match stream.local_addr() {
        Ok(_) => Ok(stream),
        Err(err) => Err(PyValueError::new_err(format!(
            "file descriptor {fd} is not a Unix socket: {err}"
        ))),
    }
}

fn name(tube: &str) -> &[u8] {
    tube.as_bytes()
}

#[pymethods]
impl PyClient {
    #[new]
    #[pyo3(signature = (address, timeout = None, *, tls = false, ca = None, cert = None, key = None, server_name = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        address: &str,
        timeout: Option<f64>,
        tls: bool,
        ca: Option<std::path::PathBuf>,
        cert: Option<std::path::PathBuf>,
        key: Option<std::path::PathBuf>,
        server_name: Option<String>,
    ) -> PyResult<PyClient> {
        let addr = Address::parse(address).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let timeout = timeout_of(timeout)?;
        let settings = match (tls, ca) {
            (false, None) if cert.is_none() && key.is_none() && server_name.is_none() => None,
            (false, _) => {
                return Err(PyValueError::new_err(
                    "ca, cert, key and server_name need tls=True",
                ))
            }
            (true, None) => return Err(PyValueError::new_err("tls=True needs a ca file")),
            (true, Some(ca)) => {
                let files = TlsFiles {
                    ca,
                    cert,
                    key,
                    server_name,
                };
                Some(
                    py.detach(|| TlsSettings::load(&files))
                        .map_err(|e| to_py(py, &e))?,
                )
            }
        };
        let conn = py
            .detach(|| Connection::open(&addr, timeout, settings.as_ref()))
            .map_err(|e| to_py(py, &e))?;
        Ok(PyClient {
            closer: conn.closer(),
            conn: Mutex::new(conn),
            address: addr.to_string(),
        })
    }

    /// A client over `fd`, a connected Unix stream socket (one end of a socket pair
    /// whose other end a relay copies to and from the server). The descriptor is
    /// duplicated: the caller still owns, and closes, its own. `address` names the
    /// server in messages.
    #[staticmethod]
    #[pyo3(signature = (fd, address, timeout = None))]
    fn from_fd(py: Python<'_>, fd: i32, address: &str, timeout: Option<f64>) -> PyResult<PyClient> {
        let timeout = timeout_of(timeout)?;
        let stream = unix_stream_from(fd)?;
        let conn = py
            .detach(|| Connection::adopt(stream, address.to_owned(), timeout))
            .map_err(|e| to_py(py, &e))?;
        Ok(PyClient {
            closer: conn.closer(),
            conn: Mutex::new(conn),
            address: address.to_owned(),
        })
    }

    #[getter]
    fn address(&self) -> &str {
        &self.address
    }

    #[getter]
    fn connected(&self, py: Python<'_>) -> bool {
        py.detach(|| self.lock().is_open())
    }

    /// Shut the socket down now, from any thread: a call blocked on it fails.
    fn interrupt(&self) {
        if let Some(c) = &self.closer {
            c.close();
        }
    }

    fn close(&self, py: Python<'_>) {
        self.interrupt();
        py.detach(|| self.lock().close());
    }

    fn put(&self, py: Python<'_>, body: &[u8], pri: u32, delay: u32, ttr: u32) -> PyResult<u64> {
        self.count(
            py,
            Command::Put {
                pri,
                delay,
                ttr,
                body,
            },
        )
    }

    #[pyo3(signature = (timeout = None))]
    fn reserve(&self, py: Python<'_>, timeout: Option<u32>) -> PyResult<(u64, Py<PyBytes>)> {
        let cmd = match timeout {
            None => Command::Reserve,
            Some(t) => Command::ReserveWithTimeout(t),
        };
        let reply = self.call(py, cmd)?;
        Self::job(py, reply)
    }

    fn reserve_job(&self, py: Python<'_>, id: u64) -> PyResult<(u64, Py<PyBytes>)> {
        let reply = self.call(py, Command::ReserveJob(id))?;
        Self::job(py, reply)
    }

    fn delete(&self, py: Python<'_>, id: u64) -> PyResult<()> {
        self.unit(py, Command::Delete(id))
    }

    fn release(&self, py: Python<'_>, id: u64, pri: u32, delay: u32) -> PyResult<()> {
        self.unit(py, Command::Release { id, pri, delay })
    }

    fn bury(&self, py: Python<'_>, id: u64, pri: u32) -> PyResult<()> {
        self.unit(py, Command::Bury { id, pri })
    }

    fn touch(&self, py: Python<'_>, id: u64) -> PyResult<()> {
        self.unit(py, Command::Touch(id))
    }

    fn kick(&self, py: Python<'_>, bound: u32) -> PyResult<u64> {
        self.count(py, Command::Kick(bound))
    }

    fn kick_job(&self, py: Python<'_>, id: u64) -> PyResult<()> {
        self.unit(py, Command::KickJob(id))
    }

    /// `which` is an id, or "ready", "delayed" or "buried".
    fn peek(&self, py: Python<'_>, which: &Bound<'_, PyAny>) -> PyResult<(u64, Py<PyBytes>)> {
        let cmd = if let Ok(id) = which.extract::<u64>() {
            Command::Peek(id)
        } else {
            match which.extract::<String>()?.as_str() {
                "ready" => Command::PeekReady,
                "delayed" => Command::PeekDelayed,
                "buried" => Command::PeekBuried,
                other => return Err(PyValueError::new_err(format!("cannot peek {other:?}"))),
            }
        };
        let reply = self.call(py, cmd)?;
        Self::job(py, reply)
    }

    #[pyo3(name = "use")]
    fn use_(&self, py: Python<'_>, tube: &str) -> PyResult<Py<PyBytes>> {
        self.body(py, Command::Use(name(tube)))
    }

    fn watch(&self, py: Python<'_>, tube: &str) -> PyResult<u64> {
        self.count(py, Command::Watch(name(tube)))
    }

    fn ignore(&self, py: Python<'_>, tube: &str) -> PyResult<u64> {
        self.count(py, Command::Ignore(name(tube)))
    }

    fn using(&self, py: Python<'_>) -> PyResult<Py<PyBytes>> {
        self.body(py, Command::ListTubeUsed)
    }

    /// The YAML body of a stats or list command: `what` is "stats", "job", "tube",
    /// "tubes" or "watching".
    #[pyo3(signature = (what, arg = None))]
    fn yaml(
        &self,
        py: Python<'_>,
        what: &str,
        arg: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyBytes>> {
        let tube;
        let cmd = match (what, arg) {
            ("stats", None) => Command::Stats,
            ("tubes", None) => Command::ListTubes,
            ("watching", None) => Command::ListTubesWatched,
            ("job", Some(id)) => Command::StatsJob(id.extract::<u64>()?),
            ("tube", Some(t)) => {
                tube = t.extract::<String>()?;
                Command::StatsTube(tube.as_bytes())
            }
            _ => return Err(PyValueError::new_err(format!("no such listing {what:?}"))),
        };
        self.body(py, cmd)
    }

    fn pause_tube(&self, py: Python<'_>, tube: &str, delay: u32) -> PyResult<()> {
        self.unit(
            py,
            Command::PauseTube {
                name: name(tube),
                delay,
            },
        )
    }

    /// Put every body of an iterable, pipelined; the ids in order.
    #[pyo3(signature = (bodies, pri, delay, ttr, window, utf8 = true))]
    #[allow(clippy::too_many_arguments)]
    fn put_many(
        &self,
        py: Python<'_>,
        bodies: &Bound<'_, PyAny>,
        pri: &Bound<'_, PyAny>,
        delay: &Bound<'_, PyAny>,
        ttr: &Bound<'_, PyAny>,
        window: usize,
        utf8: bool,
    ) -> PyResult<Vec<u64>> {
        let bodies = PyIterator::from_object(bodies)?.unbind();
        let (pri, delay, ttr) = (Each::new(pri)?, Each::new(delay)?, Each::new(ttr)?);
        self.put_batch(py, window, |q, room| {
            Python::attach(|py| {
                let it = bodies.bind(py);
                for _ in 0..room {
                    let Some(item) = it.clone().next() else { break };
                    let item = item?;
                    let (p, d, t) = (
                        pri.next(py, "priority")?,
                        delay.next(py, "delay")?,
                        ttr.next(py, "ttr")?,
                    );
                    push_body(q, &item, utf8, p, d, t)?;
                }
                Ok(())
            })
        })
    }

    /// Put the items of an Arrow binary or string array, given its offsets and data
    /// buffers, without a Python object per item.
    #[pyo3(signature = (offsets, data, wide, start, length, pri, delay, ttr, window))]
    #[allow(clippy::too_many_arguments)]
    fn put_many_arrow(
        &self,
        py: Python<'_>,
        offsets: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
        wide: bool,
        start: usize,
        length: usize,
        pri: &Bound<'_, PyAny>,
        delay: &Bound<'_, PyAny>,
        ttr: &Bound<'_, PyAny>,
        window: usize,
    ) -> PyResult<Vec<u64>> {
        let arrow = Arrow::new(offsets, data, wide, start, length)?;
        let (pri, delay, ttr) = (Each::new(pri)?, Each::new(delay)?, Each::new(ttr)?);
        let fixed = (pri.fixed(), delay.fixed(), ttr.fixed());
        let mut next = 0usize;
        let mut lines = PutLines::default();
        self.put_batch(py, window, |q, room| {
            let end = (next + room).min(arrow.len());
            let data = arrow.data_bytes();
            for i in next..end {
                let (a, b) = arrow.range(i)?;
                let (p, d, t) = match fixed {
                    (Some(p), Some(d), Some(t)) => (p, d, t),
                    _ => Python::attach(|py| -> PyResult<_> {
                        Ok((
                            pri.next(py, "priority")?,
                            delay.next(py, "delay")?,
                            ttr.next(py, "ttr")?,
                        ))
                    })?,
                };
                q.push_put(&mut lines, p, d, t, &data[a..b]);
            }
            next = end;
            Ok(())
        })
    }

    /// Put the items of an Arrow binary or string array with per-item settings and
    /// tubes read from Arrow buffers too; the ids as packed little-endian u64.
    #[pyo3(signature = (offsets, data, wide, start, length, pri, delay, ttr, tubes, window))]
    #[allow(clippy::too_many_arguments)]
    fn put_many_columns(
        &self,
        py: Python<'_>,
        offsets: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
        wide: bool,
        start: usize,
        length: usize,
        pri: &Bound<'_, PyAny>,
        delay: &Bound<'_, PyAny>,
        ttr: &Bound<'_, PyAny>,
        tubes: Option<&Bound<'_, PyAny>>,
        window: usize,
    ) -> PyResult<Py<PyBytes>> {
        let arrow = Arrow::new(offsets, data, wide, start, length)?;
        self.put_columns(py, arrow, pri, delay, ttr, tubes, window)
    }

    /// Pipelined stats-job: each job's tube and priority, None when not found.
    #[pyo3(signature = (ids, window))]
    fn stats_job_many(
        &self,
        py: Python<'_>,
        ids: Vec<u64>,
        window: usize,
    ) -> PyResult<Vec<columns::TubeAndPri>> {
        self.tube_and_priority(py, ids, window)
    }

    /// Pipelined stats-job: each job's time to run in seconds, None when not found.
    #[pyo3(signature = (ids, window))]
    fn ttr_many(&self, py: Python<'_>, ids: Vec<u64>, window: usize) -> PyResult<Vec<Option<u32>>> {
        self.ttrs(py, ids, window)
    }

    /// Pipelined touch: for each job, whether it was touched (False: not found, or
    /// not reserved by this connection).
    #[pyo3(signature = (ids, window))]
    fn touch_many(&self, py: Python<'_>, ids: Vec<u64>, window: usize) -> PyResult<Vec<bool>> {
        self.touches(py, ids, window)
    }

    /// Pipelined reserve-job: each job's id and body, None when not found.
    #[pyo3(signature = (ids, window))]
    fn reserve_job_many(
        &self,
        py: Python<'_>,
        ids: Vec<u64>,
        window: usize,
    ) -> PyResult<Vec<columns::Reserved>> {
        self.reserve_jobs(py, ids, window)
    }

    /// Pipelined `reserve-with-timeout`: the first waits `timeout` seconds, the rest
    /// take what is ready; stops at the first TIMED_OUT or DEADLINE_SOON.
    #[pyo3(signature = (n, timeout, window))]
    fn reserve_many(
        &self,
        py: Python<'_>,
        n: usize,
        timeout: u32,
        window: usize,
    ) -> PyResult<Vec<(u64, Py<PyBytes>)>> {
        let mut tally: Tally<(u64, Vec<u8>)> = Tally::default();
        let result = py.detach(|| {
            let mut conn = self.lock();
            let mut sent = 0usize;
            if n > 0 && timeout > 0 {
                // Wait for the first job alone, so pipelined waits do not add up.
                match conn.call(Command::ReserveWithTimeout(timeout)) {
                    Ok(Reply::Reserved { id, body }) => {
                        tally.record(0, Ok((id, body)));
                        sent = 1;
                    }
                    Ok(other) => {
                        tally.record(0, Err(unexpected(&other)));
                    }
                    Err(ClientError::Reply(ErrorReply::TimedOut | ErrorReply::DeadlineSoon)) => {
                        return Ok(None);
                    }
                    Err(e) if e.is_connection() => return Err(e),
                    Err(e) => {
                        tally.record(0, Err(e));
                    }
                }
                if sent == 0 {
                    return Ok(None);
                }
            }
            let mut stopped = false;
            pipeline(
                &mut conn,
                window,
                Some(Some(0)),
                |q, room| {
                    let k = room.min(n - sent);
                    for _ in 0..k {
                        q.push(Command::ReserveWithTimeout(0))?;
                    }
                    sent += k;
                    Ok::<(), ClientError>(())
                },
                |index, reply| match reply {
                    Reply::Reserved { id, body } => {
                        // A job reserved after a TIMED_OUT is ours all the same.
                        tally.done.push((id, body));
                        tally.answered += 1;
                        !stopped && tally.failed.is_none()
                    }
                    Reply::Error(ErrorReply::TimedOut | ErrorReply::DeadlineSoon) => {
                        stopped = true;
                        tally.answered += 1;
                        false
                    }
                    other => {
                        let e = command::expect(&Command::ReserveWithTimeout(0), other)
                            .err()
                            .unwrap_or_else(|| ClientError::Invalid("reserve".into()));
                        tally.record(index, Err(e))
                    }
                },
            )
        });
        let result: Result<Option<PyErr>, ClientError> = match result {
            Ok(Some(e)) => Err(e),
            Ok(None) => Ok(None),
            Err(e) => Err(e),
        };
        let jobs = tally
            .finish(result)
            .map_err(|f| batch_error(py, "reserve_many", Box::new(f), job_tuple))?;
        Ok(jobs
            .into_iter()
            .map(|(id, body)| (id, PyBytes::new(py, &body).unbind()))
            .collect())
    }

    #[pyo3(signature = (ids, window))]
    fn delete_many(
        &self,
        py: Python<'_>,
        ids: &Bound<'_, PyAny>,
        window: usize,
    ) -> PyResult<Vec<u64>> {
        self.id_batch(py, "delete_many", ids, window, Command::Delete)
    }

    #[pyo3(signature = (ids, pri, delay, window))]
    fn release_many(
        &self,
        py: Python<'_>,
        ids: &Bound<'_, PyAny>,
        pri: u32,
        delay: u32,
        window: usize,
    ) -> PyResult<Vec<u64>> {
        self.id_batch(py, "release_many", ids, window, move |id| {
            Command::Release { id, pri, delay }
        })
    }

    #[pyo3(signature = (ids, pri, window))]
    fn bury_many(
        &self,
        py: Python<'_>,
        ids: &Bound<'_, PyAny>,
        pri: u32,
        window: usize,
    ) -> PyResult<Vec<u64>> {
        self.id_batch(py, "bury_many", ids, window, move |id| Command::Bury {
            id,
            pri,
        })
    }
}

impl PyClient {
    /// Run a put batch whose commands come from `fill`.
    fn put_batch(
        &self,
        py: Python<'_>,
        window: usize,
        fill: impl FnMut(&mut Queue<'_>, usize) -> PyResult<()> + Send,
    ) -> PyResult<Vec<u64>> {
        let result = py.detach(|| {
            let mut tally = Tally::default();
            let mut conn = self.lock();
            let result = pipeline(&mut conn, window, None, fill, |index, reply| {
                let outcome = command::put_id(reply);
                tally.record(index, outcome)
            });
            tally.finish(result).map_err(Box::new)
        });
        result.map_err(|f| batch_error(py, "put_many", f, id_of))
    }
}
