//! [`Admin`]: the in-process admin calls of an embedded server (stats, tubes, pause,
//! kick) and the bulk snapshot the metrics are built from.
//!
//! Each call takes the store lock once, like one command of a connection, and
//! settles afterwards as a connection does (wakeups, the clock, the log), so a kick
//! or a pause from here behaves exactly as one sent over the protocol. Nothing here
//! runs unless it is called.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use thiserror::Error;

use super::Shared;
use crate::stats::{JobStats, StatValue, TubeStats};
use crate::store::{NotDeleted, Which};

/// Why an admin call did nothing.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum AdminError {
    #[error("no tube named '{0}'")]
    NoTube(String),
    #[error("no job with id {0}")]
    NoJob(u64),
    #[error("the log has no room for the change; try again once it has caught up")]
    NoLogRoom,
    #[error("job {0} is reserved by a worker")]
    Reserved(u64),
    #[error("job {0} is neither buried nor delayed")]
    NotKickable(u64),
}

/// Everything the metrics need, read under one acquisition of the store lock.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The `stats` values, as ordered pairs.
    pub server: Vec<(&'static str, StatValue)>,
    /// Every tube's `stats-tube`, in listing order; with a cap, only the tubes kept.
    pub tubes: Vec<TubeStats>,
    /// With a cap that left tubes out: their figures summed, named `_other` (pause
    /// fields zero).
    pub other: Option<TubeStats>,
    /// How long the store lock was held for this snapshot, in nanoseconds.
    pub lock_ns: u64,
    /// The log's health, when there is a log: (failing now, errors seen so far).
    pub log_health: Option<(bool, u64)>,
}

/// The admin side of a running server; cheap to clone, usable from any thread.
#[derive(Debug, Clone)]
pub struct Admin {
    shared: Arc<Shared>,
    /// Lock hold time of the latest [`Admin::snapshot`], in nanoseconds. An atomic:
    /// written by whichever thread took the snapshot, read by any other.
    last_lock_ns: Arc<AtomicU64>,
}

impl Admin {
    pub(super) fn new(shared: Arc<Shared>) -> Admin {
        Admin {
            shared,
            last_lock_ns: Arc::new(AtomicU64::new(0)),
        }
    }

    pub(super) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Enter drain mode: puts are answered DRAINING from now on.
    pub fn drain(&self) {
        self.shared.lock().set_draining(true);
    }

    /// `stats`, as ordered pairs (no command is counted).
    pub fn stats(&self) -> Vec<(&'static str, crate::stats::StatValue)> {
        let store = self.shared.lock();
        self.shared.stats_pairs(&store)
    }

    /// `stats-tube NAME`.
    pub fn tube_stats(&self, name: &[u8]) -> Result<TubeStats, AdminError> {
        let now = self.shared.now();
        self.shared
            .lock()
            .stats_tube(name, now)
            .ok_or_else(|| AdminError::NoTube(lossy(name)))
    }

    /// `stats-job ID`.
    pub fn job_stats(&self, id: u64) -> Result<JobStats, AdminError> {
        let now = self.shared.now();
        self.shared
            .lock()
            .stats_job(id, now)
            .ok_or(AdminError::NoJob(id))
    }

    /// `list-tubes`.
    pub fn tubes(&self) -> Vec<Vec<u8>> {
        let store = self.shared.lock();
        store.list_tubes().into_iter().map(<[u8]>::to_vec).collect()
    }

    /// `pause-tube NAME SECONDS`.
    pub fn pause(&self, name: &[u8], seconds: u32) -> Result<(), AdminError> {
        let now = self.shared.now();
        let (found, settled) = {
            let mut store = self.shared.lock();
            let found = store.pause_tube(name, seconds, now);
            (found, self.shared.settle(&mut store))
        };
        self.shared.write_log(self.shared.finish(settled));
        if found {
            Ok(())
        } else {
            Err(AdminError::NoTube(lossy(name)))
        }
    }

    /// `kick BOUND` on tube `name`: buried jobs if it has any, else delayed ones.
    /// Returns how many were kicked.
    pub fn kick(&self, name: &[u8], bound: u32) -> Result<u32, AdminError> {
        let now = self.shared.now();
        let (kicked, settled) = {
            let mut store = self.shared.lock();
            if !store.log_room_for_update() {
                return Err(AdminError::NoLogRoom);
            }
            let kicked = store.kick_tube(name, bound, now);
            (kicked, self.shared.settle(&mut store))
        };
        // The kicks' records are written; nothing waits for them, as for a
        // connection that has hung up.
        self.shared.write_log(self.shared.finish(settled));
        kicked.ok_or_else(|| AdminError::NoTube(lossy(name)))
    }

