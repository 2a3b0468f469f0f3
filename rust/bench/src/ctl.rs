//! State shared by every task of a run: job numbering, stop flag, counters, error report,
//! and the per-job record that proves each job was inserted once and reserved once.

use std::net::SocketAddr;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{mpsc, OnceLock};
use std::time::{Duration, Instant};

use crate::args::Opts;
use crate::conn::Cancel;
use crate::hist::Hist;

/// How many error messages are printed to stderr (all are counted).
const MAX_PRINTED: u64 = 20;

/// Per-job record: the server id, plus who has seen it.
const SEEN_PUT: u64 = 1 << 63;
const SEEN_RESERVED: u64 = 1 << 62;
const ID_MASK: u64 = SEEN_RESERVED - 1;
const CHUNK_BITS: u32 = 16;
const CHUNK: usize = 1 << CHUNK_BITS;
/// Jobs tracked at most (2^30); beyond that bodies are still checked, ids are not.
const MAX_CHUNKS: usize = 1 << 14;

/// `seq -> server id` with "inserted" and "reserved" marks, filled lazily in 64 Ki chunks.
#[derive(Debug)]
pub struct Slots {
    chunks: Box<[OnceLock<Box<[AtomicU64]>>]>,
}

impl Slots {
    pub fn new(jobs: Option<u64>) -> Self {
        let n = jobs.map_or(MAX_CHUNKS, |j| {
            (j as usize).div_ceil(CHUNK).clamp(1, MAX_CHUNKS)
        });
        Slots {
            chunks: (0..n).map(|_| OnceLock::new()).collect(),
        }
    }

    fn slot(&self, seq: u64) -> Option<&AtomicU64> {
        let c = self.chunks.get((seq >> CHUNK_BITS) as usize)?;
        let chunk = c.get_or_init(|| (0..CHUNK).map(|_| AtomicU64::new(0)).collect());
        Some(&chunk[(seq as usize) & (CHUNK - 1)])
    }

    /// Record that job `seq` got server id `id` from `flag`'s side; an error text when the
    /// job was already seen from this side or the other side saw another id.
    fn mark(&self, seq: u64, id: u64, flag: u64) -> Result<(), String> {
        let Some(slot) = self.slot(seq) else {
            return Ok(());
        };
        let mut old = slot.load(Relaxed);
        loop {
            if old & flag != 0 {
                return Err(if flag == SEEN_PUT {
                    format!("job #{seq} was inserted twice")
                } else {
                    format!(
                        "job #{seq} (id {}) was reserved a second time, as id {id}",
                        old & ID_MASK
                    )
                });
            }
            let known = old & ID_MASK;
            if known != 0 && known != id {
                return Err(format!(
                    "job #{seq}: inserted as id {}, reserved as id {}",
                    if flag == SEEN_PUT { id } else { known },
                    if flag == SEEN_PUT { known } else { id }
                ));
            }
            match slot.compare_exchange_weak(old, old | id | flag, Relaxed, Relaxed) {
                Ok(_) => return Ok(()),
                Err(now) => old = now,
            }
        }
    }

    pub fn inserted(&self, seq: u64, id: u64) -> Result<(), String> {
        self.mark(seq, id, SEEN_PUT)
    }

    pub fn reserved(&self, seq: u64, id: u64) -> Result<(), String> {
        self.mark(seq, id, SEEN_RESERVED)
    }
}

/// What a task hands back when it ends.
#[derive(Debug)]
pub struct TaskStats {
    /// Operations that count for this scenario (0 for tasks that only feed the load).
    pub ops: u64,
    /// Commands sent and answered.
    pub commands: u64,
    /// Latency samples (ns), when this task measures latency.
    pub hist: Option<Box<Hist>>,
    /// When this task completed its last counted operation.
    pub last_op: Option<Instant>,
}

impl TaskStats {
    pub fn new(measure: bool) -> Self {
        TaskStats {
            ops: 0,
            commands: 0,
            hist: measure.then(|| Box::new(Hist::new())),
            last_op: None,
        }
    }
}

#[derive(Debug)]
pub struct Ctl {
    pub opts: Opts,
    pub addr: SocketAddr,
    /// Zero of the body timestamps.
    pub epoch: Instant,
    pub pad: Vec<u8>,
    pub slots: Option<Slots>,
    pub stop: AtomicBool,
    /// Next job number to hand out.
    pub next_seq: AtomicU64,
    /// Job numbers at or above this are not handed out (u64::MAX: no limit).
    pub seq_limit: AtomicU64,
    /// When the measured phase started (ns since epoch), for open-loop pacing.
    pub started_ns: AtomicU64,
    /// No new batch starts after this (ns since epoch; u64::MAX: none).
    pub deadline_ns: AtomicU64,
    /// Puts acknowledged (INSERTED).
    pub produced: AtomicU64,
    /// Jobs reserved (RESERVED with a good body).
    pub delivered: AtomicU64,
    pub producers_alive: AtomicUsize,
    /// Producers wait here while the window of unreserved jobs is full.
    pub space: tokio::sync::Notify,
    pub space_wanted: AtomicBool,
    pub errors: AtomicU64,
    /// Counted operations so far (the watchdog's progress signal).
    pub progress: AtomicU64,
    /// Tasks that finished their setup in the current phase.
    pub ready: AtomicUsize,
    pub start: tokio::sync::watch::Sender<bool>,
    pub results: mpsc::Sender<TaskStats>,
}

