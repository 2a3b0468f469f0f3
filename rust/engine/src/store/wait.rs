//! Finding work for a reserve, and the waiting connections a new job can go to.
//!
//! A connection watching few tubes waits in each watched tube's queue; one watching
//! more than [`WIDE`] waits once, in the store's list of wide waiters, which a tube
//! with a new ready job consults beside its own queue. The store also keeps the
//! list of tubes that have ready jobs, so a reserve over many watched tubes looks
//! at whichever of the two lists is shorter.

use super::conn::WIDE;
use super::heap::Entry;
use super::{ConnId, Store};

impl Store {
    /// For a reserve by `conn`: whether any watched tube has a ready job (paused
    /// or not), and the best ready job among the watched tubes that are not
    /// paused. None if the connection is unknown.
    pub(super) fn best_ready(&self, conn: ConnId, now: u64) -> Option<(bool, Option<Entry>)> {
        let c = self.conn(conn)?;
        let mut any = false;
        let mut best: Option<Entry> = None;
        let mut consider = |tube: u32| {
            let t = self.tubes.get(tube);
            let Some(top) = t.ready.peek() else { return };
            any = true;
            if t.paused(now) {
                return;
            }
            let better = match best {
                Some(b) => top.key() < b.key(),
                None => true,
            };
            if better {
                best = Some(*top);
            }
        };
        if c.watch.len() > WIDE && self.ready_tubes.len() < c.watch.len() {
            for &tube in &self.ready_tubes {
                if c.watches(tube) {
                    consider(tube);
                }
            }
        } else {
            for &tube in &c.watch {
                consider(tube);
            }
        }
        Some((any, best))
    }

    /// `tube`'s ready heap has just become empty: drop it from the ready list.
    pub(super) fn ready_tube_emptied(&mut self, tube: u32) {
        let at = std::mem::replace(&mut self.tubes.get_mut(tube).ready_at, u32::MAX) as usize;
        if at < self.ready_tubes.len() {
            self.ready_tubes.swap_remove(at);
            if let Some(&moved) = self.ready_tubes.get(at) {
                self.tubes.get_mut(moved).ready_at = at as u32;
            }
        }
    }

    /// The longest-waiting live waiter that watches `tube`, taken off its queue or
    /// off the wide list.
    pub(super) fn pop_waiter(&mut self, tube: u32) -> Option<ConnId> {
        // Stale entries at the front of the tube's queue go first.
        let narrow = loop {
            let Some(&(conn, seq)) = self.tubes.get(tube).waiting.front() else {
                break None;
            };
            if self.is_waiting(conn, seq) {
                break Some((conn, seq));
            }
            self.tubes.get_mut(tube).waiting.pop_front();
        };
        let wide = self
            .wide_waiters
            .iter()
            .position(|&(conn, _)| self.conn(conn).is_some_and(|c| c.watches(tube)));
        match (narrow, wide) {
            (Some((_, nseq)), Some(i)) if self.wide_waiters[i].1 < nseq => {
                Some(self.wide_waiters.remove(i).0)
            }
            (Some((conn, _)), _) => {
                self.tubes.get_mut(tube).waiting.pop_front();
                Some(conn)
            }
            (None, Some(i)) => Some(self.wide_waiters.remove(i).0),
            (None, None) => None,
        }
    }

    /// Whether `conn` is still in the wait numbered `seq`.
    pub(super) fn is_waiting(&self, conn: ConnId, seq: u64) -> bool {
        self.conn(conn)
            .and_then(|c| c.wait.as_ref())
            .is_some_and(|w| w.seq == seq)
    }

    /// Wide waiters that watch `tube` (for stats-tube `current-waiting`).
    pub(super) fn wide_waiting_on(&self, tube: u32) -> u64 {
        self.wide_waiters
            .iter()
            .filter(|&&(conn, _)| self.conn(conn).is_some_and(|c| c.watches(tube)))
            .count() as u64
    }

    /// The wide list and the ready-tube list agree with the rest of the store.
    pub(super) fn check_wait_lists(&self) -> Result<(), String> {
        let wide_waits = self
            .conns
            .iter()
            .flatten()
            .filter(|c| c.wait.is_some_and(|w| w.wide))
            .count();
        if wide_waits != self.wide_waiters.len() {
            return Err(format!(
                "{wide_waits} wide waits, {} in the wide list",
                self.wide_waiters.len()
            ));
        }
        if !self.wide_waiters.windows(2).all(|w| w[0].1 < w[1].1)
            || !self
                .wide_waiters
                .iter()
                .all(|&(c, s)| self.is_waiting(c, s))
        {
            return Err("wide list out of order or holding a stale wait".into());
        }
        for c in self.conns.iter().flatten() {
            let mut sorted = c.watch.clone();
            sorted.sort_unstable();
            let kept = c.watch.len() <= WIDE || sorted == c.watch_sorted;
            if !kept || (c.watch.len() <= WIDE && !c.watch_sorted.is_empty()) {
                return Err("a connection's sorted watch list is out of date".into());
            }
        }
        for (i, &t) in self.ready_tubes.iter().enumerate() {
            let tube = self
                .tubes
                .try_get(t)
                .ok_or("ready list names a missing tube")?;
            if tube.ready.is_empty() || tube.ready_at as usize != i {
                return Err(format!("ready list entry {i} is wrong"));
            }
        }
        let nonempty = self
            .tubes
            .order()
            .iter()
            .filter(|&&t| !self.tubes.get(t).ready.is_empty())
            .count();
        if nonempty != self.ready_tubes.len() {
            return Err(format!(
                "{nonempty} tubes have ready jobs, {} listed",
                self.ready_tubes.len()
            ));
        }
        Ok(())
    }
}