    /// `peek ID`: the job's id and body (CRLF included).
    pub fn peek_job(&self, id: u64) -> Result<(u64, Bytes), AdminError> {
        self.shared.lock().peek(id).ok_or(AdminError::NoJob(id))
    }

    /// `peek-ready`, `peek-delayed` or `peek-buried` on tube `name`: None when the
    /// tube has no such job.
    pub fn peek(&self, name: &[u8], which: Which) -> Result<Option<(u64, Bytes)>, AdminError> {
        self.shared
            .lock()
            .peek_in(name, which)
            .ok_or_else(|| AdminError::NoTube(lossy(name)))
    }

    /// `kick-job ID`: a buried or delayed job made ready.
    pub fn kick_job(&self, id: u64) -> Result<(), AdminError> {
        self.change(|store, now| {
            if store.kick_job(id, now) {
                Ok(())
            } else if store.peek(id).is_some() {
                Err(AdminError::NotKickable(id))
            } else {
                Err(AdminError::NoJob(id))
            }
        })
    }

    /// `delete ID` of a job no worker holds (ready, delayed or buried).
    pub fn delete(&self, id: u64) -> Result<(), AdminError> {
        self.change(|store, _now| {
            store.delete_unreserved(id).map_err(|e| match e {
                NotDeleted::Missing => AdminError::NoJob(id),
                NotDeleted::Reserved => AdminError::Reserved(id),
            })
        })
    }

    /// Delete up to `limit` of tube `name`'s `which` jobs, next first, under one
    /// acquisition of the lock; returns how many were deleted. Callers clearing a
    /// large tube call it again until it returns fewer than `limit`, so connections
    /// get the lock in between.
    pub fn clear(&self, name: &[u8], which: Which, limit: u32) -> Result<u32, AdminError> {
        self.change(|store, _now| {
            store
                .clear_in(name, which, limit)
                .ok_or_else(|| AdminError::NoTube(lossy(name)))
        })
    }

    /// Run a change under the store lock (refused when the log has no room for
    /// its records), then settle and write the log as a connection does.
    fn change<T>(
        &self,
        apply: impl FnOnce(&mut crate::store::Store, u64) -> Result<T, AdminError>,
    ) -> Result<T, AdminError> {
        let now = self.shared.now();
        let (result, settled) = {
            let mut store = self.shared.lock();
            if !store.log_room_for_update() {
                return Err(AdminError::NoLogRoom);
            }
            let result = apply(&mut store, now);
            (result, self.shared.settle(&mut store))
        };
        self.shared.write_log(self.shared.finish(settled));
        result
    }

    /// `stats` and every tube's `stats-tube` under one acquisition of the lock.
    ///
    /// With `max_tubes`, only that many tubes are kept, those holding the most jobs
    /// (ties go to the tube listed first, so the same tubes are kept from one
    /// snapshot to the next), in listing order; the others are summed in `other`.
    /// The choice is made after the lock is released.
    pub fn snapshot(&self, max_tubes: Option<usize>) -> Snapshot {
        let now = self.shared.now();
        let (server, tubes, lock_ns) = {
            let store = self.shared.lock();
            let start = Instant::now();
            let server = self.shared.stats_pairs(&store);
            let tubes = store.stats_tubes(now);
            (server, tubes, start.elapsed().as_nanos() as u64)
        };
        self.last_lock_ns.store(lock_ns, Ordering::Relaxed);
        let log_health = self
            .shared
            .log_pipe
            .as_ref()
            .map(|p| (p.failing(), p.errors.load(Ordering::Relaxed)));
        let (tubes, other) = match max_tubes {
            Some(cap) if tubes.len() > cap => cap_tubes(tubes, cap),
            _ => (tubes, None),
        };
        Snapshot {
            server,
            tubes,
            other,
            lock_ns,
            log_health,
        }
    }

    /// Lock hold time of the latest snapshot, in nanoseconds (0 before the first).
    pub fn last_snapshot_lock_ns(&self) -> u64 {
        self.last_lock_ns.load(Ordering::Relaxed)
    }
}

