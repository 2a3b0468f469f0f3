//! The on-disk format of beanpole's write-ahead log, version [`FORMAT_VERSION`].
//!
//! A log directory holds a `lock` file and segments named `NNNNNNNNNN.log` (the
//! segment's sequence number, ten decimal digits). Every integer is little-endian.
//!
//! ```text
//! segment header (HEADER_LEN = 40 bytes)
//!   0  magic        8 bytes  "BEANPOLE"
//!   8  version      u32      FORMAT_VERSION
//!  12  header_len   u32      40
//!  16  seq          u64      this segment's sequence number
//!  24  next_id      u64      the server's next job id when the segment was started
//!  32  created      i64      wall-clock time the segment was started, ns since 1970
//! records, from offset 40, back to back:
//!   0  len          u32      bytes of kind + payload (never 0)
//!   4  crc          u32      CRC32C of the len field's 4 bytes, the kind and the payload
//!   8  kind         u8
//!   9  payload      len - 1 bytes
//! ```
//!
//! Segments are preallocated with zeros, so a `len` of 0 marks the end of the
//! written part. Record kinds and payloads:
//!
//! | kind | name    | payload |
//! | ---- | ------- | ------- |
//! | 1    | job     | id u64, pri u32, delay u32 (s), ttr u32 (s), state u8 (0 ready, 1 delayed, 2 buried, 3 reserved), created i64 (wall ns), ready_at i64 (wall ns, delayed jobs), bury_seq u64, reserves u32, timeouts u32, releases u32, buries u32, kicks u32, tube_len u16, tube, body_len u32, body (without CRLF) |
//! | 2    | reserve | id u64 |
//! | 3    | release | id u64, pri u32, delay u32 (s), ready_at i64 (wall ns) |
//! | 4    | bury    | id u64, pri u32, bury_seq u64 |
//! | 5    | kick    | id u64 |
//! | 6    | timeout | id u64 |
//! | 7    | delete  | id u64 |
//! | 8    | next-id | next_id u64: the next job id, written before compaction removes segments |
//! | 9    | hold    | id u64, owner u64 (session), deadline i64 (wall ns, the TTR's end), seq u64 (the session's command that reserved it) |
//! | 10   | return  | id u64: a reservation given back when its session ended: ready, no counter changes |
//! | 11   | outcome | owner u64, seq u64, reply_len u32, reply: the reply a session's command got |
//! | 12   | end     | owner u64: the session ended |
//! | 13   | pause   | delay u32 (s), until i64 (wall ns; 0: not paused), tube_len u16, tube |
//! | 14   | put     | a `job` payload, then owner u64 (session), seq u64: the job its session's command `seq` put; its reply, `INSERTED id`, is implied |
//!
//! A `job` record is a full snapshot: written by put, and again when compaction
//! moves a live job out of an old segment. The other kinds change one job. Replay
//! applies records in segment order; a change to a job not (yet) known is ignored,
//! because a later snapshot of it follows. Buried jobs are ordered by `bury_seq`.
//!
//! Kinds 9 to 13 are written only into a replicated cluster's entries and
//! snapshot images (docs/cluster.md, "Sessions"): they keep a forwarded client
//! connection's reservations and the replies of its last commands, and a tube's
//! pause, through a change of leader. A single server's segments never hold them; a reader of
//! this version accepts them anywhere.

use thiserror::Error;

/// The format version written into every segment header. Bump it whenever any
/// layout above changes, and keep reading the old versions.
pub const FORMAT_VERSION: u32 = 1;
pub const MAGIC: &[u8; 8] = b"BEANPOLE";
pub const HEADER_LEN: usize = 40;
/// Bytes before a record's kind: len and crc.
pub const FRAME_LEN: usize = 8;
/// The largest record payload accepted when reading (a 1 GiB body plus fields).
pub const MAX_RECORD: usize = (1 << 30) + 4096;
/// Size on disk of a delete record (space for it is reserved for every live job).
pub const DELETE_RECORD_LEN: usize = FRAME_LEN + 1 + 8;
/// Job ids in a log are below this, and id floors (`next_id`) at most this. Ids
/// start at 1 and go up by one per put, so only damage makes a larger one; a
/// record or header that holds one is unreadable, so no reader's arithmetic on
/// ids can overflow and the server can never run out of ids.
pub const ID_LIMIT: u64 = 1 << 63;

