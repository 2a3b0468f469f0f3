//! A full consistency check of the store, for tests and debugging: every job is in
//! exactly the container its state names, heaps are ordered, and every counter
//! equals what a recount finds.

use super::job::JobState;
use super::Store;
use crate::protocol::URGENT_THRESHOLD;

impl Store {
    /// Check every invariant; `Err` names the first one broken.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut ready = 0u64;
        let mut urgent = 0u64;
        let (mut reserved, mut delayed, mut buried) = (0u64, 0u64, 0u64);
        self.jobs.check()?;
        for (slot, job) in self.jobs.iter() {
            let counters = self.jobs.counters(slot);
            if (job.state == JobState::Reserved) != (counters.reserver != u32::MAX) {
                return Err(format!(
                    "job {} ({:?}) has reserver {}",
                    job.id, job.state, counters.reserver
                ));
            }
            let tube = self
                .tubes
                .try_get(job.tube)
                .ok_or_else(|| format!("job {} names a missing tube", job.id))?;
            let found = match job.state {
                JobState::Ready => {
                    ready += 1;
                    urgent += u64::from(job.pri < URGENT_THRESHOLD);
                    tube.ready
                        .get(job.pos as usize)
                        .map(|e| (e.slot, e.id, e.pri))
                        == Some((slot, job.id, job.pri))
                }
                JobState::Delayed => {
                    delayed += 1;
                    tube.delayed
                        .get(job.pos as usize)
                        .map(|e| (e.slot, e.id, e.key))
                        == Some((slot, job.id, job.deadline))
                }
                JobState::Buried => {
                    buried += 1;
                    tube.buried.get(&job.deadline) == Some(&slot)
                }
                JobState::Reserved => {
                    reserved += 1;
                    self.conn(counters.reserver)
                        .is_some_and(|c| c.reserved.get(job.pos as usize) == Some(&slot))
                }
            };
            if !found {
                return Err(format!(
                    "job {} is not where its state ({:?}) says",
                    job.id, job.state
                ));
            }
        }
        let c = &self.counts;
        let pairs = [
            ("ready", ready, c.ready),
            ("urgent", urgent, c.urgent),
            ("reserved", reserved, c.reserved),
            ("delayed", delayed, c.delayed),
            ("buried", buried, c.buried),
        ];
        for (name, counted, kept) in pairs {
            if counted != kept {
                return Err(format!("{name}: counted {counted}, kept {kept}"));
            }
        }
        let mut in_tubes = 0usize;
        for &t in self.tubes.order() {
            let tube = self.tubes.get(t);
            if !tube.ready.is_valid() || !tube.delayed.is_valid() {
                return Err(format!("tube {:?}: heap out of order", tube.name));
            }
            in_tubes += tube.ready.len() + tube.delayed.len() + tube.buried.len();
            let tube_jobs = self.jobs.iter().filter(|(_, j)| j.tube == t).count() as u64;
            if tube_jobs != tube.jobs_ct {
                return Err(format!(
                    "tube {:?}: {tube_jobs} jobs, jobs_ct {}",
                    tube.name, tube.jobs_ct
                ));
            }
            if t != self.default_tube && tube.unreferenced() {
                return Err(format!("tube {:?} is unreferenced but kept", tube.name));
            }
        }
        if in_tubes as u64 + reserved != self.jobs.len() as u64 {
            return Err("jobs in queues and reservations do not add up to the table".into());
        }
        let waiting = self
            .conns
            .iter()
            .flatten()
            .filter(|c| c.wait.is_some())
            .count() as u64;
        if waiting != c.waiting {
            return Err(format!("waiting: counted {waiting}, kept {}", c.waiting));
        }
        self.check_wait_lists()?;
        if self.timers.len()
            > 2 * self.jobs.len() + 2 * self.tubes.len() + 2 * self.conns.len() + 200
        {
            return Err(format!(
                "{} timers for {} jobs: stale entries pile up",
                self.timers.len(),
                self.jobs.len()
            ));
        }
        Ok(())
    }
}
