//! How long a leader's proposer holds the next entry back once the entry
//! before it is answered: until the passes that answer released have come
//! back, within [`LINGER_MAX`] ([`Linger`]).
//!
//! Every entry costs each node a round of fixed costs whatever it carries: a
//! message each way between the leader and each follower, an fsync on every
//! node, and the wakeups of the threads that carry them (on a virtual machine
//! a wakeup of a thread on another core is dear). With one entry in flight and
//! the next proposed as soon as it is answered, the clients of a closed loop
//! fall into two cohorts: the passes queued while an entry was in flight make
//! the next entry, and the clients that entry's answer released come back while
//! it is in flight, so they wait for the entry after it. Each entry then
//! carries half of the clients, and each put waits for two rounds. Waiting,
//! after an answer, until as many bytes of passes are queued as the answered
//! entry carried plus those queued before (the cohort just released back as
//! well) merges the two: one entry per round carries every client, and the
//! fixed costs are paid half as often.
//!
//! Clients that do not come back at once (an open loop, a client doing other
//! things) would make every entry wait: when a wait fails, the next
//! [`FIRST_SKIP`] entries are proposed at once, and each further failure
//! doubles that (up to [`MOST_SKIP`]); a wait that succeeds sets it back. A wait
//! fails when it runs out ([`LINGER_MAX`]), or when passes go on coming after
//! it was met: in a closed loop every client then waits for the entry it made,
//! and few passes queue during that entry's flight; in an open loop they queue
//! at their own rate, and each wait would gather more than the one before. A
//! lone client is never held back: its pass alone meets the target.
//!
//! Imports nothing of the node: the proposer (`propose.rs`) asks it.

use std::time::Duration;

/// The longest an entry is held back for passes to come back. tokio's timer
/// ends it on the millisecond tick after it: 2-3 ms.
pub const LINGER_MAX: Duration = Duration::from_millis(2);

/// Entries proposed at once after the first wait that ran out.
pub const FIRST_SKIP: u32 = 16;

/// At most this many entries are proposed at once between two waits.
pub const MOST_SKIP: u32 = 1024;

/// The share of the target that ends a wait (percent): a client or two that
/// is late does not hold the others back until the bound.
const TARGET_PERCENT: usize = 95;

/// After a wait that was met, passes queued during the next entry's flight
/// beyond this share of it (percent) say that they did not stop coming once
/// the clients were back: an open loop, which the wait only made later.
const STILL_COMING_PERCENT: usize = 25;

/// What the proposer knows of the entries before: how large the last one was,
/// and how many entries to propose before waiting again.
#[derive(Debug, Clone, Default)]
pub struct Linger {
    /// Bytes of passes the last entry carried.
    last: usize,
    /// Entries to propose at once before the next wait.
    skip: u32,
    /// What `skip` becomes when the next wait fails.
    backoff: u32,
    /// The last entry was made by a wait that was met, not yet judged.
    met: bool,
}

impl Linger {
    /// The bytes of passes to wait for before proposing the next entry, when
    /// `queued` bytes were queued as the entry before was answered; None:
    /// propose at once.
    pub fn target(&mut self, queued: usize) -> Option<usize> {
        if self.last == 0 {
            return None;
        }
        // A closed loop's clients all wait for the entry a met wait made: few
        // passes come meanwhile. Many: the wait gathered an open loop's
        // arrivals, and each such wait would be longer than the one before.
        if std::mem::take(&mut self.met) {
            if queued * 100 > self.last * STILL_COMING_PERCENT {
                self.failed();
            } else {
                self.backoff = FIRST_SKIP;
            }
        }
        if self.skip > 0 {
            self.skip -= 1;
            return None;
        }
        Some((self.last + queued) * TARGET_PERCENT / 100)
    }

    /// A wait ended: `met` says whether its target was.
    pub fn ended(&mut self, met: bool) {
        if met {
            self.met = true;
        } else {
            self.failed();
        }
    }

    fn failed(&mut self) {
        self.skip = self.backoff.max(FIRST_SKIP);
        self.backoff = (self.skip * 2).min(MOST_SKIP);
    }

    /// An entry of `bytes` of passes was proposed.
    pub fn proposed(&mut self, bytes: usize) {
        self.last = bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many entries go at once before the next wait.
    fn skipped(l: &mut Linger) -> u32 {
        let mut n = 0;
        while l.target(0).is_none() {
            n += 1;
        }
        n
    }

    #[test]
    fn the_target_is_the_last_entry_and_what_was_queued() {
        let mut l = Linger::default();
        assert_eq!(l.target(500), None, "nothing proposed yet");
        l.proposed(1000);
        assert_eq!(l.target(0), Some(950));
        assert_eq!(l.target(1000), Some(1900));
        l.ended(true);
        assert_eq!(l.target(0), Some(950), "a wait that was met skips nothing");
    }

    #[test]
    fn waits_that_run_out_are_skipped_for_longer_each_time() {
        let mut l = Linger::default();
        l.proposed(1000);
        l.ended(false);
        assert_eq!(skipped(&mut l), FIRST_SKIP);
        l.ended(false);
        assert_eq!(skipped(&mut l), 2 * FIRST_SKIP);
        l.ended(false);
        assert_eq!(skipped(&mut l), 4 * FIRST_SKIP);
        // One that is met, and nothing queued after it: the next that runs
        // out skips the first number again.
        l.ended(true);
        assert!(l.target(0).is_some());
        l.ended(false);
        assert_eq!(skipped(&mut l), FIRST_SKIP);
    }

    #[test]
    fn passes_that_go_on_coming_after_a_met_wait_fail_it() {
        let mut l = Linger::default();
        l.proposed(1000);
        assert!(l.target(0).is_some());
        l.ended(true);
        l.proposed(2000);
        // A closed loop: the clients all wait, a straggler's pass or two queue.
        assert!(l.target(400).is_some());
        l.ended(true);
        l.proposed(2000);
        // An open loop: they go on coming at their rate.
        assert_eq!(l.target(600), None);
        assert_eq!(skipped(&mut l), FIRST_SKIP - 1);
        l.ended(true);
        l.proposed(2000);
        assert_eq!(l.target(600), None);
        assert_eq!(skipped(&mut l), 2 * FIRST_SKIP - 1, "the skips grow");
    }

    #[test]
    fn the_skips_stop_growing() {
        let mut l = Linger::default();
        l.proposed(1000);
        let mut last = 0;
        for _ in 0..20 {
            l.ended(false);
            last = skipped(&mut l);
        }
        assert_eq!(last, MOST_SKIP);
    }
}
