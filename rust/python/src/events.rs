//! `beanpole._core.EventStream` (admin hook events and engine log lines) and the
//! signal wait behind `Server.serve_forever`.

use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::ffi::c_void;

use beanpole_engine::events::{level, Batch, Event, EventKind, EventStream};
use beanpole_engine::server::Control;
use pyo3::exceptions::{PyException, PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFloat, PyString, PyTuple, PyType};
use pyo3::{ffi, intern};

/// The receiving end of a server's event queue.
#[pyclass(name = "EventStream", module = "beanpole._core", frozen)]
#[derive(Debug)]
pub struct PyEventStream {
    inner: Arc<EventStream>,
    /// Every kind's name as an interned Python string, indexed by the kind's number:
    /// made once, handed to each event with a reference count.
    kind_names: Vec<Py<PyString>>,
}

impl PyEventStream {
    pub fn new(py: Python<'_>, inner: EventStream) -> PyEventStream {
        PyEventStream {
            inner: Arc::new(inner),
            kind_names: EventKind::ALL
                .iter()
                .map(|k| PyString::intern(py, k.name()).unbind())
                .collect(),
        }
    }
}

#[pymethods]
impl PyEventStream {
    /// Wait (without the GIL) up to `timeout` seconds, forever when None, for up to
    /// `max` events and hand each to its hooks: `hooks` maps a kind to a tuple of
    /// callables, each called with an `event_type` (a named tuple of six fields:
    /// kind, job_id, tube, priority, at, detail). A hook that raises an `Exception`
    /// goes to `on_error(hook, event, exception)`; log lines go to
    /// `on_message(level, text)`. Returns how many events were taken (0 when none came
    /// in time), or None once the server has stopped and everything queued was taken.
    #[pyo3(signature = (event_type, hooks, on_error, on_message, max = 1024, timeout = None))]
    #[allow(clippy::too_many_arguments)] // the Python method's own parameters
    fn deliver(
        &self,
        py: Python<'_>,
        event_type: &Bound<'_, PyType>,
        hooks: &Bound<'_, PyDict>,
        on_error: &Bound<'_, PyAny>,
        on_message: &Bound<'_, PyAny>,
        max: usize,
        timeout: Option<f64>,
    ) -> PyResult<Option<usize>> {
        let maker = EventMaker::new(event_type)?;
        let timeout = timeout.map(|t| Duration::from_secs_f64(t.max(0.0)));
        let stream = Arc::clone(&self.inner);
        let events = match py.detach(move || stream.next_batch(max.max(1), timeout)) {
            Batch::Closed => return Ok(None),
            Batch::Idle => return Ok(Some(0)),
            Batch::Events(events) => events,
        };
        let taken = events.len();
        let mut kind_hooks = KindHooks {
            hooks,
            fns: vec![None; self.kind_names.len()],
        };
        let mut delivery = Delivery {
            on_error,
            none: py.None().into_bound(py),
            tubes: Vec::new(),
            stamp: None,
            priority: None,
        };
        // The event handed to the hooks; refilled for the next event when no hook
        // kept a reference to it.
        let mut current: Option<Bound<'_, PyAny>> = None;
        let mut fields = Fields::default();
        for event in &events {
            let name = self.kind_names[event.kind as usize].bind(py);
            if event.kind == EventKind::Message {
                let text = event.detail.as_deref().unwrap_or("");
                on_message.call1((event.priority.unwrap_or(level::INFO), text))?;
                continue;
            }
            let Some(fns) = kind_hooks.of(event.kind, name)? else {
                continue;
            };
            let spare = current.take().filter(|obj| {
                // SAFETY: a live object.
                unsafe { ffi::Py_REFCNT(obj.as_ptr()) == 1 }
            });
            let obj = match spare {
                Some(obj) => obj,
                None => {
                    fields = Fields::default();
                    maker.alloc(py)?
                }
            };
            delivery.fill(&obj, &mut fields, name, event)?;
            for hook in fns {
                delivery.call(hook, &obj)?;
            }
            current = Some(obj);
        }
        drop(current);
        self.inner.recycle(events);
        Ok(Some(taken))
    }
}

/// Builds `Event` named tuples straight from their six fields, as `tuple.__new__`
/// does for a subclass, without a call into Python per event.
struct EventMaker {
    ty: *mut ffi::PyTypeObject,
    alloc: ffi::allocfunc,
}

