//! Server and job events for admin hooks and for the engine's log messages.
//!
//! The engine produces an [`Event`] only for the kinds someone asked for (a bit mask,
//! read with one relaxed atomic load where the event could happen, so a server with
//! no hooks pays one predictable branch per change). Events go into one bounded queue
//! that a consumer outside the engine (Python's hook thread) drains; when the queue is
//! full the event is dropped and counted, never waited for, so a slow consumer cannot
//! hold up a connection or the store lock.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Default capacity of the event queue (`--hook-queue`).
pub const DEFAULT_QUEUE: usize = 65_536;

/// How long the consumer waits for more events after taking a short batch: the
/// most a hook's call is delayed by batching.
const LINGER: Duration = Duration::from_millis(2);

/// The smallest queue that lingers: a queue must hold a few milliseconds of events at
/// the busiest server's rate (hundreds of thousands a second) to wait that long.
const LINGER_MIN_QUEUE: usize = 4096;

macro_rules! kinds {
    ($($variant:ident => $name:literal,)*) => {
        /// What happened. The names are the hook kinds users register for.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum EventKind {
            $($variant,)*
        }

        impl EventKind {
            /// Every kind, in declaration order.
            pub const ALL: &'static [EventKind] = &[$(EventKind::$variant,)*];

            /// The kind's name as users write it (`"pause-tube"`).
            pub fn name(self) -> &'static str {
                match self {
                    $(EventKind::$variant => $name,)*
                }
            }

            /// The kind named `name`, if there is one.
            pub fn from_name(name: &str) -> Option<EventKind> {
                match name {
                    $($name => Some(EventKind::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

kinds! {
    Put => "put",
    Reserve => "reserve",
    Delete => "delete",
    Release => "release",
    Bury => "bury",
    Kick => "kick",
    Touch => "touch",
    Timeout => "timeout",
    PauseTube => "pause-tube",
    Drain => "drain",
    Shutdown => "shutdown",
    LogError => "log-error",
    LogRecovered => "log-recovered",
    ConnectionRefused => "connection-refused",
    // Not a hook kind: a line for the host's logger (level in `priority`).
    Message => "message",
}

impl EventKind {
    fn bit(self) -> u32 {
        1 << (self as u8)
    }
}

/// Levels of [`EventKind::Message`] events, carried in `priority` (Python's
/// `logging` numbers).
pub mod level {
    pub const DEBUG: u32 = 10;
    pub const INFO: u32 = 20;
    pub const WARNING: u32 = 30;
    pub const ERROR: u32 = 40;
}

/// One event, as handed to the consumer.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub kind: EventKind,
    /// The job concerned; None for server events.
    pub job_id: Option<u64>,
    /// The tube's name, shared with the store's tube (no copy per event).
    pub tube: Option<Arc<[u8]>>,
    pub priority: Option<u32>,
    /// Wall-clock time, seconds since the Unix epoch.
    pub at: f64,
    pub detail: Option<String>,
}

impl Event {
    /// A server event (no job) of `kind`, stamped now.
    pub fn server(kind: EventKind, detail: Option<String>) -> Event {
        Event {
            kind,
            job_id: None,
            tube: None,
            priority: None,
            at: unix_now(),
            detail,
        }
    }
}

/// Seconds since the Unix epoch, as a float.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Seconds since the Unix epoch from the kernel's coarse clock: as of its last tick
/// (a few milliseconds at most), read in a few nanoseconds where the precise clock
/// costs several times that. For job events, which come at the server's full rate.
pub fn unix_now_coarse() -> f64 {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a live timespec for the call to fill.
        if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) } == 0 {
            return ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9;
        }
    }
    unix_now()
}

/// The queue between the producers and the consumer.
#[derive(Debug, Default)]
struct Queue {
    events: Vec<Event>,
    capacity: usize,
    /// Counts subscriptions; a stream of an earlier one has ended.
    generation: u64,
    /// No more events will come: the stream ends once `events` is empty.
    closed: bool,
    /// The consumer sleeps on the condition variable and must be woken.
    waiting: bool,
    /// An empty vector with room, handed back by the consumer: the next batch is
    /// gathered in it, so the queue's memory is allocated once, not per batch.
    spare: Vec<Event>,
}

/// Where the engine sends events. One per server, shared by the store, the
/// connections, the accept loop and the log's writer.
#[derive(Debug)]
pub struct EventHub {
    /// Kinds wanted, one bit each. Atomic so that every producer can test it
    /// without a lock; relaxed, since a change of mask needs no ordering with
    /// anything else (an event racing a registration may or may not be produced).
    mask: AtomicU32,
    /// The queue itself. A plain mutex around a vector: a producer holds it to push
    /// one event (tens of nanoseconds, never waiting for the consumer), the consumer
    /// to swap the whole vector out, so a batch costs one lock, not one per event.
    queue: Mutex<Queue>,
    /// Wakes a consumer that found the queue empty; producers signal it only when
    /// `Queue::waiting` says someone sleeps, so a busy queue makes no system calls.
    ready: Condvar,
    /// Events thrown away because the queue was full.
    dropped: AtomicU64,
    /// Whether log lines go to the consumer instead of stderr. Atomic for the same
    /// reason as `mask`.
    messages: AtomicBool,
    verbose: u8,
}

impl EventHub {
    pub fn new(verbose: u8) -> EventHub {
        EventHub {
            mask: AtomicU32::new(0),
            queue: Mutex::new(Queue::default()),
            ready: Condvar::new(),
            dropped: AtomicU64::new(0),
            messages: AtomicBool::new(false),
            verbose,
        }
    }

    /// Whether an event of `kind` would be produced.
    #[inline]
    pub fn wants(&self, kind: EventKind) -> bool {
        self.mask.load(Ordering::Relaxed) & kind.bit() != 0
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queue `event` if there is room; otherwise count it as dropped. Before any
    /// subscription and after [`EventHub::close`] events go nowhere.
    pub fn send(&self, event: Event) {
        let mut q = self.lock();
        if q.generation == 0 || q.closed {
            return;
        }
        if q.events.len() >= q.capacity {
            drop(q);
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        q.events.push(event);
        if q.waiting {
            q.waiting = false;
            drop(q);
            self.ready.notify_all();
        }
    }

    /// Queue a server event of `kind` if it is wanted.
    pub fn server_event(&self, kind: EventKind, detail: impl FnOnce() -> Option<String>) {
        if self.wants(kind) {
            self.send(Event::server(kind, detail()));
        }
    }

    /// A log line: to the consumer when one takes messages, else to stderr.
    /// Lines above `level::INFO` always count; lower ones only with `-V`.
    pub fn log(&self, lvl: u32, text: impl FnOnce() -> String) {
        if lvl < level::WARNING && self.verbose == 0 {
            return;
        }
        if self.messages.load(Ordering::Relaxed) {
            let mut event = Event::server(EventKind::Message, Some(text()));
            event.priority = Some(lvl);
            self.send(event);
        } else {
            eprintln!("beanpole: {}", text());
        }
    }

    /// Start a queue of `capacity` events and return its receiving end. A second
    /// subscription replaces the first: the earlier stream ends, and the new one
    /// takes what is queued.
    pub fn subscribe(self: &Arc<Self>, capacity: usize) -> EventStream {
        let mut q = self.lock();
        q.generation += 1;
        q.capacity = capacity.max(1);
        q.closed = false;
        let generation = q.generation;
        drop(q);
        self.ready.notify_all();
        EventStream {
            hub: Arc::clone(self),
            generation,
            linger: capacity >= LINGER_MIN_QUEUE,
            backlog: Mutex::new(VecDeque::new()),
        }
    }

    /// Produce events of exactly these kinds from now on.
    pub fn set_kinds(&self, kinds: &[EventKind]) {
        let mask = kinds.iter().fold(0, |m, k| m | k.bit());
        self.mask.store(mask, Ordering::Relaxed);
    }

    /// Send log lines to the consumer (true) or to stderr (false).
    pub fn set_messages(&self, on: bool) {
        self.messages.store(on, Ordering::Relaxed);
    }

    /// Events dropped so far because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Stop producing and end the stream once what is queued has been taken.
    pub fn close(&self) {
        self.mask.store(0, Ordering::Relaxed);
        self.messages.store(false, Ordering::Relaxed);
        self.lock().closed = true;
        self.ready.notify_all();
    }
}

/// The consumer's end of the event queue.
#[derive(Debug)]
pub struct EventStream {
    hub: Arc<EventHub>,
    /// The subscription this stream belongs to.
    generation: u64,
    /// Whether to wait [`LINGER`] after a short batch (not with a small queue, which
    /// such a wait could fill).
    linger: bool,
    /// Events taken from the hub beyond the batch asked for, handed out first by the
    /// next calls. A mutex because the host may share the stream between threads;
    /// only the one consumer thread ever locks it, so it is never contended.
    backlog: Mutex<VecDeque<Event>>,
}

/// What [`EventStream::next_batch`] found.
#[derive(Debug)]
pub enum Batch {
    Events(Vec<Event>),
    /// Nothing arrived within the timeout.
    Idle,
    /// The hub was closed and everything queued has been taken, or a newer
    /// subscription replaced this one.
    Closed,
}

impl EventStream {
    /// Wait up to `timeout` (forever when None) for events, then take up to `max`.
    pub fn next_batch(&self, max: usize, timeout: Option<Duration>) -> Batch {
        let max = max.max(1);
        {
            let mut backlog = self.backlog();
            if !backlog.is_empty() {
                let n = backlog.len().min(max);
                return Batch::Events(backlog.drain(..n).collect());
            }
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        let hub = &self.hub;
        let mut q = hub.lock();
        loop {
            if q.generation != self.generation {
                return Batch::Closed;
            }
            if !q.events.is_empty() {
                break;
            }
            if q.closed {
                return Batch::Closed;
            }
            q.waiting = true;
            q = match deadline {
                None => hub.ready.wait(q).unwrap_or_else(PoisonError::into_inner),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        q.waiting = false;
                        return Batch::Idle;
                    }
                    let (q, _) = hub
                        .ready
                        .wait_timeout(q, left)
                        .unwrap_or_else(PoisonError::into_inner);
                    q
                }
            };
        }
        if self.linger && q.events.len() < max {
            // A short batch means the consumer keeps up; waiting a moment lets
            // events gather so that it wakes a few hundred times a second at most,
            // not once per event (each wake is a system call on the producer's side,
            // made under the store lock).
            drop(q);
            std::thread::sleep(LINGER);
            q = hub.lock();
            if q.generation != self.generation {
                return Batch::Closed;
            }
        }
        let spare = std::mem::take(&mut q.spare);
        let mut taken = std::mem::replace(&mut q.events, spare);
        drop(q);
        if taken.len() > max {
            // More than one batch: the rest waits here, in order, for the next calls.
            let mut backlog = self.backlog();
            backlog.extend(taken.drain(max..));
        }
        Batch::Events(taken)
    }

    /// Give back a batch's vector once its events are handled, for the hub to
    /// gather the next batch in.
    pub fn recycle(&self, mut batch: Vec<Event>) {
        batch.clear();
        let mut q = self.hub.lock();
        if q.events.is_empty() && batch.capacity() > q.events.capacity() {
            q.events = batch;
        } else if batch.capacity() > q.spare.capacity() {
            q.spare = batch;
        }
    }

    fn backlog(&self) -> MutexGuard<'_, VecDeque<Event>> {
        self.backlog.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for &k in EventKind::ALL {
            assert_eq!(EventKind::from_name(k.name()), Some(k));
        }
        assert_eq!(EventKind::from_name("nope"), None);
        assert!(EventKind::ALL.len() <= 32);
    }

    #[test]
    fn only_wanted_kinds_are_produced() {
        let hub = Arc::new(EventHub::new(0));
        let stream = hub.subscribe(8);
        hub.set_kinds(&[EventKind::Drain]);
        hub.server_event(EventKind::Shutdown, || None);
        hub.server_event(EventKind::Drain, || Some("x".into()));
        hub.close();
        let Batch::Events(got) = stream.next_batch(10, Some(Duration::ZERO)) else {
            panic!("expected events");
        };
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].kind, EventKind::Drain);
        assert_eq!(got[0].detail.as_deref(), Some("x"));
        assert!(matches!(stream.next_batch(10, None), Batch::Closed));
    }

    #[test]
    fn a_full_queue_drops_and_counts() {
        let hub = Arc::new(EventHub::new(0));
        let stream = hub.subscribe(2);
        hub.set_kinds(&[EventKind::Drain]);
        for _ in 0..5 {
            hub.server_event(EventKind::Drain, || None);
        }
        assert_eq!(hub.dropped(), 3);
        let Batch::Events(got) = stream.next_batch(10, Some(Duration::ZERO)) else {
            panic!("expected events");
        };
        assert_eq!(got.len(), 2);
        assert!(matches!(
            stream.next_batch(10, Some(Duration::ZERO)),
            Batch::Idle
        ));
    }

    fn ids(batch: Batch) -> Vec<u64> {
        let Batch::Events(got) = batch else {
            panic!("expected events, got {batch:?}");
        };
        got.iter().map(|e| e.job_id.expect("a job event")).collect()
    }

    fn job(hub: &EventHub, id: u64) {
        let mut e = Event::server(EventKind::Put, None);
        e.job_id = Some(id);
        hub.send(e);
    }

    #[test]
    fn a_batch_beyond_max_is_handed_out_in_order() {
        let hub = Arc::new(EventHub::new(0));
        let stream = hub.subscribe(100);
        for id in 0..10 {
            job(&hub, id);
        }
        assert_eq!(
            ids(stream.next_batch(4, Some(Duration::ZERO))),
            [0, 1, 2, 3]
        );
        job(&hub, 10);
        assert_eq!(
            ids(stream.next_batch(4, Some(Duration::ZERO))),
            [4, 5, 6, 7]
        );
        assert_eq!(ids(stream.next_batch(4, Some(Duration::ZERO))), [8, 9]);
        assert_eq!(ids(stream.next_batch(4, Some(Duration::ZERO))), [10]);
    }

    #[test]
    fn a_recycled_vector_gathers_the_next_batch() {
        let hub = Arc::new(EventHub::new(0));
        let stream = hub.subscribe(100);
        for id in 0..50 {
            job(&hub, id);
        }
        let Batch::Events(got) = stream.next_batch(100, Some(Duration::ZERO)) else {
            panic!("expected events");
        };
        let (ptr, cap) = (got.as_ptr(), got.capacity());
        stream.recycle(got);
        job(&hub, 50);
        let Batch::Events(again) = stream.next_batch(100, Some(Duration::ZERO)) else {
            panic!("expected events");
        };
        assert_eq!((again.as_ptr(), again.capacity()), (ptr, cap));
        assert_eq!(again[0].job_id, Some(50));
    }

    #[test]
    fn a_new_subscription_ends_the_old_stream_and_takes_the_queue() {
        let hub = Arc::new(EventHub::new(0));
        let old = hub.subscribe(8);
        job(&hub, 1);
        let new = hub.subscribe(8);
        assert!(matches!(
            old.next_batch(8, Some(Duration::ZERO)),
            Batch::Closed
        ));
        assert_eq!(ids(new.next_batch(8, Some(Duration::ZERO))), [1]);
    }

    #[test]
    fn a_waiting_consumer_is_woken_by_the_first_event() {
        let hub = Arc::new(EventHub::new(0));
        let stream = hub.subscribe(8);
        let waiter = std::thread::spawn(move || ids(stream.next_batch(8, None)));
        // Wait until the consumer sleeps, so that the event must wake it.
        while !hub.lock().waiting {
            std::thread::yield_now();
        }
        job(&hub, 7);
        assert_eq!(waiter.join().expect("the consumer thread"), [7]);
    }
}