/// Keep the `cap` tubes with the most jobs (in listing order), sum the rest.
fn cap_tubes(tubes: Vec<TubeStats>, cap: usize) -> (Vec<TubeStats>, Option<TubeStats>) {
    let jobs = |t: &TubeStats| t.ready + t.reserved + t.delayed + t.buried;
    let mut order: Vec<usize> = (0..tubes.len()).collect();
    // Most jobs first, then listing order: a total order, so the choice is stable.
    order.sort_unstable_by(|&a, &b| jobs(&tubes[b]).cmp(&jobs(&tubes[a])).then(a.cmp(&b)));
    let mut keep = vec![false; tubes.len()];
    for &i in &order[..cap] {
        keep[i] = true;
    }
    let mut other = TubeStats {
        name: b"_other".to_vec(),
        urgent: 0,
        ready: 0,
        reserved: 0,
        delayed: 0,
        buried: 0,
        total_jobs: 0,
        using: 0,
        watching: 0,
        waiting: 0,
        cmd_delete: 0,
        cmd_pause_tube: 0,
        pause: 0,
        pause_time_left: 0,
    };
    let mut kept = Vec::with_capacity(cap);
    for (t, keep) in tubes.into_iter().zip(keep) {
        if keep {
            kept.push(t);
            continue;
        }
        other.urgent += t.urgent;
        other.ready += t.ready;
        other.reserved += t.reserved;
        other.delayed += t.delayed;
        other.buried += t.buried;
        other.total_jobs += t.total_jobs;
        other.using += t.using;
        other.watching += t.watching;
        other.waiting += t.waiting;
        other.cmd_delete += t.cmd_delete;
        other.cmd_pause_tube += t.cmd_pause_tube;
    }
    (kept, Some(other))
}