/// A job's state as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoredState {
    Ready = 0,
    Delayed = 1,
    Buried = 2,
    Reserved = 3,
}

/// A job's fixed-size fields: everything in a job record but the tube and the
/// body, in the same order and units. The owned [`JobRecord`], the borrowed
/// [`JobRef`] and replay's [`RecoveredJob`](super::live::RecoveredJob) each hold
/// one, so converting between them copies this one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobFields {
    pub id: u64,
    pub pri: u32,
    pub delay: u32,
    pub ttr: u32,
    pub state: StoredState,
    pub created: i64,
    pub ready_at: i64,
    pub bury_seq: u64,
    pub reserves: u32,
    pub timeouts: u32,
    pub releases: u32,
    pub buries: u32,
    pub kicks: u32,
}

/// A full job snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRecord {
    pub fields: JobFields,
    pub tube: Vec<u8>,
    pub body: Vec<u8>,
}

/// One log record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    Job(JobRecord),
    Reserve {
        id: u64,
    },
    Release {
        id: u64,
        pri: u32,
        delay: u32,
        ready_at: i64,
    },
    Bury {
        id: u64,
        pri: u32,
        bury_seq: u64,
    },
    Kick {
        id: u64,
    },
    Timeout {
        id: u64,
    },
    Delete {
        id: u64,
    },
    /// No job: the lowest id the server may hand out next.
    NextId {
        next_id: u64,
    },
    /// The job, reserved by the session `owner`'s command `seq`, is held until
    /// `deadline` (wall ns). Written after a session's reserve and touch.
    Hold {
        id: u64,
        owner: u64,
        deadline: i64,
        seq: u64,
    },
    /// A held job given back because its session ended: ready again.
    Return {
        id: u64,
    },
    /// The reply the session `owner`'s command `seq` got.
    Outcome {
        owner: u64,
        seq: u64,
        reply: Vec<u8>,
    },
    /// The session `owner` ended.
    End {
        owner: u64,
    },
    /// `pause-tube tube delay`: paused until `until` (wall ns), or no longer
    /// paused (`until` 0).
    Pause {
        tube: Vec<u8>,
        delay: u32,
        until: i64,
    },
}

/// A segment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub seq: u64,
    pub next_id: u64,
    pub created: i64,
}

/// Why bytes are not a valid header or record.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    #[error("not a beanpole log segment (bad magic)")]
    BadMagic,
    #[error("log format version {0} is not supported (this build reads version {FORMAT_VERSION})")]
    Version(u32),
    #[error("record runs past the end of the data")]
    Truncated,
    #[error("record checksum mismatch")]
    Checksum,
    #[error("record length {0} is impossible")]
    Length(u32),
    #[error("unknown record kind {0}")]
    Kind(u8),
    #[error("malformed record payload")]
    Payload,
    #[error("id {0} is out of range (ids are below {ID_LIMIT})")]
    Id(u64),
}

impl Header {
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[..8].copy_from_slice(MAGIC);
        out[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        out[12..16].copy_from_slice(&(HEADER_LEN as u32).to_le_bytes());
        out[16..24].copy_from_slice(&self.seq.to_le_bytes());
        out[24..32].copy_from_slice(&self.next_id.to_le_bytes());
        out[32..40].copy_from_slice(&self.created.to_le_bytes());
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Header, DecodeError> {
        if bytes.len() < HEADER_LEN {
            return Err(DecodeError::Truncated);
        }
        if &bytes[..8] != MAGIC {
            return Err(DecodeError::BadMagic);
        }
        let mut r = Reader(&bytes[8..]);
        let version = r.u32()?;
        if version != FORMAT_VERSION {
            return Err(DecodeError::Version(version));
        }
        let _header_len = r.u32()?;
        let header = Header {
            seq: r.u64()?,
            next_id: r.u64()?,
            created: r.i64()?,
        };
        if header.next_id > ID_LIMIT {
            return Err(DecodeError::Id(header.next_id));
        }
        Ok(header)
    }
}

impl JobRecord {
    /// The snapshot as a borrowed view, which is what encodes it.
    pub fn as_ref(&self) -> JobRef<'_> {
        JobRef {
            fields: self.fields,
            tube: &self.tube,
            body: &self.body,
            put_by: None,
        }
    }
}

