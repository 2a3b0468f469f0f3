//! Acting on deadlines: delays ending, TTRs running out, blocked reserves timing
//! out or entering the safety margin, pauses ending.

use super::job::JobState;
use super::timers::Timer;
use super::{ConnId, Delivery, Store, SECOND};

impl Store {
    /// Do everything due at `now`; return the next deadline, if any.
    pub fn tick(&mut self, now: u64) -> Option<u64> {
        while let Some((at, timer)) = self.timers.pop_due(now) {
            match timer {
                Timer::Delay(id) => self.delay_ends(id, at, now),
                Timer::Ttr(id) => self.ttr_ends(id, at, now),
                Timer::Wait(conn, seq) => self.wait_expires(conn, seq, now),
                Timer::Unpause(tube, seq) => self.pause_ends(tube, seq, now),
                Timer::Session(conn, seq) => self.session_expires(conn, seq, now),
            }
        }
        self.timers.next()
    }

    fn delay_ends(&mut self, id: u64, at: u64, now: u64) {
        let Some(slot) = self.jobs.slot_of(id) else {
            return;
        };
        let due = self
            .jobs
            .get(slot)
            .is_some_and(|j| j.state == JobState::Delayed && j.deadline == at);
        if due {
            self.detach(slot);
            self.make_ready(slot, now);
        }
    }

    fn ttr_ends(&mut self, id: u64, at: u64, now: u64) {
        let Some(slot) = self.jobs.slot_of(id) else {
            return;
        };
        let due = self
            .jobs
            .get(slot)
            .is_some_and(|j| j.state == JobState::Reserved && j.deadline == at);
        if !due {
            return;
        }
        self.detach(slot);
        if self.jobs.get(slot).is_some() {
            let c = self.jobs.counters_mut(slot);
            c.timeouts = c.timeouts.wrapping_add(1);
            self.journal(crate::wal::format::Record::Timeout { id });
        }
        self.counts.job_timeouts += 1;
        self.emit(crate::events::EventKind::Timeout, slot);
        self.make_ready(slot, now);
    }

    fn wait_expires(&mut self, conn: ConnId, seq: u64, now: u64) {
        let Some(wait) = self.conn(conn).and_then(|c| c.wait) else {
            return;
        };
        if wait.seq != seq {
            return;
        }
        if self.deadline_soon(conn, now) {
            self.end_wait(conn);
            self.deliver(conn, Delivery::DeadlineSoon);
        } else if wait.timeout_at.is_some_and(|t| t <= now) {
            self.end_wait(conn);
            self.deliver(conn, Delivery::TimedOut);
        } else {
            // Neither yet (a held job was released meanwhile): look again later.
            let margin = self
                .soonest_deadline(conn)
                .map(|d| d.saturating_sub(SECOND));
            let at = match (wait.timeout_at, margin) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if let Some(at) = at {
                self.timers.push(at.max(now + 1), Timer::Wait(conn, seq));
            }
        }
    }

    fn pause_ends(&mut self, tube: u32, seq: u64, now: u64) {
        let current = self
            .tubes
            .try_get(tube)
            .and_then(|t| t.pause)
            .is_some_and(|p| p.seq == seq);
        if current {
            self.tubes.get_mut(tube).pause = None;
            self.serve_tube(tube, now);
        }
    }
}
