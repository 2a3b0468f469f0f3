//! Every deadline the store must act on, in one min-heap.
//!
//! Entries are never removed when they become irrelevant (a job deleted before its
//! delay ends, a touched TTR, a reserve answered before its timeout); instead each
//! entry names what it is for, and the store checks on expiry that it still applies.
//! So that stale entries cannot pile up, the heap is rebuilt without them once it
//! holds more than twice the live deadlines.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// What a deadline is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Timer {
    /// A delayed job (by id) becomes ready.
    Delay(u64),
    /// A reserved job's (by id) time to run is up.
    Ttr(u64),
    /// A blocked reserve (connection slot, wait sequence) times out or enters the
    /// safety margin of a job it holds.
    Wait(u32, u64),
    /// A tube's pause (tube slot, pause sequence) ends.
    Unpause(u32, u64),
    /// A detached session (connection slot, detach sequence) ends.
    Session(u32, u64),
}

#[derive(Debug, Default)]
pub struct Timers {
    heap: BinaryHeap<Reverse<(u64, Timer)>>,
}

impl Timers {
    pub fn push(&mut self, at: u64, timer: Timer) {
        self.heap.push(Reverse((at, timer)));
    }

    /// The earliest deadline, possibly of a stale entry.
    pub fn next(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse((at, _))| *at)
    }

    /// Take the earliest entry if it is due at `now`.
    pub fn pop_due(&mut self, now: u64) -> Option<(u64, Timer)> {
        match self.heap.peek() {
            Some(Reverse((at, _))) if *at <= now => self.heap.pop().map(|Reverse(e)| e),
            _ => None,
        }
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    #[allow(dead_code)]
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Rebuild without stale entries when they dominate. `live` is the number of
    /// deadlines that can still matter; `keep` says whether an entry is one of them.
    pub fn compact(&mut self, live: usize, keep: impl Fn(u64, Timer) -> bool) {
        if self.heap.len() <= 2 * live + 64 {
            return;
        }
        let mut entries: Vec<_> = std::mem::take(&mut self.heap)
            .into_vec()
            .into_iter()
            .filter(|Reverse((at, t))| keep(*at, *t))
            .collect();
        // A deadline armed twice at the same instant (touch, or release and
        // reserve-job, within one clock reading) leaves identical entries that all
        // pass `keep`; one of them is enough.
        entries.sort_unstable();
        entries.dedup();
        self.heap = entries.into();
    }
}