impl JobRef<'_> {
    /// Append the framed job record to `out`; returns its length on disk
    /// ([`job_record_len`]). The only encoder of job snapshots: the store encodes
    /// from its own tube name and body without copying them first.
    pub fn encode(&self, out: &mut Vec<u8>) -> usize {
        // A `put` record (kind 14) is a `job` record (kind 1) and its session.
        let (kind, by) = match self.put_by {
            Some(_) => (14, PUT_BY_LEN),
            None => (1, 0),
        };
        let len = job_record_len(self.tube.len(), self.body.len()) + by;
        out.reserve(len);
        let start = out.len();
        let f = &self.fields;
        let fixed = Fields::<JOB_FIXED_LEN>::new(kind)
            .u64(f.id)
            .u32(f.pri)
            .u32(f.delay)
            .u32(f.ttr)
            .u8(f.state as u8)
            .i64(f.created)
            .i64(f.ready_at)
            .u64(f.bury_seq)
            .u32(f.reserves)
            .u32(f.timeouts)
            .u32(f.releases)
            .u32(f.buries)
            .u32(f.kicks)
            .u16(self.tube.len() as u16)
            .done();
        out.extend_from_slice(&fixed);
        out.extend_from_slice(self.tube);
        out.extend_from_slice(&(self.body.len() as u32).to_le_bytes());
        out.extend_from_slice(self.body);
        if let Some((owner, seq)) = self.put_by {
            out.extend_from_slice(&owner.to_le_bytes());
            out.extend_from_slice(&seq.to_le_bytes());
        }
        seal(&mut out[start..])
    }
}

impl Record {
    /// Append the framed record to `out`; returns its length on disk.
    pub fn encode(&self, out: &mut Vec<u8>) -> usize {
        match *self {
            Record::Job(ref j) => j.as_ref().encode(out),
            Record::Reserve { id } => id_record(out, 2, id),
            Record::Release {
                id,
                pri,
                delay,
                ready_at,
            } => append_sealed(
                out,
                Fields::<RELEASE_RECORD_LEN>::new(3)
                    .u64(id)
                    .u32(pri)
                    .u32(delay)
                    .i64(ready_at)
                    .done(),
            ),
            Record::Bury { id, pri, bury_seq } => append_sealed(
                out,
                Fields::<BURY_RECORD_LEN>::new(4)
                    .u64(id)
                    .u32(pri)
                    .u64(bury_seq)
                    .done(),
            ),
            Record::Kick { id } => id_record(out, 5, id),
            Record::Timeout { id } => id_record(out, 6, id),
            Record::Delete { id } => id_record(out, 7, id),
            Record::NextId { next_id } => id_record(out, 8, next_id),
            Record::Hold {
                id,
                owner,
                deadline,
                seq,
            } => append_sealed(
                out,
                Fields::<HOLD_RECORD_LEN>::new(9)
                    .u64(id)
                    .u64(owner)
                    .i64(deadline)
                    .u64(seq)
                    .done(),
            ),
            Record::Return { id } => id_record(out, 10, id),
            Record::Outcome {
                owner,
                seq,
                ref reply,
            } => encode_outcome(out, owner, seq, reply),
            Record::End { owner } => id_record(out, 12, owner),
            Record::Pause {
                ref tube,
                delay,
                until,
            } => sized_record(out, 13, |out| {
                out.extend_from_slice(&delay.to_le_bytes());
                out.extend_from_slice(&until.to_le_bytes());
                out.extend_from_slice(&(tube.len() as u16).to_le_bytes());
                out.extend_from_slice(tube);
            }),
        }
    }

