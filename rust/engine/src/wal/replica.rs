//! A replica of the queue's committed state, for a replicated cluster (the
//! `beanpole-cluster` crate keeps one as its Raft state machine): the live jobs,
//! built from runs of journal records by the very rules a restart replays a log
//! with (`live.rs`), and written out and read back as one log segment image.
//!
//! A replicated entry carries the records one pass of the leader's store made,
//! encoded exactly as its log writes them, so one set of rules replays a log,
//! restores a restart and applies a replicated entry. A snapshot is a segment
//! holding one job record per live job and a next-id record: the same bytes a
//! compacted log would hold, readable by `beanpole binlog dump`.
//!
//! Imports the record format, in-place decoding and the live set only: nothing of
//! the store, the pipe or the writer, so a server without a cluster never runs it.

use thiserror::Error;

use super::decode::{JobRef, RecordRef};
use super::format::StoredState;
use super::format::{DecodeError, Header, Record, FRAME_LEN, HEADER_LEN};
use super::live::LiveJobs;
use super::recover::Recovered;
use super::session::{Kept, Sessions};

/// Why bytes handed to a replica are not a run of records or a snapshot image.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReplicaError {
    /// A record of the run does not decode (damage, or a sender that is not a
    /// beanpole of this format version).
    #[error("replicated records unreadable at byte {offset}: {reason}")]
    Record { offset: usize, reason: DecodeError },
    /// A zero length inside the run: runs are exact, with no padding.
    #[error("replicated records hold a zero length at byte {offset}")]
    Padding { offset: usize },
    /// The image's segment header does not decode.
    #[error("snapshot image header: {0}")]
    Header(DecodeError),
}

/// The committed state: the live jobs and the id floor.
#[derive(Debug)]
pub struct Replica {
    live: LiveJobs,
    /// The next job id to hand out: above every id seen, and at least every
    /// next-id record.
    next_id: u64,
    /// Highest bury sequence number seen (the store's `seq` floor at takeover).
    max_bury_seq: u64,
    /// Records applied since this replica was made or read.
    records: u64,
    /// Sessions' held jobs and recorded replies.
    sessions: Sessions,
    /// Paused tubes: name -> (delay in s, until in wall ns).
    pauses: std::collections::BTreeMap<Vec<u8>, (u32, i64)>,
}

impl Default for Replica {
    fn default() -> Self {
        Replica::new()
    }
}

impl Replica {
    /// The state of an empty queue.
    pub fn new() -> Replica {
        Replica {
            live: LiveJobs::default(),
            next_id: 1,
            max_bury_seq: 0,
            records: 0,
            sessions: Sessions::default(),
            pauses: std::collections::BTreeMap::new(),
        }
    }

    /// Apply one run of records (one replicated entry). The whole run is decoded
    /// first, so a damaged run changes nothing. Returns the records applied.
    pub fn apply_run(&mut self, bytes: &[u8]) -> Result<usize, ReplicaError> {
        let run = decode_run(bytes)?;
        let n = run.len();
        for record in run {
            self.apply_one(record);
        }
        Ok(n)
    }

    /// How many records a run holds, told by their frames' lengths alone
    /// (nothing decoded or checked): what [`Replica::apply_run`] reports for a
    /// whole run, known before it is applied.
    pub fn count_run(bytes: &[u8]) -> usize {
        let mut at = 0;
        let mut n = 0;
        while at + FRAME_LEN <= bytes.len() {
            let len = u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
            if len == 0 {
                break;
            }
            at += FRAME_LEN + len as usize;
            n += 1;
        }
        n
    }

    fn apply_one(&mut self, record: RecordRef<'_>) {
        self.records += 1;
        // A reply belongs to the sessions alone (the live set ignores it):
        // moved there as decoded.
        let record = match record {
            RecordRef::Change(Record::Outcome { owner, seq, reply }) => {
                self.sessions.outcome(owner, seq, Kept::new(reply));
                return;
            }
            other => other,
        };
        match &record {
            RecordRef::Change(Record::NextId { next_id }) => {
                self.next_id = self.next_id.max(*next_id);
            }
            RecordRef::Job(job) => {
                self.next_id = self.next_id.max(job.fields.id + 1);
                if let Some((owner, seq)) = job.put_by {
                    self.sessions
                        .outcome(owner, seq, Kept::Inserted(job.fields.id));
                }
            }
            RecordRef::Change(Record::Pause { tube, delay, until }) => {
                if *until == 0 {
                    self.pauses.remove(tube);
                } else {
                    self.pauses.insert(tube.clone(), (*delay, *until));
                }
            }
            RecordRef::Change(change) => self.sessions.apply(change),
        }
        self.live.apply(record, 0);
        self.max_bury_seq = self.max_bury_seq.max(self.live.max_bury_seq);
    }

