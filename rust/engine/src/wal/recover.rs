//! Reading a log directory back: replay every segment in order into the set of live
//! jobs, cut a torn tail, and report (never skip silently) corruption in the middle.

use thiserror::Error;

use super::decode::RecordRef;
use super::format::{job_record_len, DecodeError, Header, JobRecord, Record, HEADER_LEN};
use super::fs::LogDir;
use super::live::LiveJobs;
pub use super::live::RecoveredJob;

/// What a log directory holds.
#[derive(Debug, Default)]
pub struct Recovered {
    /// Live jobs in the order replay first met them: by id, except jobs that
    /// compaction moved forward past newer ones (see [`Recovered::sort_jobs`]).
    /// Reserved jobs are returned as they were stored; the server makes them ready.
    pub jobs: Vec<RecoveredJob>,
    /// Tube names; a job's `tube` is an index into this list.
    pub tubes: Vec<Vec<u8>>,
    /// The next job id to hand out.
    pub next_id: u64,
    /// The highest bury sequence number seen.
    pub max_bury_seq: u64,
    /// Segments present after recovery, ascending, with their sizes in bytes.
    pub segments: Vec<(u64, u64)>,
    /// Records read.
    pub records: u64,
    /// Torn tails cut, corrupt regions skipped: everything a log must not hide.
    pub warnings: Vec<String>,
    /// A replicated cluster's reserved jobs held by sessions (empty otherwise).
    pub held: Vec<super::session::Held>,
    /// A replicated cluster's sessions and their last replies (empty otherwise).
    pub sessions: Vec<super::session::SessionReplies>,
    /// A replicated cluster's paused tubes: name, delay (s), until (wall ns).
    pub pauses: Vec<(Vec<u8>, u32, i64)>,
}

impl Recovered {
    /// The name of a job's tube.
    pub fn tube(&self, job: &RecoveredJob) -> &[u8] {
        self.tubes.get(job.tube as usize).map_or(&[], Vec::as_slice)
    }

    /// A job as a full snapshot record (what compaction writes).
    pub fn record(&self, job: &RecoveredJob) -> JobRecord {
        job.to_record(self.tube(job))
    }

    /// Order the jobs by id.
    pub fn sort_jobs(&mut self) {
        if !self
            .jobs
            .windows(2)
            .all(|w| w[0].fields.id < w[1].fields.id)
        {
            self.jobs.sort_unstable_by_key(|j| j.fields.id);
        }
    }

    /// Length on disk of a job's latest snapshot.
    pub fn snapshot_len(&self, job: &RecoveredJob) -> usize {
        job_record_len(self.tube(job).len(), job.body().len())
    }
}

#[derive(Debug, Error)]
pub enum RecoverError {
    #[error("cannot read the log in {dir}: {source}")]
    Io { dir: String, source: std::io::Error },
    #[error("segment {seq} of {dir} is not a beanpole log segment: {reason}")]
    BadSegment {
        dir: String,
        seq: u64,
        reason: DecodeError,
    },
    #[error(
        "segment {seq} of {dir} is corrupt at offset {offset} ({reason}) with valid records \
         after it; refusing to start so no job is lost silently (start with the option to \
         skip corrupt records to drop what cannot be read)"
    )]
    Corrupt {
        dir: String,
        seq: u64,
        offset: u64,
        reason: DecodeError,
    },
}

/// Replay `dir`. With `skip_corrupt`, corruption in the middle of a segment is
/// skipped (and reported in `warnings`) instead of refusing.
pub fn recover(dir: &dyn LogDir, skip_corrupt: bool) -> Result<Recovered, RecoverError> {
    replay(dir, skip_corrupt, true)
}