    /// The id of the job the record is about.
    pub fn id(&self) -> u64 {
        match self {
            Record::Job(j) => j.fields.id,
            Record::Reserve { id }
            | Record::Release { id, .. }
            | Record::Bury { id, .. }
            | Record::Kick { id }
            | Record::Timeout { id }
            | Record::Delete { id }
            | Record::Hold { id, .. }
            | Record::Return { id } => *id,
            Record::NextId { .. }
            | Record::Outcome { .. }
            | Record::End { .. }
            | Record::Pause { .. } => 0,
        }
    }
}

/// Bytes of a job record before its tube: the frame, the kind, the fixed-size
/// fields and the tube's length.
pub(super) const JOB_FIXED_LEN: usize = FRAME_LEN + 1 + 8 + 4 * 3 + 1 + 8 * 3 + 4 * 5 + 2;
/// Size on disk of a release record, the largest record other than a job.
pub const RELEASE_RECORD_LEN: usize = FRAME_LEN + 1 + 8 + 4 + 4 + 8;
pub(super) const BURY_RECORD_LEN: usize = FRAME_LEN + 1 + 8 + 4 + 8;
pub(super) const HOLD_RECORD_LEN: usize = FRAME_LEN + 1 + 8 * 4;
/// The longest reply an outcome record keeps.
pub const MAX_OUTCOME_REPLY: usize = 1 << 20;

/// What a `put` record adds to a `job` record: its session and command.
pub const PUT_BY_LEN: usize = 16;

/// Length on disk of a job snapshot for this tube and body length.
pub fn job_record_len(tube_len: usize, body_len: usize) -> usize {
    JOB_FIXED_LEN + tube_len + 4 + body_len
}

/// A record (or its fixed-size start) of exactly `N` bytes built on the stack, so
/// it reaches the output buffer with one append. The frame is left zero for
/// [`seal`].
struct Fields<const N: usize> {
    buf: [u8; N],
    at: usize,
}

impl<const N: usize> Fields<N> {
    #[inline(always)]
    fn new(kind: u8) -> Self {
        let mut buf = [0u8; N];
        buf[FRAME_LEN] = kind;
        Fields {
            buf,
            at: FRAME_LEN + 1,
        }
    }

    #[inline(always)]
    fn put<const M: usize>(&mut self, bytes: [u8; M]) -> &mut Self {
        self.buf[self.at..self.at + M].copy_from_slice(&bytes);
        self.at += M;
        self
    }

    #[inline(always)]
    fn u8(&mut self, v: u8) -> &mut Self {
        self.put([v])
    }
    #[inline(always)]
    fn u16(&mut self, v: u16) -> &mut Self {
        self.put(v.to_le_bytes())
    }
    #[inline(always)]
    fn u32(&mut self, v: u32) -> &mut Self {
        self.put(v.to_le_bytes())
    }
    #[inline(always)]
    fn u64(&mut self, v: u64) -> &mut Self {
        self.put(v.to_le_bytes())
    }
    #[inline(always)]
    fn i64(&mut self, v: i64) -> &mut Self {
        self.put(v.to_le_bytes())
    }

    /// The bytes, which must all have been written.
    #[inline(always)]
    fn done(&mut self) -> [u8; N] {
        assert_eq!(self.at, N, "record fields do not fill the record");
        self.buf
    }
}

fn id_record(out: &mut Vec<u8>, kind: u8, id: u64) -> usize {
    append_sealed(out, Fields::<DELETE_RECORD_LEN>::new(kind).u64(id).done())
}

/// Append a record of `kind` whose payload `payload` writes (a record with a
/// field of its own length), framed and sealed.
fn sized_record(out: &mut Vec<u8>, kind: u8, payload: impl FnOnce(&mut Vec<u8>)) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0; FRAME_LEN]);
    out.push(kind);
    payload(out);
    seal(&mut out[start..])
}