fn lossy(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use bytes::Bytes;

    use super::*;
    use crate::store::Wakeup;

    #[derive(Debug)]
    struct Nobody;

    impl Wakeup for Nobody {
        fn wake(&self) {}
    }

    /// A server's shared state with `jobs[i]` ready jobs in tube `t{i}`.
    fn admin_with(jobs: &[u32]) -> Admin {
        let shared = Arc::new(Shared::new(
            65535,
            0,
            None,
            std::time::Duration::from_secs(5),
        ));
        {
            let mut store = shared.lock();
            let conn = store.connect(Arc::new(Nobody));
            for (i, &n) in jobs.iter().enumerate() {
                store.use_tube(conn, format!("t{i}").as_bytes());
                for _ in 0..n {
                    let id = store.begin_put(conn);
                    let now = shared.now();
                    store
                        .put(conn, id, 0, 0, 60, Bytes::from_static(b"x\r\n"), now)
                        .unwrap();
                }
            }
        }
        Admin::new(shared)
    }

    fn names(tubes: &[TubeStats]) -> Vec<String> {
        tubes.iter().map(|t| lossy(&t.name)).collect()
    }

    #[test]
    fn snapshot_without_a_cap_lists_every_tube() {
        let admin = admin_with(&[1, 2]);
        let snap = admin.snapshot(None);
        assert_eq!(names(&snap.tubes), ["default", "t0", "t1"]);
        assert!(snap.other.is_none());
        assert!(snap.log_health.is_none());
        assert_eq!(admin.last_snapshot_lock_ns(), snap.lock_ns);
        let ready = snap.server.iter().find(|(k, _)| *k == "current-jobs-ready");
        assert_eq!(ready.map(|(_, v)| v.clone()), Some(StatValue::Int(3)));
    }

    #[test]
    fn cap_keeps_the_busiest_in_listing_order_and_sums_the_rest() {
        // Ties (t1 and t3 hold 2 each) go to the tube listed first.
        let admin = admin_with(&[1, 2, 5, 2, 0]);
        let snap = admin.snapshot(Some(2));
        assert_eq!(names(&snap.tubes), ["t1", "t2"]);
        let other = snap.other.unwrap();
        assert_eq!(lossy(&other.name), "_other");
        assert_eq!((other.ready, other.urgent, other.total_jobs), (3, 3, 3));
        // Five of six: of the two empty tubes, default (listed first) stays.
        let five = admin.snapshot(Some(5));
        assert_eq!(names(&five.tubes), ["default", "t0", "t1", "t2", "t3"]);
        assert_eq!(five.other.map(|o| o.ready), Some(0));
        assert!(admin.snapshot(Some(6)).other.is_none());
    }

    #[test]
    fn missing_tubes_and_jobs_are_errors() {
        let admin = admin_with(&[1]);
        assert_eq!(
            admin.tube_stats(b"nope").unwrap_err(),
            AdminError::NoTube("nope".into())
        );
        assert_eq!(admin.job_stats(99).unwrap_err(), AdminError::NoJob(99));
        assert_eq!(
            admin.pause(b"nope", 1).unwrap_err(),
            AdminError::NoTube("nope".into())
        );
        assert_eq!(
            admin.kick(b"nope", 1).unwrap_err(),
            AdminError::NoTube("nope".into())
        );
        assert_eq!(admin.job_stats(1).unwrap().tube, b"t0");
        assert_eq!(admin.tubes(), vec![b"default".to_vec(), b"t0".to_vec()]);
    }

    #[test]
    fn peek_kick_delete_and_clear() {
        let admin = admin_with(&[3]);
        let (id, body) = admin.peek(b"t0", Which::Ready).unwrap().unwrap();
        assert_eq!((id, &body[..]), (1, &b"x\r\n"[..]));
        assert_eq!(admin.peek(b"t0", Which::Buried).unwrap(), None);
        assert_eq!(
            admin.peek(b"nope", Which::Ready).unwrap_err(),
            AdminError::NoTube("nope".into())
        );
        assert_eq!(admin.peek_job(2).unwrap().0, 2);
        assert_eq!(admin.kick_job(2).unwrap_err(), AdminError::NotKickable(2));
        assert_eq!(admin.kick_job(99).unwrap_err(), AdminError::NoJob(99));
        admin.delete(1).unwrap();
        assert_eq!(admin.delete(1).unwrap_err(), AdminError::NoJob(1));
        assert_eq!(admin.tube_stats(b"t0").unwrap().cmd_delete, 1);
        assert_eq!(admin.clear(b"t0", Which::Buried, 10).unwrap(), 0);
        assert_eq!(admin.clear(b"t0", Which::Ready, 1).unwrap(), 1);
        assert_eq!(admin.clear(b"t0", Which::Ready, 10).unwrap(), 1);
        let t = admin.tube_stats(b"t0").unwrap();
        assert_eq!((t.ready, t.cmd_delete), (0, 3));
    }

    #[test]
    fn clearing_each_state_keeps_the_store_consistent() {
        use crate::store::{Delivery, ReserveOutcome};

        let shared = Arc::new(Shared::new(
            65535,
            0,
            None,
            std::time::Duration::from_secs(5),
        ));
        let held = {
            let mut store = shared.lock();
            let conn = store.connect(Arc::new(Nobody));
            store.use_tube(conn, b"q");
            store.watch(conn, b"q");
            store.ignore(conn, b"default").unwrap();
            let now = shared.now();
            for i in 0..9u32 {
                let id = store.begin_put(conn);
                let delay = if i % 3 == 1 { 100 } else { 0 };
                let body = Bytes::from_static(b"x\r\n");
                store.put(conn, id, i, delay, 60, body, now).unwrap();
            }
            let mut reserve = || match store.reserve(conn, Some(0), now) {
                ReserveOutcome::Now(Delivery::Reserved { id, .. }) => id,
                other => panic!("{other:?}"),
            };
            let (a, b, held) = (reserve(), reserve(), reserve());
            assert!(store.bury(conn, a, 0) && store.bury(conn, b, 0));
            held
        };
        let admin = Admin::new(shared.clone());
        let t = admin.tube_stats(b"q").unwrap();
        assert_eq!((t.ready, t.delayed, t.buried, t.reserved), (3, 3, 2, 1));
        assert_eq!(admin.delete(held).unwrap_err(), AdminError::Reserved(held));
        for (which, n) in [(Which::Buried, 2), (Which::Delayed, 3), (Which::Ready, 3)] {
            assert_eq!(admin.clear(b"q", which, 100).unwrap(), n);
            shared.lock().check_invariants().unwrap();
        }
        let t = admin.tube_stats(b"q").unwrap();
        assert_eq!((t.ready, t.delayed, t.buried, t.reserved), (0, 0, 0, 1));
        assert_eq!(t.cmd_delete, 8);
    }

    #[test]
    fn pause_shows_in_tube_stats() {
        let admin = admin_with(&[1]);
        admin.pause(b"t0", 30).unwrap();
        let t = admin.tube_stats(b"t0").unwrap();
        assert_eq!((t.pause, t.cmd_pause_tube), (30, 1));
        assert_eq!(admin.kick(b"t0", 5).unwrap(), 0); // nothing buried or delayed
    }
}