impl EventMaker {
    fn new(event_type: &Bound<'_, PyType>) -> PyResult<EventMaker> {
        let py = event_type.py();
        let fields = event_type.getattr(intern!(py, "_fields"))?;
        if !event_type.is_subclass_of::<PyTuple>()? || fields.len()? != FIELDS {
            return Err(PyTypeError::new_err(
                "event_type must be a named tuple of six fields",
            ));
        }
        let ty = event_type.as_type_ptr();
        // SAFETY: `ty` is a live type object; tp_alloc is a slot every type has.
        let slot = unsafe { ffi::PyType_GetSlot(ty, ffi::Py_tp_alloc) };
        if slot.is_null() {
            return Err(PyTypeError::new_err("event_type cannot be instantiated"));
        }
        // SAFETY: the tp_alloc slot holds a function of the allocfunc signature.
        let alloc = unsafe { std::mem::transmute::<*mut c_void, ffi::allocfunc>(slot) };
        Ok(EventMaker { ty, alloc })
    }

    /// A new event, every field NULL until [`Delivery::fill`] sets it.
    fn alloc<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        // SAFETY: `alloc` is the tuple subclass's allocator; it returns a new object
        // with room for FIELDS items, all NULL, or NULL with an exception set.
        unsafe {
            let obj = (self.alloc)(self.ty, FIELDS as ffi::Py_ssize_t);
            if obj.is_null() {
                return Err(PyErr::fetch(py));
            }
            Ok(Bound::from_owned_ptr(py, obj))
        }
    }
}

/// Fields in an `Event`.
const FIELDS: usize = 6;

/// Tube names made into Python strings during one batch, at most this many (found
/// by pointer: every event of a tube shares the tube's name).
const TUBE_CACHE: usize = 16;

/// Each kind's hooks, read from the hooks mapping at the kind's first event in a
/// batch (registration replaces a kind's tuple whole).
struct KindHooks<'a, 'py> {
    hooks: &'a Bound<'py, PyDict>,
    /// None until the kind's first event; then its hooks, empty when it has none.
    fns: Vec<Option<Vec<Bound<'py, PyAny>>>>,
}

impl<'py> KindHooks<'_, 'py> {
    fn of(
        &mut self,
        kind: EventKind,
        name: &Bound<'py, PyString>,
    ) -> PyResult<Option<&[Bound<'py, PyAny>]>> {
        let slot = &mut self.fns[kind as usize];
        if slot.is_none() {
            let found = match self.hooks.get_item(name)? {
                Some(v) => v.cast_into::<PyTuple>()?.iter().collect(),
                None => Vec::new(),
            };
            *slot = Some(found);
        }
        Ok(slot.as_deref().filter(|fns| !fns.is_empty()))
    }
}

/// The objects an event holds, by position: borrowed pointers, valid while the event
/// keeps them. A field whose new value is the object already there is left alone, so
/// the kind, tube, stamp and priority that repeat from event to event cost nothing.
#[derive(Default)]
struct Fields([Option<std::ptr::NonNull<ffi::PyObject>>; FIELDS]);

