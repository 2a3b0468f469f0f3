//! Server and job events for admin hooks and for the engine's log messages.
//!
//! The engine produces an [`Event`] only for the kinds someone asked for (a bit mask,
//! read with one relaxed atomic load where the event could happen, so a server with
//! no hooks pays one predictable branch per change). Events go into one bounded queue
//! that a consumer outside the engine (Python's hook thread) drains; when the queue is
//! full the event is dropped and counted, never waited for, so a slow consumer cannot
//! hold up a connection or the store lock.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
    pub tube: Option<Box<str>>,
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

/// Where the engine sends events. One per server, shared by the store, the
/// connections, the accept loop and the log's writer.
#[derive(Debug)]
pub struct EventHub {
    /// Kinds wanted, one bit each. Atomic so that every producer can test it
    /// without a lock; relaxed, since a change of mask needs no ordering with
    /// anything else (an event racing a registration may or may not be produced).
    mask: AtomicU32,
    /// The only sender of the queue, once a consumer has subscribed. A mutex so
    /// that [`EventHub::close`] can drop it (which ends the consumer's loop once it
    /// has drained what is queued); it is held only for a `try_send`, which never
    /// blocks.
    tx: Mutex<Option<SyncSender<Event>>>,
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
            tx: Mutex::new(None),
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

    /// Queue `event` if there is room; otherwise count it as dropped.
    pub fn send(&self, event: Event) {
        let tx = self.tx.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(tx) = tx.as_ref() else { return };
        match tx.try_send(event) {
            Ok(()) | Err(TrySendError::Disconnected(_)) => {}
            Err(TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
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
    /// subscription replaces the first (whose stream then ends).
    pub fn subscribe(&self, capacity: usize) -> EventStream {
        let (tx, rx) = mpsc::sync_channel(capacity.max(1));
        *self.tx.lock().unwrap_or_else(PoisonError::into_inner) = Some(tx);
        EventStream {
            rx: Mutex::new(rx),
            linger: capacity >= LINGER_MIN_QUEUE,
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
        self.tx
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }
}

/// The consumer's end of the event queue.
#[derive(Debug)]
pub struct EventStream {
    /// A mutex because the std receiver is not `Sync` and the stream is shared with
    /// a host that may call from several threads; only one thread receives at a time.
    rx: Mutex<Receiver<Event>>,
    /// Whether to wait [`LINGER`] after a short batch (not with a small queue, which
    /// such a wait could fill).
    linger: bool,
}

/// What [`EventStream::next_batch`] found.
#[derive(Debug)]
pub enum Batch {
    Events(Vec<Event>),
    /// Nothing arrived within the timeout.
    Idle,
    /// The hub was closed and everything queued has been taken.
    Closed,
}

impl EventStream {
    /// Wait up to `timeout` (forever when None) for events, then take up to `max`.
    pub fn next_batch(&self, max: usize, timeout: Option<Duration>) -> Batch {
        let rx = self.rx.lock().unwrap_or_else(PoisonError::into_inner);
        let first = match timeout {
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(t) => rx.recv_timeout(t),
        };
        let first = match first {
            Ok(e) => e,
            Err(RecvTimeoutError::Timeout) => return Batch::Idle,
            Err(RecvTimeoutError::Disconnected) => return Batch::Closed,
        };
        let mut batch = Vec::with_capacity(max.clamp(1, 1024));
        batch.push(first);
        drain_into(&rx, &mut batch, max);
        if self.linger && batch.len() < max {
            // A short batch means the consumer keeps up; waiting a moment lets
            // events gather so that it wakes a few hundred times a second at most,
            // not once per event (each wake is a system call on the producer's side,
            // made under the store lock).
            std::thread::sleep(LINGER);
            drain_into(&rx, &mut batch, max);
        }
        Batch::Events(batch)
    }
}

/// Take what is queued, without waiting, until `batch` holds `max` events.
fn drain_into(rx: &Receiver<Event>, batch: &mut Vec<Event>, max: usize) {
    while batch.len() < max {
        match rx.try_recv() {
            Ok(e) => batch.push(e),
            Err(_) => break,
        }
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
        let hub = EventHub::new(0);
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
        let hub = EventHub::new(0);
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
}
