//! The live jobs of a log as replay goes through it: each job's latest snapshot
//! with the changes recorded after it.
//!
//! Replay touches every record once, so this is kept cheap: jobs sit in a `Vec`
//! in the order they first appeared (put order, which is id order unless
//! compaction moved an old job forward after its segment went; they are not
//! sorted, as a million jobs take a tenth of a second to sort and the store does
//! not need it), an [`IdIndex`] finds a job's place from its id, a job's body is
//! copied out of the segment once, straight into the form the store keeps (with
//! its CRLF, in an allocation of exactly that size), and tube names are stored
//! once each.

use std::collections::HashMap;

use super::decode::{JobRef, RecordRef};
use super::format::{job_record_len, JobFields, JobRecord, Record, StoredState};
use crate::idindex::IdIndex;

/// One live job: its latest snapshot with the changes recorded after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveredJob {
    /// As stored: a reserved job's state is reserved; the server makes it ready.
    pub fields: JobFields,
    /// Index of its tube's name in `Recovered::tubes`.
    pub tube: u32,
    /// The segment holding its latest snapshot.
    pub home: u64,
    /// The body followed by CRLF, as the store keeps it.
    pub body_crlf: Box<[u8]>,
}

impl RecoveredJob {
    /// The body as put (without the CRLF).
    pub fn body(&self) -> &[u8] {
        &self.body_crlf[..self.body_crlf.len().saturating_sub(2)]
    }

    /// The job as a full snapshot record, given its tube's name.
    pub fn to_record(&self, tube: &[u8]) -> JobRecord {
        JobRecord {
            fields: self.fields,
            tube: tube.to_vec(),
            body: self.body().to_vec(),
        }
    }
}

/// The rule replay applies to a job's fields for a change recorded after its
/// snapshot (not for a snapshot, a delete or next-id, which change nothing here).
/// Also used by the table reader (`wal/table.rs`), so both read a log alike.
pub(super) fn apply_change(job: &mut JobFields, change: &Record) {
    match *change {
        Record::Reserve { .. } => {
            job.reserves = job.reserves.wrapping_add(1);
            job.state = StoredState::Reserved;
        }
        Record::Release {
            pri,
            delay,
            ready_at,
            ..
        } => {
            job.releases = job.releases.wrapping_add(1);
            job.pri = pri;
            job.delay = delay;
            job.ready_at = ready_at;
            job.state = if delay > 0 {
                StoredState::Delayed
            } else {
                StoredState::Ready
            };
        }
        Record::Bury { pri, bury_seq, .. } => {
            job.buries = job.buries.wrapping_add(1);
            job.pri = pri;
            job.bury_seq = bury_seq;
            job.state = StoredState::Buried;
        }
        Record::Kick { .. } => {
            job.kicks = job.kicks.wrapping_add(1);
            job.state = StoredState::Ready;
        }
        Record::Timeout { .. } => {
            job.timeouts = job.timeouts.wrapping_add(1);
            job.state = StoredState::Ready;
        }
        Record::Return { .. } => job.state = StoredState::Ready,
        Record::Job(_)
        | Record::Delete { .. }
        | Record::NextId { .. }
        | Record::Hold { .. }
        | Record::Outcome { .. }
        | Record::End { .. }
        | Record::Pause { .. } => {}
    }
}

/// Deleted jobs tolerated in the `Vec` before it is swept (and at most as many as
/// there are live jobs), so a log of many puts and deletes needs memory for its
/// live jobs only. (Tiny in unit tests, so they sweep often.)
const SWEEP_MIN: usize = if cfg!(test) { 3 } else { 4096 };

/// The set replay builds.
#[derive(Debug, Default)]
pub(super) struct LiveJobs {
    /// Live jobs, and jobs deleted since the last sweep (with an empty body: a
    /// live job's body has at least its CRLF).
    jobs: Vec<RecoveredJob>,
    /// Job id to its place in `jobs`, for live jobs.
    index: IdIndex,
    /// Deleted entries in `jobs`.
    dead: usize,
    /// Tube names, each once, where each is in that list, and the last one used.
    tubes: Vec<Vec<u8>>,
    tube_index: HashMap<Vec<u8>, u32>,
    last_tube: u32,
    /// The highest bury sequence number seen.
    pub max_bury_seq: u64,
    /// The bytes the live jobs' records take ([`job_record_len`]): what a
    /// snapshot image of them holds.
    record_bytes: u64,
}