/// Append the framed outcome record of session `owner`'s command `seq`,
/// answered `reply` (what [`Record::Outcome`] encodes, from a borrowed reply);
/// returns its length on disk.
pub fn encode_outcome(out: &mut Vec<u8>, owner: u64, seq: u64, reply: &[u8]) -> usize {
    sized_record(out, 11, |out| {
        out.extend_from_slice(&owner.to_le_bytes());
        out.extend_from_slice(&seq.to_le_bytes());
        out.extend_from_slice(&(reply.len() as u32).to_le_bytes());
        out.extend_from_slice(reply);
    })
}

/// Seal a whole record built on the stack and append it.
fn append_sealed<const N: usize>(out: &mut Vec<u8>, mut record: [u8; N]) -> usize {
    seal(&mut record);
    out.extend_from_slice(&record);
    N
}

/// Fill in len and crc of `record`, a whole framed record; returns its length.
fn seal(record: &mut [u8]) -> usize {
    let len = (record.len() - FRAME_LEN) as u32;
    record[..4].copy_from_slice(&len.to_le_bytes());
    let crc = checksum(&len.to_le_bytes(), &record[FRAME_LEN..]);
    record[4..8].copy_from_slice(&crc.to_le_bytes());
    record.len()
}

pub(super) fn checksum(len: &[u8], body: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(len), body)
}

/// A job snapshot decoded in place: its tube and body borrow the record's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobRef<'a> {
    pub fields: JobFields,
    pub tube: &'a [u8],
    pub body: &'a [u8],
    /// The session and command that put the job, in a replicated cluster's
    /// log (a `put` record): the record stands for that command's reply too.
    /// Not kept in a [`JobRecord`].
    pub put_by: Option<(u64, u64)>,
}

impl JobRef<'_> {
    pub fn to_owned(&self) -> JobRecord {
        JobRecord {
            fields: self.fields,
            tube: self.tube.to_vec(),
            body: self.body.to_vec(),
        }
    }
}

/// Reads little-endian fields off the front of a slice.
pub(super) struct Reader<'a>(pub(super) &'a [u8]);