/// Replay `dir`; with `repair` false nothing on disk is changed (a torn tail is
/// reported, not cut), for `beanpole binlog verify` and `dump`.
pub fn replay(
    dir: &dyn LogDir,
    skip_corrupt: bool,
    repair: bool,
) -> Result<Recovered, RecoverError> {
    let name = dir.path().display().to_string();
    let io = |source| RecoverError::Io {
        dir: name.clone(),
        source,
    };
    let seqs = dir.segments().map_err(io)?;
    let mut live = LiveJobs::default();
    let mut out = Recovered {
        next_id: 1,
        ..Recovered::default()
    };
    let mut max_id = 0u64;
    // Segments at the end holding nothing but a header: spares the last run
    // preallocated and never used.
    let mut spares: Vec<u64> = Vec::new();
    for (i, &seq) in seqs.iter().enumerate() {
        let last = i + 1 == seqs.len();
        // Each segment is mapped whole; the jobs' bodies are copied out of it as
        // their records are applied.
        let bytes = dir.map(seq).map_err(io)?;
        let header = match Header::decode(&bytes) {
            Ok(h) => h,
            Err(reason) if all_zero(&bytes) => {
                // Being preallocated when the server died: its header never reached
                // the disk, so nothing was ever written to it. Remove it, wherever
                // it is, so it cannot block a later start.
                out.warnings.push(format!(
                    "segment {seq}: empty (no header), removed ({reason})"
                ));
                if repair {
                    dir.remove(seq).map_err(io)?;
                }
                continue;
            }
            Err(reason) => {
                return Err(RecoverError::BadSegment {
                    dir: name,
                    seq,
                    reason,
                })
            }
        };
        out.next_id = out.next_id.max(header.next_id);
        let records_before = out.records;
        let mut at = HEADER_LEN;
        let mut cut = None;
        let mut skipped = false;
        let mut budget = scan_budget(bytes.len());
        while at < bytes.len() {
            match RecordRef::decode(&bytes[at..]) {
                Ok(Some((record, n))) => {
                    out.records += 1;
                    max_id = max_id.max(record.id());
                    if let RecordRef::Change(Record::NextId { next_id }) = record {
                        out.next_id = out.next_id.max(next_id);
                    }
                    live.apply(record, seq);
                    at += n;
                }
                Ok(None) if all_zero(&bytes[at..]) => break,
                Ok(None) | Err(_) => {
                    let reason = RecordRef::decode(&bytes[at..])
                        .err()
                        .unwrap_or(DecodeError::Length(0));
                    match next_valid(&bytes, at + 1, &mut budget) {
                        Next::None if last || no_records(dir, &seqs[i + 1..]).map_err(io)? => {
                            // A torn tail: the last write did not complete. Cut it.
                            // (Only preallocated spares may follow the segment.)
                            out.warnings.push(format!(
                                "segment {seq}: torn tail cut at offset {at} ({reason}; {} bytes dropped)",
                                bytes.len() - at
                            ));
                            cut = Some(at as u64);
                            break;
                        }
                        // Unreadable with readable records after it, or in a
                        // segment that is not the newest: corruption in the middle.
                        // So is a scan that gave up: readable records may follow.
                        next => {
                            if !skip_corrupt {
                                return Err(RecoverError::Corrupt {
                                    dir: name,
                                    seq,
                                    offset: at as u64,
                                    reason,
                                });
                            }
                            skipped = true;
                            match next {
                                Next::None | Next::GaveUp => {
                                    let why = if matches!(next, Next::GaveUp) {
                                        "; the search for a readable record after it gave up"
                                    } else {
                                        ""
                                    };
                                    out.warnings.push(format!(
                                        "segment {seq}: corrupt from offset {at} to its end ({reason}{why}); skipped"
                                    ));
                                    break;
                                }
                                Next::At(next) => {
                                    out.warnings.push(format!(
                                        "segment {seq}: corrupt bytes {at}..{next} ({reason}); skipped"
                                    ));
                                    at = next;
                                }
                            }
                        }
                    }
                }
            }
        }
        // No record, nothing cut or skipped: the loop stopped at zeros right
        // after the header.
        let unused = out.records == records_before && cut.is_none() && !skipped;
        let mut size = bytes.len() as u64;
        drop(bytes);
        if unused {
            spares.push(seq);
        } else {
            spares.clear();
        }
        if let Some(at) = cut {
            if repair {
                dir.truncate(seq, at).map_err(io)?;
            }
            size = at;
        }
        out.segments.push((seq, size));
    }
    if repair && !spares.is_empty() {
        // The next start would begin after them and leave them in the middle of
        // the directory, one set more per restart; their headers' id floors are
        // already counted in `next_id`, which the new segment's header carries on.
        for &seq in &spares {
            dir.remove(seq).map_err(io)?;
        }
        out.segments.retain(|(seq, _)| !spares.contains(seq));
    }
    out.next_id = out.next_id.max(max_id + 1);
    out.max_bury_seq = live.max_bury_seq;
    (out.jobs, out.tubes) = live.finish();
    Ok(out)
}