/// What one batch's delivery looks up once and reuses.
struct Delivery<'a, 'py> {
    on_error: &'a Bound<'py, PyAny>,
    /// None, held once per batch for the fields that are None.
    none: Bound<'py, PyAny>,
    /// The batch's events hold their tube names alive, so a pointer names one.
    tubes: Vec<(*const u8, Bound<'py, PyAny>)>,
    /// The last time stamp made: job events come many to a tick of the coarse clock.
    stamp: Option<(f64, Bound<'py, PyAny>)>,
    /// The last priority made: most jobs share a few priorities.
    priority: Option<(u32, Bound<'py, PyAny>)>,
}

impl<'py> Delivery<'_, 'py> {
    /// Set `obj`'s fields (an event nothing else refers to) to those of `event`.
    fn fill(
        &mut self,
        obj: &Bound<'py, PyAny>,
        fields: &mut Fields,
        name: &Bound<'py, PyString>,
        event: &Event,
    ) -> PyResult<()> {
        let py = obj.py();
        set_shared(obj, fields, 0, name.as_any())?;
        set_owned(obj, fields, 1, event.job_id.into_pyobject(py)?.into_any())?;
        match event.tube.as_ref() {
            Some(tube) => {
                let tube = self.tube_name(py, tube);
                set_shared(obj, fields, 2, &tube)?;
            }
            None => set_shared(obj, fields, 2, &self.none)?,
        }
        match event.priority {
            Some(pri) => {
                let pri = self.priority(py, pri)?;
                set_shared(obj, fields, 3, &pri)?;
            }
            None => set_shared(obj, fields, 3, &self.none)?,
        }
        let stamp = self.stamp(py, event.at);
        set_shared(obj, fields, 4, &stamp)?;
        match event.detail.as_deref() {
            Some(detail) => set_owned(obj, fields, 5, PyString::new(py, detail).into_any())?,
            None => set_shared(obj, fields, 5, &self.none)?,
        }
        Ok(())
    }

    fn stamp(&mut self, py: Python<'py>, at: f64) -> Bound<'py, PyAny> {
        match &self.stamp {
            Some((last, value)) if last.to_bits() == at.to_bits() => value.clone(),
            _ => {
                let value = PyFloat::new(py, at).into_any();
                self.stamp = Some((at, value.clone()));
                value
            }
        }
    }

    fn priority(&mut self, py: Python<'py>, pri: u32) -> PyResult<Bound<'py, PyAny>> {
        match &self.priority {
            Some((last, value)) if *last == pri => Ok(value.clone()),
            _ => {
                let value = pri.into_pyobject(py)?.into_any();
                self.priority = Some((pri, value.clone()));
                Ok(value)
            }
        }
    }

    fn tube_name(&mut self, py: Python<'py>, tube: &Arc<[u8]>) -> Bound<'py, PyAny> {
        let key = tube.as_ptr();
        if let Some((_, s)) = self.tubes.iter().find(|(p, _)| *p == key) {
            return s.clone();
        }
        let s = PyString::new(py, &String::from_utf8_lossy(tube)).into_any();
        if self.tubes.len() < TUBE_CACHE {
            self.tubes.push((key, s.clone()));
        }
        s
    }

    /// Call one hook; an `Exception` it raises goes to `on_error`, anything else
    /// (SystemExit, KeyboardInterrupt) ends the delivery.
    fn call(&self, hook: &Bound<'py, PyAny>, event: &Bound<'py, PyAny>) -> PyResult<()> {
        let py = hook.py();
        // SAFETY: both are live objects; the argument list ends with NULL as the
        // variadic call requires. The result (a new reference or NULL) is owned here.
        let result = unsafe {
            ffi::PyObject_CallFunctionObjArgs(
                hook.as_ptr(),
                event.as_ptr(),
                std::ptr::null_mut::<ffi::PyObject>(),
            )
        };
        if !result.is_null() {
            // SAFETY: a new reference from the call, released here.
            unsafe { ffi::Py_DecRef(result) };
            return Ok(());
        }
        let err = PyErr::fetch(py);
        if !err.is_instance_of::<PyException>(py) {
            return Err(err);
        }
        let exc = err.into_value(py);
        self.on_error.call1((hook, event, exc))?;
        Ok(())
    }
}

/// Put `value` (a reference shared with a cache) at `index` of `obj`, unless it is
/// there already.
fn set_shared(
    obj: &Bound<'_, PyAny>,
    fields: &mut Fields,
    index: usize,
    value: &Bound<'_, PyAny>,
) -> PyResult<()> {
    if fields.0[index].map(std::ptr::NonNull::as_ptr) == Some(value.as_ptr()) {
        return Ok(());
    }
    set_owned(obj, fields, index, value.clone())
}

/// Put `value` at `index` of `obj`, releasing what was there.
fn set_owned(
    obj: &Bound<'_, PyAny>,
    fields: &mut Fields,
    index: usize,
    value: Bound<'_, PyAny>,
) -> PyResult<()> {
    let ptr = value.into_ptr();
    fields.0[index] = std::ptr::NonNull::new(ptr);
    // SAFETY: `obj` is an event (a tuple of FIELDS items) with a reference count of
    // one, ours, so no one can see it change; PyTuple_SetItem takes over the new
    // reference and releases the item it replaces.
    if unsafe { ffi::PyTuple_SetItem(obj.as_ptr(), index as ffi::Py_ssize_t, ptr) } != 0 {
        fields.0[index] = None;
        return Err(PyErr::fetch(obj.py()));
    }
    Ok(())
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