    /// Whether live job `id` is reserved.
    fn reserved(&self, id: u64) -> bool {
        self.live.state(id) == Some(StoredState::Reserved)
    }

    /// The next job id a leader built from this state hands out.
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    /// The highest bury sequence number applied.
    pub fn max_bury_seq(&self) -> u64 {
        self.max_bury_seq
    }

    /// Live jobs.
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// The bytes the live jobs take in an image ([`Replica::write_image`]):
    /// nearly all of it, beside the sessions' last replies and the pauses.
    pub fn jobs_image_bytes(&self) -> u64 {
        self.live.record_bytes()
    }

    /// Whether no job is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records applied since this replica was made or read from an image.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The live jobs as snapshots (tube and body borrowed), in the order they
    /// first appeared.
    pub fn jobs(&self) -> impl Iterator<Item = JobRef<'_>> + '_ {
        self.live.live().map(|(job, tube)| JobRef {
            fields: job.fields,
            tube,
            body: job.body(),
            put_by: None,
        })
    }

    /// The state as a restart's replay would return it, for a store to take
    /// over (`Store::attach_log`): copies of the live jobs, by id.
    pub fn to_recovered(&self) -> Recovered {
        let mut recovered = Recovered {
            jobs: self.live.live().map(|(job, _)| job.clone()).collect(),
            tubes: self.live.tubes().to_vec(),
            next_id: self.next_id,
            max_bury_seq: self.max_bury_seq,
            held: self.sessions.held(|id| self.reserved(id)),
            sessions: self.sessions.replies(),
            pauses: self
                .pauses
                .iter()
                .map(|(t, &(d, u))| (t.clone(), d, u))
                .collect(),
            ..Recovered::default()
        };
        recovered.sort_jobs();
        recovered
    }

    /// Append the state as a segment image to `out`: a header (sequence 1, the id
    /// floor, `created` = the replicated clock `clock`), one job record per live
    /// job, and a next-id record.
    pub fn write_image(&self, clock: i64, out: &mut Vec<u8>) {
        let header = Header {
            seq: 1,
            next_id: self.next_id,
            created: clock,
        };
        out.extend_from_slice(&header.encode());
        for job in self.jobs() {
            job.encode(out);
        }
        self.sessions.encode(|id| self.reserved(id), out);
        for (tube, &(delay, until)) in &self.pauses {
            Record::Pause {
                tube: tube.clone(),
                delay,
                until,
            }
            .encode(out);
        }
        Record::NextId {
            next_id: self.next_id,
        }
        .encode(out);
    }

    /// Read a state written by [`Replica::write_image`]; also returns the clock
    /// it was written with.
    pub fn read_image(bytes: &[u8]) -> Result<(Replica, i64), ReplicaError> {
        let header = Header::decode(bytes).map_err(ReplicaError::Header)?;
        let mut replica = Replica::new();
        replica.next_id = replica.next_id.max(header.next_id);
        replica.apply_run(&bytes[HEADER_LEN..])?;
        replica.records = 0;
        Ok((replica, header.created))
    }
}

