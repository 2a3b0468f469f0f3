//! One method per protocol command (and connect/disconnect).

use std::sync::Arc;

use bytes::Bytes;

use super::conn::{Wait, WIDE};
use super::job::{BodyIn, Job, JobState};
use super::timers::Timer;
use super::tube::Pause;
use super::{
    ConnId, ConnState, Delivery, NotIgnored, PutRefused, ReserveOutcome, Store, Wakeup, SECOND,
};
use crate::events::EventKind;
use crate::stats::{JobStats, ServerCounts, TubeStats};

impl Store {
    /// A new connection: uses and watches `default`.
    pub fn connect(&mut self, waker: Arc<dyn Wakeup>) -> ConnId {
        let default = self.default_tube;
        let t = self.tubes.get_mut(default);
        t.using_ct += 1;
        t.watching_ct += 1;
        self.counts.connections += 1;
        self.counts.total_connections += 1;
        let state = ConnState {
            use_tube: default,
            watch: vec![default],
            watch_sorted: Vec::new(),
            reserved: Vec::new(),
            wait: None,
            producer: false,
            worker: false,
            mailbox: None,
            waker,
            session: None,
        };
        match self.free_conns.pop() {
            Some(id) => {
                self.conns[id as usize] = Some(state);
                id
            }
            None => {
                self.conns.push(Some(state));
                (self.conns.len() - 1) as ConnId
            }
        }
    }

    /// A connection closed: its reserved jobs go back to ready, its tubes may go.
    pub fn disconnect(&mut self, conn: ConnId, now: u64) {
        self.end_wait(conn);
        if self.is_session(conn) {
            self.end_session(conn);
        }
        let Some(c) = self.conns.get(conn as usize).and_then(Option::as_ref) else {
            return;
        };
        let reserved = c.reserved.clone();
        for slot in reserved {
            self.detach(slot);
            self.make_ready(slot, now);
        }
        let Some(mut c) = self.conns.get_mut(conn as usize).and_then(Option::take) else {
            return;
        };
        self.free_conns.push(conn);
        self.counts.connections -= 1;
        if c.producer {
            self.counts.producers -= 1;
        }
        if c.worker {
            self.counts.workers -= 1;
        }
        // beanstalkd empties the watch list by repeatedly removing its first element
        // (the last one takes its place); tubes are dropped in that order, which
        // decides the order list-tubes shows afterwards.
        while !c.watch.is_empty() {
            let tube = c.watch.swap_remove(0);
            self.tubes.get_mut(tube).watching_ct -= 1;
            self.drop_tube_if_unused(tube);
        }
        self.tubes.get_mut(c.use_tube).using_ct -= 1;
        self.drop_tube_if_unused(c.use_tube);
    }

    fn set_producer(&mut self, conn: ConnId) {
        if let Some(c) = self.conn_mut(conn) {
            if !c.producer {
                c.producer = true;
                self.counts.producers += 1;
            }
        }
    }

    pub(super) fn set_worker(&mut self, conn: ConnId) {
        if let Some(c) = self.conn_mut(conn) {
            if !c.worker {
                c.worker = true;
                self.counts.workers += 1;
            }
        }
    }

    /// A put's command line was accepted: count it, mark the producer and take its
    /// id. The body follows; [`Store::put`] stores it.
    pub fn begin_put(&mut self, conn: ConnId) -> u64 {
        self.set_producer(conn);
        self.alloc_id()
    }