impl<'a> Reader<'a> {
    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.0.len() < n {
            return Err(DecodeError::Payload);
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    pub(super) fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    pub(super) fn u16(&mut self) -> Result<u16, DecodeError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    pub(super) fn u32(&mut self) -> Result<u32, DecodeError> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(a))
    }
    pub(super) fn u64(&mut self) -> Result<u64, DecodeError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    pub(super) fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(self.u64()? as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::decode::RecordRef;

    fn job() -> JobRecord {
        JobRecord {
            fields: JobFields {
                id: 7,
                pri: 1024,
                delay: 5,
                ttr: 60,
                state: StoredState::Delayed,
                created: 1_700_000_000_000_000_000,
                ready_at: 1_700_000_005_000_000_000,
                bury_seq: 0,
                reserves: 1,
                timeouts: 2,
                releases: 3,
                buries: 4,
                kicks: 5,
            },
            tube: b"emails$(1)".to_vec(),
            body: b"a\0b\r\nc".to_vec(),
        }
    }

    #[test]
    fn every_record_round_trips() {
        let records = vec![
            Record::Job(job()),
            Record::Reserve { id: 1 },
            Record::Release {
                id: 2,
                pri: 3,
                delay: 4,
                ready_at: -5,
            },
            Record::Bury {
                id: 6,
                pri: 7,
                bury_seq: 8,
            },
            Record::Kick { id: 9 },
            Record::Timeout { id: 10 },
            Record::Delete { id: ID_LIMIT - 1 },
            Record::NextId { next_id: ID_LIMIT },
            Record::Hold {
                id: 11,
                owner: u64::MAX,
                deadline: -12,
                seq: 13,
            },
            Record::Return { id: 14 },
            Record::Outcome {
                owner: 15,
                seq: 16,
                reply: b"INSERTED 17\r\n".to_vec(),
            },
            Record::Outcome {
                owner: 1,
                seq: 2,
                reply: Vec::new(),
            },
            Record::End { owner: u64::MAX },
            Record::Pause {
                tube: b"mail".to_vec(),
                delay: 30,
                until: 1_700_000_030_000_000_000,
            },
        ];
        let mut buf = Vec::new();
        for r in &records {
            let n = r.encode(&mut buf);
            assert_eq!(n, buf.len() - buf[..buf.len() - n].len());
        }
        let mut at = 0;
        for r in &records {
            let (got, n) = Record::decode(&buf[at..]).ok().flatten().expect("a record");
            assert_eq!(&got, r);
            at += n;
        }
        assert_eq!(Record::decode(&[0, 0, 0, 0, 0]), Ok(None));
        assert_eq!(
            Record::Delete { id: 1 }.encode(&mut Vec::new()),
            DELETE_RECORD_LEN
        );
        let j = job();
        assert_eq!(
            Record::Job(j.clone()).encode(&mut Vec::new()),
            job_record_len(j.tube.len(), j.body.len())
        );
    }

    /// The exact bytes of every kind of record (docs/log-format.md, version 1): a
    /// change here is a format change.
    #[test]
    fn encoding_is_the_documented_layout() {
        let mut job = job();
        job.fields.id = 0x0102_0304_0506_0708;
        job.fields.bury_seq = 9;
        job.tube = b"emails".to_vec();
        let cases = [
            (
                Record::Job(job),
                "540000003180724801080706050403020100040000050000003c0000000100002a36fe9c97\
                 1700f22f60ff9c97170900000000000000010000000200000003000000040000000500000006\
                 00656d61696c73060000006100620d0a63",
            ),
            (
                Record::Reserve { id: 1 },
                "090000001e8f59ab020100000000000000",
            ),
            (
                Record::Release {
                    id: 2,
                    pri: 3,
                    delay: 4,
                    ready_at: -5,
                },
                "19000000b4a167600302000000000000000300000004000000fbffffffffffffff",
            ),
            (
                Record::Bury {
                    id: 6,
                    pri: 7,
                    bury_seq: 8,
                },
                "150000002be00d30040600000000000000070000000800000000000000",
            ),
            (Record::Kick { id: 9 }, "09000000de45022e050900000000000000"),
            (
                Record::Timeout { id: 10 },
                "090000009ecee9ec060a00000000000000",
            ),
            (
                Record::Delete { id: u64::MAX },
                "090000000f1fdb0c07ffffffffffffffff",
            ),
            (
                Record::NextId { next_id: 77 },
                "090000006dea9d87084d00000000000000",
            ),
        ];
        for (record, want) in cases {
            let mut buf = vec![0xaa];
            let n = record.encode(&mut buf);
            let hex: String = buf[1..].iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(hex, want, "{record:?}");
            assert_eq!(n, want.len() / 2);
            assert_eq!(buf[0], 0xaa);
        }
    }

    #[test]
    fn a_borrowed_job_encodes_as_the_owned_one() {
        let owned = job();
        let tube = owned.tube.clone();
        let body = owned.body.clone();
        let borrowed = JobRef {
            tube: &tube,
            body: &body,
            ..owned.as_ref()
        };
        assert_eq!(borrowed.to_owned(), owned);
        let mut from_record = b"before".to_vec();
        let mut from_ref = b"before".to_vec();
        let n = Record::Job(owned.clone()).encode(&mut from_record);
        assert_eq!(borrowed.encode(&mut from_ref), n);
        assert_eq!(from_ref, from_record);
        assert_eq!(n, job_record_len(tube.len(), body.len()));
        match RecordRef::decode(&from_ref[6..]) {
            Ok(Some((RecordRef::Job(got), len))) => {
                assert_eq!(got, borrowed);
                assert_eq!(len, n);
            }
            other => panic!("decoded as {other:?}"),
        }
        // Empty tube and body, and a body large enough to need a big reservation.
        for (tube, body) in [(&b""[..], vec![]), (&b"t"[..], vec![7u8; 70_000])] {
            let j = JobRef {
                tube,
                body: &body,
                ..owned.as_ref()
            };
            let mut buf = Vec::new();
            let n = j.encode(&mut buf);
            assert_eq!(n, buf.len());
            assert_eq!(n, job_record_len(tube.len(), body.len()));
            assert_eq!(RecordRef::decode(&buf), Ok(Some((RecordRef::Job(j), n))));
        }
    }

    #[test]
    fn a_put_record_is_a_job_record_with_its_session_and_command() {
        let owned = job();
        let put = JobRef {
            put_by: Some((9, 42)),
            ..owned.as_ref()
        };
        let mut buf = Vec::new();
        let n = put.encode(&mut buf);
        assert_eq!(n, buf.len());
        assert_eq!(n, job_record_len(3 + 7, 6) + PUT_BY_LEN);
        assert_eq!(buf[FRAME_LEN], 14);
        assert!(RecordRef::has_shape(&buf));
        assert_eq!(RecordRef::decode(&buf), Ok(Some((RecordRef::Job(put), n))));
        // Owned, it is the job alone.
        assert_eq!(Record::decode(&buf), Ok(Some((Record::Job(owned), n))));
        // Its session's fields are sealed like the rest.
        for cut in [n - 1, n - PUT_BY_LEN] {
            assert!(!RecordRef::has_shape(&buf[..cut]));
            assert!(!matches!(RecordRef::decode(&buf[..cut]), Ok(Some(_))));
        }
        let mut bad = buf.clone();
        bad[n - 1] ^= 1;
        assert_eq!(RecordRef::decode(&bad), Err(DecodeError::Checksum));
    }

    #[test]
    fn any_flipped_bit_is_detected() {
        let mut buf = Vec::new();
        Record::Job(job()).encode(&mut buf);
        for i in 0..buf.len() {
            for bit in 0..8 {
                let mut bad = buf.clone();
                bad[i] ^= 1 << bit;
                if let Ok(Some((r, _))) = Record::decode(&bad) {
                    panic!("flip at {i}/{bit} decoded as {r:?}");
                }
            }
        }
        for cut in 0..buf.len() {
            assert!(
                !matches!(Record::decode(&buf[..cut]), Ok(Some(_))),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn ids_and_floors_past_the_limit_are_unreadable() {
        for (record, bad) in [
            (Record::Delete { id: ID_LIMIT }, Some(ID_LIMIT)),
            (Record::Reserve { id: u64::MAX }, Some(u64::MAX)),
            (
                Record::NextId {
                    next_id: ID_LIMIT + 1,
                },
                Some(ID_LIMIT + 1),
            ),
            (Record::NextId { next_id: ID_LIMIT }, None),
            (Record::Kick { id: ID_LIMIT - 1 }, None),
        ] {
            let mut buf = Vec::new();
            record.encode(&mut buf);
            match bad {
                Some(id) => assert_eq!(Record::decode(&buf), Err(DecodeError::Id(id))),
                None => assert_eq!(Record::decode(&buf), Ok(Some((record, buf.len())))),
            }
        }
        let mut j = job();
        j.fields.id = u64::MAX;
        let mut buf = Vec::new();
        Record::Job(j).encode(&mut buf);
        assert_eq!(Record::decode(&buf), Err(DecodeError::Id(u64::MAX)));
        let h = Header {
            seq: 1,
            next_id: ID_LIMIT,
            created: 0,
        };
        assert_eq!(Header::decode(&h.encode()), Ok(h));
        let h = Header {
            next_id: u64::MAX,
            ..h
        };
        assert_eq!(Header::decode(&h.encode()), Err(DecodeError::Id(u64::MAX)));
    }

    #[test]
    fn header_round_trips_and_rejects_strangers() {
        let h = Header {
            seq: 42,
            next_id: 1000,
            created: 123,
        };
        assert_eq!(Header::decode(&h.encode()), Ok(h));
        let mut bad = h.encode();
        bad[0] = b'X';
        assert_eq!(Header::decode(&bad), Err(DecodeError::BadMagic));
        let mut v2 = h.encode();
        v2[8] = 9;
        assert_eq!(Header::decode(&v2), Err(DecodeError::Version(9)));
    }
}