/// True if none of the segments `seqs` holds a record: they are spares, created
/// ahead of the segment being written (or left without a header by a crash).
fn no_records(dir: &dyn LogDir, seqs: &[u64]) -> std::io::Result<bool> {
    for &seq in seqs {
        let bytes = dir.map(seq)?;
        if !all_zero(bytes.get(HEADER_LEN..).unwrap_or_default()) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether every byte is zero, as in the unwritten rest of a preallocated segment
/// (most of a new one). Block by block, each folded without an early exit so the
/// compiler can use wide registers, instead of a byte at a time.
pub(super) fn all_zero(bytes: &[u8]) -> bool {
    bytes
        .chunks(4096)
        .all(|block| block.iter().fold(0u8, |acc, &b| acc | b) == 0)
}

/// What the search for a readable record after an unreadable one found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Next {
    /// A record that decodes starts here.
    At(usize),
    /// None up to the end of the segment.
    None,
    /// The segment's checksum budget ran out first, so there may be one.
    GaveUp,
}

/// Bytes the searches in one segment may checksum: four times the segment and a
/// MiB. Without a limit, damage followed by data that looks like the starts of
/// long records (a binary job body, say) would cost a checksum over up to the
/// rest of the segment at every offset: hours for a large segment.
pub(super) fn scan_budget(segment_len: usize) -> usize {
    segment_len.saturating_mul(4).saturating_add(1 << 20)
}

/// Where the next decodable record at or after `from` starts. Only offsets where
/// a record has the shape of one are checksummed, and those checksums are paid
/// from `budget`.
pub(super) fn next_valid(bytes: &[u8], from: usize, budget: &mut usize) -> Next {
    for i in from..bytes.len().saturating_sub(9) {
        let rest = &bytes[i..];
        if rest[..4] == [0, 0, 0, 0] || !RecordRef::has_shape(rest) {
            continue;
        }
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let Some(left) = budget.checked_sub(len) else {
            return Next::GaveUp;
        };
        *budget = left;
        if matches!(RecordRef::decode(rest), Ok(Some(_))) {
            return Next::At(i);
        }
    }
    Next::None
}

#[cfg(test)]
mod tests {
    use super::{all_zero, next_valid, scan_budget, Next};
    use crate::wal::format::{job_record_len, FRAME_LEN};

    /// Bytes that look like the start of a job record claiming everything up to
    /// `end` (tube empty, body to the end), with a wrong checksum.
    fn fake_job(bytes: &mut [u8], at: usize, end: usize) {
        let total = end - at;
        let body = total - job_record_len(0, 0);
        bytes[at..at + 4].copy_from_slice(&((total - FRAME_LEN) as u32).to_le_bytes());
        bytes[at + 4..at + 8].copy_from_slice(&[1, 2, 3, 4]);
        bytes[at + FRAME_LEN] = 1;
        let body_at = job_record_len(0, 0) - 4;
        bytes[at + body_at..at + body_at + 4].copy_from_slice(&(body as u32).to_le_bytes());
    }

    #[test]
    fn the_search_after_damage_checksums_only_record_shapes_and_within_a_budget() {
        // Binary data full of small little-endian numbers: plenty of offsets
        // whose first four bytes are a length that fits, none shaped like a
        // record. Nothing is checksummed.
        let data: Vec<u8> = (0..1 << 20).map(|i| [0x10, 0, 0x08, 0][i % 4]).collect();
        let mut budget = scan_budget(data.len());
        assert_eq!(next_valid(&data, 1, &mut budget), Next::None);
        assert_eq!(budget, scan_budget(data.len()));

        // A fake job every 100 bytes, each claiming the rest of the segment:
        // checksumming them all would cost 50 times the segment. The search
        // gives up once it has spent its budget, so damage followed by this is
        // not taken for a torn tail.
        let len = 1 << 20;
        let mut fakes = vec![0u8; len];
        for at in (0..len - 200).step_by(100) {
            fake_job(&mut fakes, at, len);
        }
        let mut budget = scan_budget(len);
        assert_eq!(next_valid(&fakes, 1, &mut budget), Next::GaveUp);
        assert!(budget < len, "{budget} left");
        // A real record among them is still found while the budget lasts.
        let mut one = vec![0u8; len];
        fake_job(&mut one, 50, len);
        let mut rec = Vec::new();
        crate::wal::format::Record::Delete { id: 5 }.encode(&mut rec);
        one[5000..5000 + rec.len()].copy_from_slice(&rec);
        let mut budget = scan_budget(len);
        assert_eq!(next_valid(&one, 1, &mut budget), Next::At(5000));
    }

    #[test]
    fn all_zero_sees_one_set_bit_anywhere() {
        let mut bytes = vec![0u8; 3 * 4096 + 17];
        assert!(all_zero(&bytes));
        assert!(all_zero(&[]));
        for at in [0, 1, 4095, 4096, 8191, bytes.len() - 1] {
            bytes[at] = 0x80;
            assert!(!all_zero(&bytes), "{at}");
            assert!(all_zero(&bytes[at + 1..]), "{at}");
            bytes[at] = 0;
        }
    }
}