impl LiveJobs {
    /// Apply one record read from segment `seq`.
    pub fn apply(&mut self, record: RecordRef<'_>, seq: u64) {
        match record {
            RecordRef::Job(job) => self.snapshot(&job, seq),
            RecordRef::Change(Record::Delete { id }) => {
                if let Some(at) = self.index.remove(id) {
                    self.record_bytes = self.record_bytes.saturating_sub(self.record_len(at));
                    self.jobs[at as usize].body_crlf = Box::default();
                    self.dead += 1;
                    if self.dead >= SWEEP_MIN && self.dead > self.index.len() {
                        self.sweep();
                    }
                }
            }
            RecordRef::Change(change) => self.change(&change),
        }
    }

    fn snapshot(&mut self, job: &JobRef<'_>, seq: u64) {
        self.max_bury_seq = self.max_bury_seq.max(job.fields.bury_seq);
        let mut body = Vec::with_capacity(job.body.len() + 2);
        body.extend_from_slice(job.body);
        body.extend_from_slice(b"\r\n");
        let entry = RecoveredJob {
            fields: job.fields,
            tube: self.tube(job.tube),
            home: seq,
            body_crlf: body.into_boxed_slice(),
        };
        self.record_bytes += job_record_len(job.tube.len(), job.body.len()) as u64;
        match self.index.get(job.fields.id) {
            // A later snapshot (compaction moved the job) replaces the earlier one.
            Some(at) => {
                self.record_bytes = self.record_bytes.saturating_sub(self.record_len(at));
                self.jobs[at as usize] = entry;
            }
            None => {
                self.index.insert(job.fields.id, self.jobs.len() as u32);
                self.jobs.push(entry);
            }
        }
    }

    /// The record length of the job at `at` in `jobs` (live).
    fn record_len(&self, at: u32) -> u64 {
        let job = &self.jobs[at as usize];
        let tube = self.tubes.get(job.tube as usize).map_or(0, Vec::len);
        job_record_len(tube, job.body().len()) as u64
    }

    /// A change to a job; one not (yet) known is ignored, because a later snapshot
    /// of it follows.
    fn change(&mut self, change: &Record) {
        let Some(at) = self.index.get(change.id()) else {
            return;
        };
        apply_change(&mut self.jobs[at as usize].fields, change);
        if let Record::Bury { bury_seq, .. } = *change {
            self.max_bury_seq = self.max_bury_seq.max(bury_seq);
        }
    }

    /// The index of a tube name, adding it the first time.
    fn tube(&mut self, name: &[u8]) -> u32 {
        // Jobs of one tube mostly come in runs: try the last one first.
        if let Some(last) = self.tubes.get(self.last_tube as usize) {
            if last.as_slice() == name {
                return self.last_tube;
            }
        }
        let i = match self.tube_index.get(name) {
            Some(&i) => i,
            None => {
                let i = self.tubes.len() as u32;
                self.tubes.push(name.to_vec());
                self.tube_index.insert(name.to_vec(), i);
                i
            }
        };
        self.last_tube = i;
        i
    }

    /// Drop the deleted entries and index the rest again.
    fn sweep(&mut self) {
        self.jobs.retain(|j| !j.body_crlf.is_empty());
        self.dead = 0;
        self.index = IdIndex::default();
        for (at, job) in self.jobs.iter().enumerate() {
            self.index.insert(job.fields.id, at as u32);
        }
    }

