//! Journaling store changes, restoring the store from a log, and compaction.
//!
//! Every change that matters after a restart makes one record: put (a full
//! snapshot), reserve, release (with any delay, including 0), bury (with its place
//! in the buried order), kick, TTR timeout and delete. Touch, delay expiry and pause
//! do not: after a restart a reserved job is ready again, a due delay has ended,
//! and pauses are not kept (as in beanstalkd).

use super::job::{Job, JobCounters, JobState};
use super::log::StoreLog;
use super::{ConnId, PutRefused, Store, SECOND};
use crate::wal::decode::JobRef;
use crate::wal::format::{job_record_len, JobFields, Record, StoredState, RELEASE_RECORD_LEN};
use crate::wal::recover::{Recovered, RecoveredJob};
use crate::wal::OpenedLog;

/// The largest record other than a job snapshot (a release).
const UPDATE_RECORD_MAX: usize = RELEASE_RECORD_LEN;
/// Live jobs moved per compaction step, so one step never holds the lock long.
const MOVES_PER_STEP: usize = 64;
/// Job-table slots looked at per compaction step.
const SCAN_PER_STEP: u32 = 4096;

/// The `binlog-*` values of stats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogStats {
    pub oldest_index: u64,
    pub current_index: u64,
    pub records_migrated: u64,
    pub records_written: u64,
    pub max_size: u64,
}

impl Store {
    /// Take over an opened log: bring back its jobs and journal from now on. The
    /// recovered jobs are moved into the store (`opened.recovered.jobs` is left
    /// empty): their bodies are already in the form the store keeps.
    pub fn attach_log(&mut self, opened: &mut OpenedLog, now: u64) {
        let mut log = StoreLog::new(opened, now);
        let recovered = &mut opened.recovered;
        self.next_id = self.next_id.max(recovered.next_id);
        self.seq = self.seq.max(recovered.max_bury_seq);
        let jobs = std::mem::take(&mut recovered.jobs);
        // A replicated state's reservations held by sessions (none otherwise).
        let held: std::collections::HashMap<u64, crate::wal::session::Held> =
            std::mem::take(&mut recovered.held)
                .into_iter()
                .map(|h| (h.id, h))
                .collect();
        let sessions = std::mem::take(&mut recovered.sessions);
        let pauses: Vec<(Vec<u8>, u32, u64)> = std::mem::take(&mut recovered.pauses)
            .into_iter()
            .map(|(t, d, u)| (t, d, log.mono(u)))
            .collect();
        let mut restore = Vec::new();
        let recovered = &*recovered;
        let tubes = self.restore_tubes(recovered, &jobs);
        self.jobs.reserve(jobs.len());
        // (bury_seq, id, slot): the buried order, ties as a walk by id meets them.
        let mut buried: Vec<(u64, u64, u32)> = Vec::new();
        for j in jobs {
            let Some(tube) = tubes.get(j.tube as usize).copied().flatten() else {
                continue;
            };
            log.recovered_job(j.home, recovered.snapshot_len(&j) as u64);
            self.tubes.get_mut(tube).jobs_ct += 1;
            let f = j.fields;
            let body = self.jobs.body(j.body_crlf);
            let slot = self.jobs.insert(Job {
                id: f.id,
                body,
                created: log.mono(f.created),
                deadline: 0,
                pri: f.pri,
                delay: f.delay,
                ttr: f.ttr.max(1),
                tube,
                pos: 0,
                home: j.home as u32,
                state: JobState::Ready,
            });
            self.jobs.set_counters(
                slot,
                JobCounters {
                    reserver: u32::MAX,
                    reserves: f.reserves,
                    timeouts: f.timeouts,
                    releases: f.releases,
                    buries: f.buries,
                    kicks: f.kicks,
                },
            );
            match f.state {
                StoredState::Reserved if held.contains_key(&f.id) => {
                    let h = held[&f.id];
                    restore.push((slot, h.owner, log.mono(h.deadline), h.seq));
                }
                StoredState::Ready | StoredState::Reserved => self.make_ready(slot, now),
                StoredState::Delayed => self.make_delayed(slot, log.mono(f.ready_at).max(now)),
                StoredState::Buried => buried.push((f.bury_seq, f.id, slot)),
            }
        }
        buried.sort_unstable();
        for (seq, _, slot) in buried {
            if let Some(job) = self.jobs.get_mut(slot) {
                job.state = JobState::Buried;
                job.deadline = seq;
                let tube = job.tube;
                self.tubes.get_mut(tube).buried.insert(seq, slot);
                self.counts.buried += 1;
            }
        }
        log.note_next_id(self.next_id);
        self.log = Some(log);
        if !restore.is_empty() || !sessions.is_empty() {
            self.restore_sessions(sessions, restore, now);
        }
        if !pauses.is_empty() {
            self.restore_pauses(&pauses, now);
        }
    }