impl Ctl {
    pub fn new(
        opts: Opts,
        addr: SocketAddr,
        slots: Option<Slots>,
        results: mpsc::Sender<TaskStats>,
    ) -> Self {
        let pad = crate::body::pad_source(opts.body_size);
        Ctl {
            opts,
            addr,
            epoch: Instant::now(),
            pad,
            slots,
            stop: AtomicBool::new(false),
            next_seq: AtomicU64::new(0),
            seq_limit: AtomicU64::new(u64::MAX),
            started_ns: AtomicU64::new(0),
            deadline_ns: AtomicU64::new(u64::MAX),
            produced: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
            producers_alive: AtomicUsize::new(0),
            space: tokio::sync::Notify::new(),
            space_wanted: AtomicBool::new(false),
            errors: AtomicU64::new(0),
            progress: AtomicU64::new(0),
            ready: AtomicUsize::new(0),
            start: tokio::sync::watch::channel(false).0,
            results,
        }
    }

    pub fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    pub fn ns_of(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch).as_nanos() as u64
    }

    pub fn instant_of(&self, ns: u64) -> Instant {
        self.epoch + Duration::from_nanos(ns)
    }

    pub fn stopping(&self) -> bool {
        self.stop.load(Relaxed)
    }

    /// Count an error (and print the first few).
    pub fn error(&self, msg: impl std::fmt::Display) {
        let n = self.errors.fetch_add(1, Relaxed);
        if n < MAX_PRINTED {
            eprintln!("beanpole-bench: error: {msg}");
        } else if n == MAX_PRINTED {
            eprintln!("beanpole-bench: (further errors are counted, not printed)");
        }
    }

    /// Count an error that leaves the run unable to go on, and stop every task.
    pub fn fatal(&self, msg: impl std::fmt::Display) {
        self.error(msg);
        self.stop.store(true, Relaxed);
    }

    pub fn past_deadline(&self) -> bool {
        let d = self.deadline_ns.load(Relaxed);
        d != u64::MAX && self.now_ns() >= d
    }

    /// Claim up to `n` job numbers for the next batch; empty when the run's jobs are all
    /// handed out, its duration is over, or it is stopping.
    pub fn claim(&self, n: usize) -> Range<u64> {
        if self.stopping() || self.past_deadline() {
            return 0..0;
        }
        let limit = self.seq_limit.load(Relaxed);
        let first = self.next_seq.fetch_add(n as u64, Relaxed);
        if first >= limit {
            return 0..0;
        }
        first..(first + n as u64).min(limit)
    }

    /// Jobs handed out to producers and not yet reserved.
    fn unreserved(&self) -> u64 {
        let claimed = self
            .next_seq
            .load(Relaxed)
            .min(self.seq_limit.load(Relaxed));
        claimed.saturating_sub(self.delivered.load(Relaxed))
    }

    /// Wait until `n` more jobs fit in the window (`window` 0: no limit).
    pub async fn window_space(&self, window: u64, n: usize) {
        let fits = || window == 0 || self.unreserved() + n as u64 <= window || self.stopping();
        while !fits() {
            let notified = self.space.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            self.space_wanted.store(true, SeqCst);
            if fits() {
                return;
            }
            let _ = tokio::time::timeout(crate::conn::POLL, notified).await;
        }
    }

    /// Consumers call this after reserving jobs: wake producers waiting for space.
    pub fn reserved_some(&self) {
        if self.space_wanted.load(Relaxed) && self.space_wanted.swap(false, SeqCst) {
            self.space.notify_waiters();
        }
    }

    /// Every producer has ended and every acknowledged put has been reserved.
    pub fn all_delivered(&self) -> bool {
        self.producers_alive.load(Relaxed) == 0
            && self.delivered.load(Relaxed) >= self.produced.load(Relaxed)
    }

    /// Setup done: wait for the phase's start signal.
    pub async fn ready_and_wait(&self) -> bool {
        let mut rx = self.start.subscribe();
        self.ready.fetch_add(1, Relaxed);
        let ok = rx.wait_for(|&go| go).await.is_ok();
        ok && !self.stopping()
    }

    pub fn finish(&self, stats: TaskStats) {
        let _ = self.results.send(stats);
    }
}

/// Producers and setup stop only when the run stops.
#[derive(Debug)]
pub struct UntilStop<'a>(pub &'a Ctl);

impl Cancel for UntilStop<'_> {
    fn cancelled(&self) -> bool {
        self.0.stopping()
    }
}

/// Consumers in the flow scenarios also stop once every job put has been reserved (their
/// remaining blocking reserves will never be answered).
#[derive(Debug)]
pub struct UntilDelivered<'a>(pub &'a Ctl);

impl Cancel for UntilDelivered<'_> {
    fn cancelled(&self) -> bool {
        self.0.stopping() || self.0.all_delivered()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_catch_duplicates_and_mismatches() {
        let s = Slots::new(Some(10));
        assert!(s.inserted(3, 7).is_ok());
        assert!(s.reserved(3, 7).is_ok());
        assert!(s.reserved(3, 7).is_err());
        assert!(s.inserted(3, 7).is_err());
        // Reserved before the producer read its INSERTED: checked the other way round.
        assert!(s.reserved(4, 9).is_ok());
        assert!(s.inserted(4, 8).is_err());
        assert!(s.inserted(5, 1).is_ok());
        assert!(s.reserved(5, 2).is_err());
        // Beyond capacity: not tracked.
        assert!(s.inserted(1 << 40, 1).is_ok());
    }
}