/// Decode every record of a run, or say where it is damaged.
fn decode_run(bytes: &[u8]) -> Result<Vec<RecordRef<'_>>, ReplicaError> {
    // Room for a run of puts and their outcomes (about 100 bytes a record) at
    // once, instead of growing by doubling.
    let mut run = Vec::with_capacity(bytes.len() / 96 + 1);
    let mut at = 0;
    while at < bytes.len() {
        match RecordRef::decode(&bytes[at..]) {
            Ok(Some((record, n))) => {
                run.push(record);
                at += n;
            }
            Ok(None) => return Err(ReplicaError::Padding { offset: at }),
            Err(reason) => return Err(ReplicaError::Record { offset: at, reason }),
        }
    }
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::format::{JobFields, JobRecord, StoredState};

    fn put(id: u64, tube: &[u8], body: &[u8]) -> Record {
        Record::Job(JobRecord {
            fields: JobFields {
                id,
                pri: 10,
                delay: 0,
                ttr: 60,
                state: StoredState::Ready,
                created: 5,
                ready_at: 0,
                bury_seq: 0,
                reserves: 0,
                timeouts: 0,
                releases: 0,
                buries: 0,
                kicks: 0,
            },
            tube: tube.to_vec(),
            body: body.to_vec(),
        })
    }

    fn run(records: &[Record]) -> Vec<u8> {
        let mut out = Vec::new();
        for r in records {
            r.encode(&mut out);
        }
        out
    }

    #[test]
    fn runs_apply_by_the_replay_rules_and_the_image_reads_back_the_same() {
        let mut replica = Replica::new();
        let first = run(&[put(1, b"a", b"one"), put(2, b"b", b"two")]);
        assert_eq!(replica.apply_run(&first), Ok(2));
        let second = run(&[
            Record::Reserve { id: 1 },
            Record::Bury {
                id: 1,
                pri: 3,
                bury_seq: 7,
            },
            Record::Delete { id: 2 },
            Record::NextId { next_id: 40 },
        ]);
        assert_eq!(replica.apply_run(&second), Ok(4));
        assert_eq!(replica.len(), 1);
        assert_eq!(replica.next_id(), 40);
        assert_eq!(replica.max_bury_seq(), 7);
        let job = replica.jobs().next().expect("job 1");
        assert_eq!(
            (job.fields.id, job.tube, job.body),
            (1, &b"a"[..], &b"one"[..])
        );
        assert_eq!(job.fields.state, StoredState::Buried);
        assert_eq!((job.fields.reserves, job.fields.buries), (1, 1));

        let mut image = Vec::new();
        replica.write_image(99, &mut image);
        // The jobs' share of the image is known without writing it: all of
        // it here but the header and the next-id record.
        let next_id_len = run(&[Record::NextId { next_id: 40 }]).len();
        assert_eq!(
            replica.jobs_image_bytes() as usize,
            image.len() - HEADER_LEN - next_id_len
        );
        let (back, clock) = Replica::read_image(&image).expect("image");
        assert_eq!(clock, 99);
        assert_eq!(back.next_id(), 40);
        assert_eq!(back.max_bury_seq(), 7);
        let a: Vec<_> = replica.jobs().map(|j| j.to_owned()).collect();
        let b: Vec<_> = back.jobs().map(|j| j.to_owned()).collect();
        assert_eq!(a, b);
    }

    #[test]
    fn a_run_is_counted_by_its_frames_as_applying_it_counts() {
        let records = [
            put(1, b"a", b"one"),
            Record::Reserve { id: 1 },
            put(2, b"b", b"two"),
            Record::Delete { id: 1 },
        ];
        for n in 0..=records.len() {
            let bytes = run(&records[..n]);
            assert_eq!(Replica::count_run(&bytes), n);
            assert_eq!(Replica::new().apply_run(&bytes), Ok(n));
        }
        // Zeros after the frames end the count (applying them is refused).
        let mut padded = run(&records);
        padded.extend_from_slice(&[0; 12]);
        assert_eq!(Replica::count_run(&padded), records.len());
    }

    #[test]
    fn a_damaged_run_changes_nothing() {
        let mut replica = Replica::new();
        let mut bytes = run(&[put(1, b"a", b"one"), put(2, b"a", b"two")]);
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert!(matches!(
            replica.apply_run(&bytes),
            Err(ReplicaError::Record { .. })
        ));
        assert!(replica.is_empty());
        assert_eq!(replica.next_id(), 1);
        let mut padded = run(&[put(1, b"a", b"one")]);
        padded.extend([0u8; 8]);
        assert!(matches!(
            replica.apply_run(&padded),
            Err(ReplicaError::Padding { .. })
        ));
        assert!(replica.is_empty());
        assert!(matches!(
            Replica::read_image(b"not an image"),
            Err(ReplicaError::Header(_))
        ));
    }
}