    /// The store tube of each recovered tube name that has a job, made in the order
    /// of each tube's lowest job id (the order a walk of the jobs by id meets them,
    /// which is what `list-tubes` shows). A name whose jobs are all gone brings
    /// back no empty tube.
    fn restore_tubes(&mut self, recovered: &Recovered, jobs: &[RecoveredJob]) -> Vec<Option<u32>> {
        // Per recovered tube: its lowest job id, and its ready and delayed jobs
        // (to size its heaps once).
        let mut seen: Vec<Option<(u64, usize, usize)>> = vec![None; recovered.tubes.len()];
        for j in jobs {
            if let Some(entry) = seen.get_mut(j.tube as usize) {
                let (low, ready, delayed) = entry.get_or_insert((j.fields.id, 0, 0));
                *low = (*low).min(j.fields.id);
                match j.fields.state {
                    StoredState::Ready | StoredState::Reserved => *ready += 1,
                    StoredState::Delayed => *delayed += 1,
                    StoredState::Buried => {}
                }
            }
        }
        let mut order: Vec<(u64, usize)> = seen
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.map(|(low, _, _)| (low, i)))
            .collect();
        order.sort_unstable();
        let mut tubes = vec![None; recovered.tubes.len()];
        for (_, i) in order {
            let slot = self.tubes.find_or_create(&recovered.tubes[i]);
            if let Some((_, ready, delayed)) = seen[i] {
                let tube = self.tubes.get_mut(slot);
                tube.ready.reserve(ready);
                tube.delayed.reserve(delayed);
            }
            tubes[i] = Some(slot);
        }
        tubes
    }

    /// Whether a log is attached.
    pub fn has_log(&self) -> bool {
        self.log.is_some()
    }

    /// The `binlog-*` stats (all zero but the size without a log, and for a
    /// cluster's replicated store, whose log is no beanstalkd binlog).
    pub fn log_stats(&self) -> Option<LogStats> {
        let log = self.log.as_ref().filter(|l| !l.pipe().is_replicated());
        log.map(|l| LogStats {
            oldest_index: l.oldest(),
            current_index: l.current(),
            records_migrated: l.records_migrated,
            records_written: l.records_written,
            max_size: l.segment_size(),
        })
    }

    /// The log position of everything journaled so far.
    pub fn log_position(&self) -> Option<u64> {
        self.log.as_ref().map(StoreLog::position)
    }

    /// Hand this batch's records to the writer; the position replies wait for.
    pub fn flush_log(&mut self) -> Option<u64> {
        let next_id = self.next_id;
        self.log.as_ref()?.note_next_id(next_id);
        self.maintain_log();
        self.log.as_mut()?.flush()
    }

    /// Journal a record that changes nothing (the id floor as it is): a read
    /// barrier for a cluster leader whose lease has run out, whose commit shows
    /// it still leads.
    pub fn journal_barrier(&mut self) {
        let next_id = self.next_id;
        if let Some(log) = self.log.as_mut() {
            log.append(&Record::NextId { next_id });
        }
    }

    /// Journal a change. Commands whose change must not be lost check
    /// [`Store::log_room_for_update`] first and are refused when there is no room;
    /// what gets here without room is a reserve or a TTR timeout, which cannot be
    /// refused: its record is left out (the job's reserves or timeouts counter may
    /// then read one lower after a restart) and counted, rather than blocking every
    /// reply behind a write that cannot be placed.
    /// Journal a record however full the log is (a replicated cluster's
    /// session records: its log has no segments to fill).
    pub(super) fn journal_always(&mut self, record: &Record) {
        if let Some(log) = self.log.as_mut() {
            log.append(record);
        }
    }

    pub(super) fn journal(&mut self, record: Record) {
        if let Some(log) = self.log.as_mut() {
            if log.room_for_waiting(UPDATE_RECORD_MAX) {
                log.append(&record);
            } else {
                if log.records_dropped == 0 {
                    eprintln!(
                        "beanpole: log: no room for reserve/timeout records; leaving them out \
                         (counters may read lower after a restart) until there is room"
                    );
                }
                log.records_dropped += 1;
            }
        }
    }

    /// Whether a release, bury or kick can be journaled now; when not, the command
    /// is answered OUT_OF_MEMORY and changes nothing (as beanstalkd does when it
    /// cannot reserve log space for such an update).
    pub fn log_room_for_update(&self) -> bool {
        self.log
            .as_ref()
            .map_or(true, |l| l.room_for_waiting(UPDATE_RECORD_MAX))
    }

    pub(super) fn admit_put(&self, tube: u32, body_len: usize) -> Result<(), PutRefused> {
        match &self.log {
            None => Ok(()),
            Some(log) => {
                let len = job_record_len(self.tubes.get(tube).name.len(), body_len);
                log.admit(len).map_err(|_| PutRefused::NoSpace)
            }
        }
    }

    /// A job's snapshot, borrowing its tube name and body from the store.
    fn snapshot(&self, slot: u32, log: &StoreLog) -> Option<JobRef<'_>> {
        let job = self.jobs.get(slot)?;
        let counters = self.jobs.counters(slot);
        // A delayed job's ready time, or a buried job's place in the buried order.
        let (state, ready_at, bury_seq) = match job.state {
            JobState::Ready => (StoredState::Ready, 0, 0),
            JobState::Delayed => (StoredState::Delayed, log.wall(job.deadline), 0),
            JobState::Buried => (StoredState::Buried, 0, job.deadline),
            JobState::Reserved => (StoredState::Reserved, 0, 0),
        };
        Some(JobRef {
            fields: JobFields {
                id: job.id,
                pri: job.pri,
                delay: job.delay,
                ttr: job.ttr,
                state,
                created: log.wall(job.created),
                ready_at,
                bury_seq,
                reserves: counters.reserves,
                timeouts: counters.timeouts,
                releases: counters.releases,
                buries: counters.buries,
                kicks: counters.kicks,
            },
            tube: &self.tubes.get(job.tube).name,
            body: &job.body[..job.body_len()],
            put_by: None,
        })
    }

    /// A new job (called before it is placed in a queue, so its state is ready; a
    /// delayed put is stored with its ready time).
    pub(super) fn journal_put(&mut self, slot: u32, conn: ConnId, now: u64) {
        if self.log.is_none() {
            return;
        }
        let put_by = self.put_by(conn);
        let Some(mut log) = self.log.take() else {
            return;
        };
        if let Some(mut rec) = self.snapshot(slot, &log) {
            rec.put_by = put_by;
            let f = &mut rec.fields;
            if f.delay > 0 {
                f.state = StoredState::Delayed;
                f.ready_at = log.wall(now + u64::from(f.delay) * SECOND);
            }
            let home = log.add_job(&rec);
            if let Some(job) = self.jobs.get_mut(slot) {
                job.home = home as u32;
            }
        }
        self.log = Some(log);
    }

    pub(super) fn journal_release(&mut self, slot: u32, now: u64) {
        let Some(job) = self.jobs.get(slot) else {
            return;
        };
        let (id, pri, delay) = (job.id, job.pri, job.delay);
        let Some(log) = self.log.as_mut() else { return };
        let ready_at = if delay > 0 {
            log.wall(now + u64::from(delay) * SECOND)
        } else {
            0
        };
        log.append(&Record::Release {
            id,
            pri,
            delay,
            ready_at,
        });
    }

    pub(super) fn journal_bury(&mut self, slot: u32) {
        let Some(job) = self.jobs.get(slot) else {
            return;
        };
        let record = Record::Bury {
            id: job.id,
            pri: job.pri,
            bury_seq: job.deadline,
        };
        self.journal(record);
    }

    pub(super) fn journal_delete(&mut self, slot: u32) {
        let Some(job) = self.jobs.get(slot) else {
            return;
        };
        let (id, home) = (job.id, u64::from(job.home));
        let len = job_record_len(self.tubes.get(job.tube).name.len(), job.body_len()) as u64;
        if let Some(log) = self.log.as_mut() {
            log.delete_job(id, home, len);
        }
    }

    /// One bounded step of compaction: drop emptied old segments, and when the
    /// directory is more than twice the live data plus a segment, move the live
    /// jobs of the oldest segment forward so it can go.
    fn maintain_log(&mut self) {
        let Some(mut log) = self.log.take() else {
            return;
        };
        if let Some(oldest) = log.compact() {
            let slots = self.jobs.slots();
            let mut moved = 0;
            let mut looked = 0;
            while looked < SCAN_PER_STEP.min(slots) && moved < MOVES_PER_STEP {
                let slot = log.scan_cursor % slots.max(1);
                log.scan_cursor = log.scan_cursor.wrapping_add(1) % slots.max(1);
                looked += 1;
                let home = match self.jobs.get(slot) {
                    Some(job) if u64::from(job.home) == oldest => job.home,
                    _ => continue,
                };
                let Some(job) = self.jobs.get(slot) else {
                    continue;
                };
                let len = job_record_len(self.tubes.get(job.tube).name.len(), job.body_len());
                if !log.room_for(len) {
                    // Moving needs room too; compaction waits until there is some.
                    break;
                }
                if let Some(rec) = self.snapshot(slot, &log) {
                    let new_home = log.move_job(&rec, u64::from(home));
                    if let Some(job) = self.jobs.get_mut(slot) {
                        job.home = new_home as u32;
                    }
                    moved += 1;
                }
            }
        }
        self.log = Some(log);
    }
}
