//! beanpole's log as the bad-input tests see it: a segment's records found by
//! decoding, records sealed again after a change, and what replay must make of a
//! list of records (docs/log-format.md, "What is journaled, and replay"), applied
//! the plain way so it can be compared with what recovery returns.

use std::collections::BTreeMap;
use std::ops::Range;

use beanpole_engine::wal::format::{JobRecord, Record, StoredState, FRAME_LEN, HEADER_LEN};
use beanpole_engine::wal::recover::Recovered;

/// The records of a segment's bytes, with their byte ranges, up to the first one
/// that does not decode.
pub fn records_of(bytes: &[u8]) -> Vec<(Range<usize>, Record)> {
    let mut out = Vec::new();
    let mut at = HEADER_LEN;
    while let Some(Ok(Some((record, n)))) = bytes.get(at..).map(Record::decode) {
        out.push((at..at + n, record));
        at += n;
    }
    out
}

/// Make the checksum of the record at the start of `bytes` match its length
/// field and content again (as far as the bytes go).
pub fn reseal(bytes: &mut [u8]) {
    let Some(len) = bytes.get(..4) else { return };
    let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
    let Some(end) = FRAME_LEN.checked_add(len).filter(|&e| e <= bytes.len()) else {
        return;
    };
    let crc = crc32c::crc32c_append(crc32c::crc32c(&bytes[..4]), &bytes[FRAME_LEN..end]);
    bytes[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// What replay of some records must give.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Expected {
    pub jobs: BTreeMap<u64, JobRecord>,
    /// The highest id in any record; the next id must be above it.
    pub max_id: u64,
    /// The highest id floor of a next-id record.
    pub floor: u64,
}

impl Expected {
    pub fn of<'a>(records: impl IntoIterator<Item = &'a Record>) -> Expected {
        let mut e = Expected::default();
        for r in records {
            e.apply(r);
        }
        e
    }

    pub fn apply(&mut self, record: &Record) {
        let id = record.id();
        self.max_id = self.max_id.max(id);
        let job = match record {
            Record::Job(j) => {
                self.jobs.insert(id, j.clone());
                return;
            }
            Record::Delete { .. } => {
                self.jobs.remove(&id);
                return;
            }
            Record::NextId { next_id } => {
                self.floor = self.floor.max(*next_id);
                return;
            }
            _ => match self.jobs.get_mut(&id) {
                Some(j) => &mut j.fields,
                None => return,
            },
        };
        match *record {
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

/// The live jobs of a recovery, by id, as snapshots.
pub fn jobs_of(rec: &Recovered) -> BTreeMap<u64, JobRecord> {
    rec.jobs
        .iter()
        .map(|j| (j.fields.id, rec.record(j)))
        .collect()
}

/// Two sets of jobs are the same; on a difference, says which ids differ (a full
/// dump of both sets would bury it).
pub fn assert_same_jobs(got: &BTreeMap<u64, JobRecord>, want: &BTreeMap<u64, JobRecord>) {
    let differ: Vec<u64> = got
        .keys()
        .chain(want.keys())
        .filter(|id| got.get(id) != want.get(id))
        .copied()
        .collect();
    if let Some(id) = differ.first() {
        panic!(
            "jobs {differ:?} differ; the first, {id}: got {:?}, want {:?}",
            got.get(id).map(|j| j.fields),
            want.get(id).map(|j| j.fields)
        );
    }
}