    /// The live jobs, in the order they first appeared, with their tube names
    /// (for a replica's snapshot image; the set stays as it is).
    pub fn live(&self) -> impl Iterator<Item = (&RecoveredJob, &[u8])> + '_ {
        self.jobs
            .iter()
            .filter(|j| !j.body_crlf.is_empty())
            .map(|j| {
                (
                    j,
                    self.tubes
                        .get(j.tube as usize)
                        .map_or(&[][..], Vec::as_slice),
                )
            })
    }

    /// The stored state of live job `id`.
    pub fn state(&self, id: u64) -> Option<StoredState> {
        let at = self.index.get(id)?;
        Some(self.jobs[at as usize].fields.state)
    }

    /// The tube names a job's `tube` indexes.
    pub fn tubes(&self) -> &[Vec<u8>] {
        &self.tubes
    }

    /// How many jobs are live.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// The bytes of the live jobs' records, as a snapshot image holds them.
    pub fn record_bytes(&self) -> u64 {
        self.record_bytes
    }

    /// The live jobs in the order they first appeared, and the tube names they
    /// refer to.
    pub fn finish(mut self) -> (Vec<RecoveredJob>, Vec<Vec<u8>>) {
        if self.dead > 0 {
            self.jobs.retain(|j| !j.body_crlf.is_empty());
        }
        (self.jobs, self.tubes)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    /// The rules of the log format, applied the plain way: a map of snapshots.
    #[derive(Default)]
    struct Model {
        jobs: BTreeMap<u64, (JobRecord, u64)>,
        max_bury_seq: u64,
    }

    impl Model {
        fn apply(&mut self, record: &Record, seq: u64) {
            let id = record.id();
            match record {
                Record::Job(job) => {
                    self.max_bury_seq = self.max_bury_seq.max(job.fields.bury_seq);
                    self.jobs.insert(id, (job.clone(), seq));
                }
                Record::Delete { .. } => {
                    self.jobs.remove(&id);
                }
                Record::NextId { .. } => {}
                change => {
                    let Some((JobRecord { fields: job, .. }, _)) = self.jobs.get_mut(&id) else {
                        return;
                    };
                    match *change {
                        Record::Reserve { .. } => {
                            job.reserves = job.reserves.wrapping_add(1);
                            job.state = StoredState::Reserved;
                        }
                        Record::Release {
                            pri,
                            delay,
                            ready_at,
                            ..
                        } => {
                            job.releases = job.releases.wrapping_add(1);
                            (job.pri, job.delay, job.ready_at) = (pri, delay, ready_at);
                            job.state = if delay > 0 {
                                StoredState::Delayed
                            } else {
                                StoredState::Ready
                            };
                        }
                        Record::Bury { pri, bury_seq, .. } => {
                            job.buries = job.buries.wrapping_add(1);
                            (job.pri, job.bury_seq) = (pri, bury_seq);
                            job.state = StoredState::Buried;
                            self.max_bury_seq = self.max_bury_seq.max(bury_seq);
                        }
                        Record::Kick { .. } => {
                            job.kicks = job.kicks.wrapping_add(1);
                            job.state = StoredState::Ready;
                        }
                        Record::Timeout { .. } => {
                            job.timeouts = job.timeouts.wrapping_add(1);
                            job.state = StoredState::Ready;
                        }
                        _ => {}
                    }
                }
            }
        }
    }

    fn snapshot(id: u64, tube: u8, pri: u32, state: u8, bury_seq: u64) -> Record {
        let state = [
            StoredState::Ready,
            StoredState::Delayed,
            StoredState::Buried,
            StoredState::Reserved,
        ][usize::from(state % 4)];
        Record::Job(JobRecord {
            fields: JobFields {
                id,
                pri,
                delay: pri % 3,
                ttr: 1 + pri % 5,
                state,
                created: -(id as i64),
                ready_at: i64::from(pri) * 7,
                bury_seq,
                reserves: pri % 2,
                timeouts: 0,
                releases: 1,
                buries: 2,
                kicks: 3,
            },
            tube: format!("tube{}", tube % 3).into_bytes(),
            body: vec![b'b'; (id % 5) as usize * 1000 + usize::from(tube)],
        })
    }

    /// Records about a few ids, so snapshots, moves, changes and deletes meet;
    /// `true` starts a new segment after the record.
    fn record() -> impl Strategy<Value = (Record, bool)> {
        let id = 1..24u64;
        let r = prop_oneof![
            4 => (id.clone(), any::<u8>(), 0..2000u32, any::<u8>(), 0..50u64)
                .prop_map(|(id, t, p, s, b)| snapshot(id, t, p, s, b)),
            1 => id.clone().prop_map(|id| Record::Reserve { id }),
            1 => (id.clone(), 0..9u32, 0..3u32)
                .prop_map(|(id, pri, delay)| Record::Release { id, pri, delay, ready_at: 5 }),
            1 => (id.clone(), 0..9u32, 0..99u64)
                .prop_map(|(id, pri, bury_seq)| Record::Bury { id, pri, bury_seq }),
            1 => id.clone().prop_map(|id| Record::Kick { id }),
            1 => id.clone().prop_map(|id| Record::Timeout { id }),
            3 => id.prop_map(|id| Record::Delete { id }),
            1 => (0..99u64).prop_map(|next_id| Record::NextId { next_id }),
        ];
        (r, proptest::bool::weighted(0.1))
    }

    /// Counters read from a log can hold any value; the changes after a snapshot
    /// wrap them around as the server's own counting does (in release builds),
    /// rather than overflowing.
    #[test]
    fn counters_at_their_largest_wrap_around() {
        let Record::Job(mut job) = snapshot(1, 0, 5, 0, 0) else {
            unreachable!()
        };
        let f = &mut job.fields;
        (f.reserves, f.timeouts, f.releases, f.buries, f.kicks) =
            (u32::MAX, u32::MAX, u32::MAX, u32::MAX, u32::MAX);
        let mut live = LiveJobs::default();
        let mut buf = Vec::new();
        for record in [
            Record::Job(job),
            Record::Reserve { id: 1 },
            Record::Timeout { id: 1 },
            Record::Release {
                id: 1,
                pri: 1,
                delay: 0,
                ready_at: 0,
            },
            Record::Bury {
                id: 1,
                pri: 1,
                bury_seq: 1,
            },
            Record::Kick { id: 1 },
        ] {
            buf.clear();
            record.encode(&mut buf);
            let (decoded, _) = RecordRef::decode(&buf).ok().flatten().expect("a record");
            live.apply(decoded, 1);
        }
        let (jobs, _) = live.finish();
        let f = jobs[0].fields;
        assert_eq!(
            (f.reserves, f.timeouts, f.releases, f.buries, f.kicks),
            (0, 0, 0, 0, 0)
        );
        assert_eq!(f.state, StoredState::Ready);
    }

    proptest! {
        #[test]
        fn replay_set_matches_the_plain_rules(records in proptest::collection::vec(record(), 0..300)) {
            let mut model = Model::default();
            let mut live = LiveJobs::default();
            let mut seq = 1;
            let mut buf = Vec::new();
            for (record, next_segment) in &records {
                model.apply(record, seq);
                buf.clear();
                record.encode(&mut buf);
                let (decoded, _) = RecordRef::decode(&buf).ok().flatten().expect("a record");
                live.apply(decoded, seq);
                seq += u64::from(*next_segment);
            }
            prop_assert_eq!(live.max_bury_seq, model.max_bury_seq);
            let image: usize = model
                .jobs
                .values()
                .map(|(job, _)| job_record_len(job.tube.len(), job.body.len()))
                .sum();
            prop_assert_eq!(live.record_bytes(), image as u64);
            let (mut jobs, tubes) = live.finish();
            jobs.sort_by_key(|j| j.fields.id);
            let got: Vec<(JobRecord, u64)> = jobs
                .iter()
                .map(|j| (j.to_record(&tubes[j.tube as usize]), j.home))
                .collect();
            let want: Vec<(JobRecord, u64)> = model.jobs.into_values().collect();
            prop_assert_eq!(got, want);
            for j in &jobs {
                prop_assert!(j.body_crlf.ends_with(b"\r\n"));
                prop_assert_eq!(j.body_crlf.len(), j.body().len() + 2);
            }
        }
    }
}
