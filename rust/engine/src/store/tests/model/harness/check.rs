//! The comparison of everything the store reports with the model.

use super::*;

impl Harness {
    pub(in crate::store::tests::model) fn check(&mut self) {
        self.sync_tubes();
        ok(&self.st);
        // Every delivery was taken and judged by the step that caused it.
        assert!(!self.st.has_wakeups(), "wakeups left over");
        for (c, conn) in self.conns.iter().enumerate() {
            assert_eq!(
                self.st.take_delivery(conn.id),
                None,
                "conn {c}: delivery left over"
            );
        }
        let now = self.now;
        let st = &self.st;

        for (&id, j) in &self.jobs {
            let s = st
                .stats_job(id, now)
                .unwrap_or_else(|| panic!("live job {id} not found"));
            assert_eq!(s.state, j.state.name(), "state of job {id}");
            assert_eq!(s.tube, j.tube.as_bytes(), "tube of job {id}");
            assert_eq!(
                (s.pri, s.delay, s.ttr),
                (j.pri, u64::from(j.delay), u64::from(j.ttr)),
                "job {id}"
            );
            assert_eq!(s.age, (now - j.created) / S, "age of job {id}");
            let left = match j.state {
                MState::Delayed { until } => (until as i64 - now as i64) / S as i64,
                MState::Reserved { deadline, .. } => (deadline as i64 - now as i64) / S as i64,
                _ => 0,
            };
            assert_eq!(s.time_left, left, "time-left of job {id}");
            assert_eq!(
                (s.reserves, s.timeouts, s.releases, s.buries, s.kicks),
                (j.reserves, j.timeouts, j.releases, j.buries, j.kicks),
                "counters of job {id}"
            );
        }
        for &id in self.gone.iter().rev().take(8) {
            assert!(
                st.stats_job(id, now).is_none(),
                "deleted job {id} still found"
            );
            assert_eq!(st.peek(id), None);
        }

        let count = |name: &str| {
            self.jobs
                .values()
                .filter(|j| j.state.name() == name)
                .count() as u64
        };
        let s = st.stats();
        assert_eq!(
            s.ready + s.reserved + s.delayed + s.buried,
            self.jobs.len() as u64
        );
        assert_eq!(
            (s.ready, s.reserved, s.delayed, s.buried),
            (
                count("ready"),
                count("reserved"),
                count("delayed"),
                count("buried")
            )
        );
        let urgent = self
            .jobs
            .values()
            .filter(|j| j.state == MState::Ready && j.pri < 1024)
            .count() as u64;
        assert_eq!(s.urgent, urgent);
        assert_eq!(
            (s.total_jobs, s.job_timeouts),
            (self.total_jobs, self.job_timeouts)
        );
        assert_eq!(s.current_tubes, self.tubes.len() as u64);
        assert_eq!(
            (s.current_connections, s.total_connections),
            (CONNS as u64, self.total_connections)
        );
        let flags = |f: fn(&MConn) -> bool| self.conns.iter().filter(|c| f(c)).count() as u64;
        assert_eq!(s.current_producers, flags(|c| c.producer));
        assert_eq!(s.current_workers, flags(|c| c.worker));
        assert_eq!(s.current_waiting, flags(|c| c.wait.is_some()));

        let listed = tubes(st);
        let set: BTreeSet<&str> = listed.iter().map(String::as_str).collect();
        assert_eq!(
            set.len(),
            listed.len(),
            "duplicate tubes listed: {listed:?}"
        );
        assert_eq!(set, self.tubes.keys().copied().collect(), "list-tubes");
        for (&name, mt) in &self.tubes {
            let t = st.stats_tube(name.as_bytes(), now).unwrap();
            let in_tube = |state: &str| {
                self.jobs
                    .values()
                    .filter(|j| j.tube == name && j.state.name() == state)
                    .count() as u64
            };
            let urgent = self.ready_in(name).filter(|&(pri, _)| pri < 1024).count() as u64;
            assert_eq!(
                (t.urgent, t.ready, t.reserved, t.delayed, t.buried),
                (
                    urgent,
                    in_tube("ready"),
                    in_tube("reserved"),
                    in_tube("delayed"),
                    in_tube("buried")
                ),
                "tube {name}"
            );
            let using = self.conns.iter().filter(|c| c.use_tube == name).count() as u64;
            let watching = self
                .conns
                .iter()
                .filter(|c| c.watch.contains(&name))
                .count() as u64;
            let waiting = self
                .conns
                .iter()
                .filter(|c| c.wait.is_some() && c.watch.contains(&name))
                .count() as u64;
            assert_eq!(
                (t.using, t.watching, t.waiting),
                (using, watching, waiting),
                "tube {name}"
            );
            assert_eq!(
                (t.total_jobs, t.cmd_delete, t.cmd_pause_tube),
                (mt.total_jobs, mt.cmd_delete, mt.pause_ct),
                "tube {name}"
            );
            let (pause, left) = match mt.pause {
                Some((length, until)) if until > now => (length / S, (until - now) / S),
                _ => (0, 0),
            };
            assert_eq!(
                (t.pause, t.pause_time_left),
                (pause, left),
                "pause of tube {name}"
            );
        }

        for (c, conn) in self.conns.iter().enumerate() {
            assert_eq!(
                st.tube_used(conn.id),
                conn.use_tube.as_bytes(),
                "conn {c} uses"
            );
            assert_eq!(watched(st, conn.id), conn.watch, "conn {c} watches");
            // The store's own invariant: nobody waits on an open tube with ready jobs.
            if conn.wait.is_some() {
                for t in &conn.watch {
                    assert!(
                        self.paused(t) || self.ready_in(t).next().is_none(),
                        "conn {c} waits while {t} has ready jobs"
                    );
                }
            }
        }
    }
}