    /// Store a job whose id came from [`Store::begin_put`]. `body` includes the CRLF.
    #[allow(clippy::too_many_arguments)]
    pub fn put<'b>(
        &mut self,
        conn: ConnId,
        id: u64,
        pri: u32,
        delay: u32,
        ttr: u32,
        body: impl Into<BodyIn<'b>>,
        now: u64,
    ) -> Result<u64, PutRefused> {
        let body = body.into();
        if self.draining {
            return Err(PutRefused::Draining);
        }
        let Some(tube) = self.conn(conn).map(|c| c.use_tube) else {
            return Err(PutRefused::Draining);
        };
        if self.max_memory > 0
            && self.jobs.bytes() + super::job::job_cost(body.len()) > self.max_memory
        {
            return Err(PutRefused::NoSpace);
        }
        self.admit_put(tube, body.len().saturating_sub(2))?;
        let t = self.tubes.get_mut(tube);
        t.jobs_ct += 1;
        t.total_jobs += 1;
        self.counts.total_jobs += 1;
        let body = self.jobs.body(body);
        let slot = self.jobs.insert(Job {
            id,
            body,
            created: now,
            deadline: 0,
            pri,
            delay,
            ttr: ttr.max(1),
            tube,
            pos: 0,
            home: 0,
            state: JobState::Ready,
        });
        self.journal_put(slot, conn, now);
        self.emit(EventKind::Put, slot);
        if delay > 0 {
            self.make_delayed(slot, now + u64::from(delay) * SECOND);
        } else {
            self.make_ready(slot, now);
        }
        Ok(id)
    }

    /// `use`: returns the tube's name for the USING reply.
    pub fn use_tube(&mut self, conn: ConnId, name: &[u8]) {
        let tube = self.tubes.find_or_create(name);
        let Some(c) = self.conn_mut(conn) else { return };
        let old = std::mem::replace(&mut c.use_tube, tube);
        self.tubes.get_mut(tube).using_ct += 1;
        self.tubes.get_mut(old).using_ct -= 1;
        self.drop_tube_if_unused(old);
    }

    /// `reserve` and `reserve-with-timeout` (`timeout` in seconds).
    pub fn reserve(&mut self, conn: ConnId, timeout: Option<u32>, now: u64) -> ReserveOutcome {
        self.set_worker(conn);
        let Some((any_ready, best)) = self.best_ready(conn, now) else {
            return ReserveOutcome::Now(Delivery::TimedOut);
        };
        // The deadline check looks at every job the connection holds, so it is made
        // only where its answer matters: not when a ready job is simply delivered (a
        // consumer holding many jobs would otherwise pay for all of them per reserve).
        if !any_ready && self.deadline_soon(conn, now) {
            return ReserveOutcome::Now(Delivery::DeadlineSoon);
        }
        if let Some(entry) = best {
            self.detach(entry.slot);
            if let Some(d) = self.make_reserved(entry.slot, conn, now) {
                return ReserveOutcome::Now(d);
            }
        }
        if timeout == Some(0) {
            let d = if self.deadline_soon(conn, now) {
                Delivery::DeadlineSoon
            } else {
                Delivery::TimedOut
            };
            return ReserveOutcome::Now(d);
        }
        self.begin_wait(conn, timeout, now);
        ReserveOutcome::Waiting
    }

    fn begin_wait(&mut self, conn: ConnId, timeout: Option<u32>, now: u64) {
        let seq = self.next_seq();
        let timeout_at = timeout.map(|s| now + u64::from(s) * SECOND);
        let margin_at = self
            .soonest_deadline(conn)
            .map(|d| d.saturating_sub(SECOND));
        let Some(c) = self.conns.get_mut(conn as usize).and_then(Option::as_mut) else {
            return;
        };
        let wide = c.watch.len() > WIDE;
        c.wait = Some(Wait {
            seq,
            timeout_at,
            wide,
        });
        if wide {
            self.wide_waiters.push((conn, seq));
        } else {
            for &tube in &c.watch {
                let t = self.tubes.get_mut(tube);
                t.waiting.push_back((conn, seq));
                t.waiting_ct += 1;
            }
        }
        self.counts.waiting += 1;
        let at = match (timeout_at, margin_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(at) = at {
            self.timers.push(at, Timer::Wait(conn, seq));
            self.compact_timers();
        }
    }

    /// The client half-closed while blocked in reserve. Returns what to send: the
    /// job if one was already handed over, otherwise TIMED_OUT.
    pub fn abandon_wait(&mut self, conn: ConnId) -> Option<Delivery> {
        if let Some(d) = self.take_delivery(conn) {
            return Some(d);
        }
        let waiting = self.conn(conn).is_some_and(|c| c.wait.is_some());
        if waiting {
            self.end_wait(conn);
            return Some(Delivery::TimedOut);
        }
        None
    }

    /// `reserve-job`: reserve a ready, delayed or buried job by id.
    pub fn reserve_job(&mut self, conn: ConnId, id: u64, now: u64) -> Option<(u64, Bytes)> {
        let slot = self.jobs.slot_of(id)?;
        if self.jobs.get(slot)?.state == JobState::Reserved {
            return None;
        }
        self.detach(slot);
        self.set_worker(conn);
        match self.make_reserved(slot, conn, now)? {
            Delivery::Reserved { id, body } => Some((id, body)),
            _ => None,
        }
    }

    /// The slot of a job reserved by `conn`.
    fn reserved_by(&self, conn: ConnId, id: u64) -> Option<u32> {
        let slot = self.jobs.slot_of(id)?;
        let job = self.jobs.get(slot)?;
        (job.state == JobState::Reserved && self.holds(conn, slot, job.pos)).then_some(slot)
    }

    /// Whether `conn` holds the reserved job in `slot` (at `pos` in its list).
    pub(super) fn holds(&self, conn: ConnId, slot: u32, pos: u32) -> bool {
        self.conn(conn)
            .is_some_and(|c| c.reserved.get(pos as usize) == Some(&slot))
    }

    pub fn delete(&mut self, conn: ConnId, id: u64) -> bool {
        let Some(slot) = self.jobs.slot_of(id) else {
            return false;
        };
        let Some(job) = self.jobs.get(slot) else {
            return false;
        };
        if job.state == JobState::Reserved && !self.holds(conn, slot, job.pos) {
            return false;
        }
        let tube = job.tube;
        self.emit(EventKind::Delete, slot);
        self.detach(slot);
        self.tubes.get_mut(tube).delete_ct += 1;
        self.free_job(slot);
        true
    }

    pub fn release(&mut self, conn: ConnId, id: u64, pri: u32, delay: u32, now: u64) -> bool {
        let Some(slot) = self.reserved_by(conn, id) else {
            return false;
        };
        self.detach(slot);
        if let Some(job) = self.jobs.get_mut(slot) {
            job.pri = pri;
            job.delay = delay;
            let c = self.jobs.counters_mut(slot);
            c.releases = c.releases.wrapping_add(1);
        }
        self.journal_release(slot, now);
        self.emit(EventKind::Release, slot);
        if delay > 0 {
            self.make_delayed(slot, now + u64::from(delay) * SECOND);
        } else {
            self.make_ready(slot, now);
        }
        true
    }

    pub fn bury(&mut self, conn: ConnId, id: u64, pri: u32) -> bool {
        let Some(slot) = self.reserved_by(conn, id) else {
            return false;
        };
        self.detach(slot);
        if let Some(job) = self.jobs.get_mut(slot) {
            job.pri = pri;
        }
        self.make_buried(slot);
        self.emit(EventKind::Bury, slot);
        true
    }

    pub fn touch(&mut self, conn: ConnId, id: u64, now: u64) -> bool {
        let Some(slot) = self.reserved_by(conn, id) else {
            return false;
        };
        let Some(job) = self.jobs.get_mut(slot) else {
            return false;
        };
        job.deadline = now + u64::from(job.ttr) * SECOND;
        let (deadline, id) = (job.deadline, job.id);
        self.journal_hold(conn, id, deadline, true);
        self.timers.push(deadline, Timer::Ttr(id));
        self.compact_timers();
        self.emit(EventKind::Touch, slot);
        true
    }

    /// `watch`: returns the number of watched tubes.
    pub fn watch(&mut self, conn: ConnId, name: &[u8]) -> usize {
        let tube = self.tubes.find_or_create(name);
        let Some(c) = self.conn_mut(conn) else {
            return 0;
        };
        if !c.watches(tube) {
            c.watch.push(tube);
            c.watch_changed(Some(tube), None);
            let n = c.watch.len();
            self.tubes.get_mut(tube).watching_ct += 1;
            return n;
        }
        c.watch.len()
    }

    /// `ignore`: returns the number of watched tubes left.
    pub fn ignore(&mut self, conn: ConnId, name: &[u8]) -> Result<usize, NotIgnored> {
        let tube = self.tubes.find(name);
        let Some(c) = self.conn_mut(conn) else {
            return Ok(0);
        };
        let Some(i) = tube.and_then(|t| c.watch.iter().position(|&w| w == t)) else {
            return Ok(c.watch.len());
        };
        if c.watch.len() < 2 {
            return Err(NotIgnored);
        }
        let tube = c.watch.swap_remove(i);
        c.watch_changed(None, Some(tube));
        let n = c.watch.len();
        self.tubes.get_mut(tube).watching_ct -= 1;
        self.drop_tube_if_unused(tube);
        Ok(n)
    }

    fn body_of(&self, slot: u32) -> Option<(u64, Bytes)> {
        self.jobs.get(slot).map(|j| (j.id, j.body.to_bytes()))
    }

    pub fn peek(&self, id: u64) -> Option<(u64, Bytes)> {
        self.body_of(self.jobs.slot_of(id)?)
    }

    pub fn peek_ready(&self, conn: ConnId) -> Option<(u64, Bytes)> {
        let tube = self.tubes.get(self.conn(conn)?.use_tube);
        self.body_of(tube.ready.peek()?.slot)
    }

    pub fn peek_delayed(&self, conn: ConnId) -> Option<(u64, Bytes)> {
        let tube = self.tubes.get(self.conn(conn)?.use_tube);
        self.body_of(tube.delayed.peek()?.slot)
    }

    pub fn peek_buried(&self, conn: ConnId) -> Option<(u64, Bytes)> {
        let tube = self.tubes.get(self.conn(conn)?.use_tube);
        self.body_of(*tube.buried.values().next()?)
    }

    /// `kick n` on the used tube: buried jobs if there are any, else delayed ones.
    pub fn kick(&mut self, conn: ConnId, bound: u32, now: u64) -> u32 {
        let Some(tube) = self.conn(conn).map(|c| c.use_tube) else {
            return 0;
        };
        self.kick_in(tube, bound, now)
    }

    /// `kick n` on the tube named `name`, for the in-process admin calls: None if
    /// there is no such tube.
    pub fn kick_tube(&mut self, name: &[u8], bound: u32, now: u64) -> Option<u32> {
        let tube = self.tubes.find(name)?;
        Some(self.kick_in(tube, bound, now))
    }

    fn kick_in(&mut self, tube: u32, bound: u32, now: u64) -> u32 {
        let from_buried = !self.tubes.get(tube).buried.is_empty();
        let mut kicked = 0;
        while kicked < bound {
            let t = self.tubes.get(tube);
            let next = if from_buried {
                t.buried.values().next().copied()
            } else {
                t.delayed.peek().map(|e| e.slot)
            };
            let Some(slot) = next else { break };
            self.kick_slot(slot, now);
            kicked += 1;
        }
        kicked
    }

    fn kick_slot(&mut self, slot: u32, now: u64) {
        self.detach(slot);
        if let Some(job) = self.jobs.get(slot) {
            let id = job.id;
            let c = self.jobs.counters_mut(slot);
            c.kicks = c.kicks.wrapping_add(1);
            self.journal(crate::wal::format::Record::Kick { id });
        }
        self.emit(EventKind::Kick, slot);
        self.make_ready(slot, now);
    }

    /// `kick-job`: only a buried or delayed job can be kicked.
    pub fn kick_job(&mut self, id: u64, now: u64) -> bool {
        let Some(slot) = self.jobs.slot_of(id) else {
            return false;
        };
        match self.jobs.get(slot).map(|j| j.state) {
            Some(JobState::Buried | JobState::Delayed) => {
                self.kick_slot(slot, now);
                true
            }
            _ => false,
        }
    }

    /// `pause-tube`: false if the tube does not exist.
    pub fn pause_tube(&mut self, name: &[u8], delay: u32, now: u64) -> bool {
        let Some(tube) = self.tubes.find(name) else {
            return false;
        };
        if self.events.wants(EventKind::PauseTube) {
            self.events.send(crate::events::Event {
                kind: EventKind::PauseTube,
                job_id: None,
                tube: Some(std::sync::Arc::clone(&self.tubes.get(tube).name)),
                priority: None,
                at: crate::events::unix_now(),
                detail: Some(delay.to_string()),
            });
        }
        self.journal_pause(name, delay, now);
        let t = self.tubes.get_mut(tube);
        t.pause_ct += 1;
        if delay == 0 {
            // beanstalkd pauses for 1 ns, and its timers run before it reads the next
            // command from any client: the pause is over before anything else happens.
            // End it now, and give the tube's ready jobs to its waiters.
            t.pause = None;
            self.serve_tube(tube, now);
            self.compact_timers();
            return true;
        }
        let seq = self.next_seq();
        let length = u64::from(delay) * SECOND;
        let until = now + length;
        self.tubes.get_mut(tube).pause = Some(Pause { length, until, seq });
        self.timers.push(until, Timer::Unpause(tube, seq));
        self.compact_timers();
        true
    }

    // ----- reports ----------------------------------------------------------------

    pub fn stats(&self) -> ServerCounts {
        ServerCounts {
            urgent: self.counts.urgent,
            ready: self.counts.ready,
            reserved: self.counts.reserved,
            delayed: self.counts.delayed,
            buried: self.counts.buried,
            ops: self.ops,
            job_timeouts: self.counts.job_timeouts,
            total_jobs: self.counts.total_jobs,
            max_job_size: u64::from(self.max_job_size),
            current_tubes: self.tubes.len() as u64,
            current_connections: self.counts.connections,
            current_producers: self.counts.producers,
            current_workers: self.counts.workers,
            current_waiting: self.counts.waiting,
            total_connections: self.counts.total_connections,
            draining: self.draining,
        }
    }

    pub fn stats_tube(&self, name: &[u8], now: u64) -> Option<TubeStats> {
        let slot = self.tubes.find(name)?;
        Some(self.tube_stats_of(slot, self.wide_waiting_on(slot), now))
    }

    fn tube_stats_of(&self, slot: u32, wide_waiting: u64, now: u64) -> TubeStats {
        let t = self.tubes.get(slot);
        let (pause, left) = match t.pause {
            Some(p) if p.until > now => (p.length / SECOND, (p.until - now) / SECOND),
            _ => (0, 0),
        };
        TubeStats {
            name: t.name.to_vec(),
            urgent: t.urgent_ct,
            ready: t.ready.len() as u64,
            reserved: t.reserved_ct,
            delayed: t.delayed.len() as u64,
            buried: t.buried.len() as u64,
            total_jobs: t.total_jobs,
            using: u64::from(t.using_ct),
            watching: u64::from(t.watching_ct),
            waiting: u64::from(t.waiting_ct) + wide_waiting,
            cmd_delete: t.delete_ct,
            cmd_pause_tube: t.pause_ct,
            pause,
            pause_time_left: left,
        }
    }

    /// `stats-tube` of every tube, in listing order, in one pass: the wide waiters
    /// are counted once for all tubes instead of once per tube.
    pub fn stats_tubes(&self, now: u64) -> Vec<TubeStats> {
        // Tube slot -> wide waiters watching it; empty (no allocation) in the usual
        // case of no connection watching more than a few tubes.
        let mut wide: std::collections::HashMap<u32, u64> = std::collections::HashMap::new();
        for &(conn, _) in &self.wide_waiters {
            if let Some(c) = self.conn(conn) {
                for &tube in &c.watch {
                    *wide.entry(tube).or_default() += 1;
                }
            }
        }
        self.tubes
            .order()
            .iter()
            .map(|&slot| self.tube_stats_of(slot, wide.get(&slot).copied().unwrap_or(0), now))
            .collect()
    }

    pub fn stats_job(&self, id: u64, now: u64) -> Option<JobStats> {
        let slot = self.jobs.slot_of(id)?;
        let job = self.jobs.get(slot)?;
        let counters = self.jobs.counters(slot);
        let time_left = match job.state {
            JobState::Reserved | JobState::Delayed => {
                (job.deadline as i128 - now as i128) / i128::from(SECOND)
            }
            _ => 0,
        };
        Some(JobStats {
            id: job.id,
            tube: self.tubes.get(job.tube).name.to_vec(),
            state: job.state.name(),
            pri: job.pri,
            age: now.saturating_sub(job.created) / SECOND,
            delay: u64::from(job.delay),
            ttr: u64::from(job.ttr),
            time_left: time_left as i64,
            file: u64::from(job.home),
            reserves: counters.reserves,
            timeouts: counters.timeouts,
            releases: counters.releases,
            buries: counters.buries,
            kicks: counters.kicks,
        })
    }

    /// Every tube's name, in beanstalkd's listing order.
    pub fn list_tubes(&self) -> Vec<&[u8]> {
        self.tubes
            .order()
            .iter()
            .map(|&t| &*self.tubes.get(t).name)
            .collect()
    }

    pub fn list_tubes_watched(&self, conn: ConnId) -> Vec<&[u8]> {
        self.conn(conn)
            .map(|c| c.watch.iter().map(|&t| &*self.tubes.get(t).name).collect())
            .unwrap_or_default()
    }

    pub fn tube_used(&self, conn: ConnId) -> &[u8] {
        let tube = self.conn(conn).map_or(self.default_tube, |c| c.use_tube);
        &self.tubes.get(tube).name
    }
}
