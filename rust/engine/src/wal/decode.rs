//! Decoding records in place: a job snapshot's tube and body stay borrowed from
//! the segment's bytes, so replay copies a body only once, into the form the store
//! keeps it in. [`Record::decode`] is this followed by a copy.

pub use super::format::JobRef;
use super::format::{
    checksum, job_record_len, DecodeError, JobFields, Reader, Record, StoredState, BURY_RECORD_LEN,
    DELETE_RECORD_LEN, FRAME_LEN, HOLD_RECORD_LEN, ID_LIMIT, JOB_FIXED_LEN, MAX_OUTCOME_REPLY,
    MAX_RECORD, PUT_BY_LEN, RELEASE_RECORD_LEN,
};

/// A record decoded without copying: replay copies a job's body only once, into
/// the form the store keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordRef<'a> {
    Job(JobRef<'a>),
    /// Any other kind (never [`Record::Job`]).
    Change(Record),
}

impl RecordRef<'_> {
    /// The id of the job the record is about (0 for next-id).
    pub fn id(&self) -> u64 {
        match self {
            RecordRef::Job(j) => j.fields.id,
            RecordRef::Change(r) => r.id(),
        }
    }

    pub fn to_owned(&self) -> Record {
        match self {
            RecordRef::Job(j) => Record::Job(j.to_owned()),
            RecordRef::Change(r) => r.clone(),
        }
    }

    /// [`Record::decode`], borrowing a job's tube and body from `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<Option<(RecordRef<'_>, usize)>, DecodeError> {
        if bytes.len() < 4 {
            return if bytes.iter().all(|&b| b == 0) {
                Ok(None)
            } else {
                Err(DecodeError::Truncated)
            };
        }
        let len = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        if len == 0 {
            return Ok(None);
        }
        if len as usize > MAX_RECORD {
            return Err(DecodeError::Length(len));
        }
        let total = FRAME_LEN + len as usize;
        if bytes.len() < total {
            return Err(DecodeError::Truncated);
        }
        let crc = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
        let body = &bytes[FRAME_LEN..total];
        if checksum(&bytes[..4], body) != crc {
            return Err(DecodeError::Checksum);
        }
        let mut r = Reader(&body[1..]);
        let record = match body[0] {
            kind @ (1 | 14) => {
                // Fields are read in the order they are written.
                let fields = JobFields {
                    id: r.u64()?,
                    pri: r.u32()?,
                    delay: r.u32()?,
                    ttr: r.u32()?,
                    state: match r.u8()? {
                        0 => StoredState::Ready,
                        1 => StoredState::Delayed,
                        2 => StoredState::Buried,
                        3 => StoredState::Reserved,
                        _ => return Err(DecodeError::Payload),
                    },
                    created: r.i64()?,
                    ready_at: r.i64()?,
                    bury_seq: r.u64()?,
                    reserves: r.u32()?,
                    timeouts: r.u32()?,
                    releases: r.u32()?,
                    buries: r.u32()?,
                    kicks: r.u32()?,
                };
                let tube_len = r.u16()? as usize;
                let tube = r.take(tube_len)?;
                let body_len = r.u32()? as usize;
                let body = r.take(body_len)?;
                let put_by = if kind == 14 {
                    Some((r.u64()?, r.u64()?))
                } else {
                    None
                };
                RecordRef::Job(JobRef {
                    fields,
                    tube,
                    body,
                    put_by,
                })
            }
            2 => RecordRef::Change(Record::Reserve { id: r.u64()? }),
            3 => RecordRef::Change(Record::Release {
                id: r.u64()?,
                pri: r.u32()?,
                delay: r.u32()?,
                ready_at: r.i64()?,
            }),
            4 => RecordRef::Change(Record::Bury {
                id: r.u64()?,
                pri: r.u32()?,
                bury_seq: r.u64()?,
            }),
            5 => RecordRef::Change(Record::Kick { id: r.u64()? }),
            6 => RecordRef::Change(Record::Timeout { id: r.u64()? }),
            7 => RecordRef::Change(Record::Delete { id: r.u64()? }),
            8 => RecordRef::Change(Record::NextId { next_id: r.u64()? }),
            9 => RecordRef::Change(Record::Hold {
                id: r.u64()?,
                owner: r.u64()?,
                deadline: r.i64()?,
                seq: r.u64()?,
            }),
            10 => RecordRef::Change(Record::Return { id: r.u64()? }),
            11 => {
                let owner = r.u64()?;
                let seq = r.u64()?;
                let len = r.u32()? as usize;
                if len > MAX_OUTCOME_REPLY {
                    return Err(DecodeError::Payload);
                }
                RecordRef::Change(Record::Outcome {
                    owner,
                    seq,
                    reply: r.take(len)?.to_vec(),
                })
            }
            12 => RecordRef::Change(Record::End { owner: r.u64()? }),
            13 => {
                let delay = r.u32()?;
                let until = r.i64()?;
                let len = r.u16()? as usize;
                RecordRef::Change(Record::Pause {
                    tube: r.take(len)?.to_vec(),
                    delay,
                    until,
                })
            }
            k => return Err(DecodeError::Kind(k)),
        };
        if !r.0.is_empty() {
            return Err(DecodeError::Payload);
        }
        match record {
            RecordRef::Change(Record::NextId { next_id }) if next_id > ID_LIMIT => {
                return Err(DecodeError::Id(next_id))
            }
            RecordRef::Change(Record::NextId { .. }) => {}
            _ if record.id() >= ID_LIMIT => return Err(DecodeError::Id(record.id())),
            _ => {}
        }
        Ok(Some((record, total)))
    }
}

impl RecordRef<'_> {
    /// Whether `bytes` start with something shaped like a whole record: a length
    /// that is not 0 and fits, a known kind, and exactly the length that kind
    /// needs (for a job, the length its tube and body lengths add up to). Only a
    /// few fixed places are read and no checksum is computed, so a scan for the
    /// next record after damage computes checksums only where a record could
    /// start. Every record [`RecordRef::decode`] accepts has this shape.
    pub fn has_shape(bytes: &[u8]) -> bool {
        let Some(&[a, b, c, d]) = bytes.get(..4) else {
            return false;
        };
        let len = u32::from_le_bytes([a, b, c, d]) as usize;
        if len == 0 || len > MAX_RECORD {
            return false;
        }
        let Some(record) = bytes.get(..FRAME_LEN + len) else {
            return false;
        };
        let total = record.len();
        // The u16 or u32 length field at byte `at`, if the record reaches it.
        let u16_at = |at: usize| {
            record
                .get(at..at + 2)
                .map(|b| usize::from(u16::from_le_bytes([b[0], b[1]])))
        };
        let u32_at = |at: usize| {
            record
                .get(at..at + 4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        };
        match record[FRAME_LEN] {
            2 | 5..=8 | 10 | 12 => total == DELETE_RECORD_LEN,
            3 => total == RELEASE_RECORD_LEN,
            4 => total == BURY_RECORD_LEN,
            9 => total == HOLD_RECORD_LEN,
            // An outcome: owner, seq, then its reply's length and bytes.
            11 => u32_at(FRAME_LEN + 17)
                .is_some_and(|n| n <= MAX_OUTCOME_REPLY && total == FRAME_LEN + 21 + n),
            // A pause: delay, until, then its tube's length and name.
            13 => u16_at(FRAME_LEN + 13).is_some_and(|n| total == FRAME_LEN + 15 + n),
            kind @ (1 | 14) => {
                let Some(&[t0, t1]) = record.get(JOB_FIXED_LEN - 2..JOB_FIXED_LEN) else {
                    return false;
                };
                let tube = usize::from(u16::from_le_bytes([t0, t1]));
                let at = JOB_FIXED_LEN + tube;
                let Some(&[b0, b1, b2, b3]) = record.get(at..at + 4) else {
                    return false;
                };
                let body = u32::from_le_bytes([b0, b1, b2, b3]) as usize;
                let by = if kind == 14 { PUT_BY_LEN } else { 0 };
                total.checked_sub(job_record_len(tube, 0) + by) == Some(body)
            }
            _ => false,
        }
    }
}

impl Record {
    /// Decode the record at the start of `bytes`. `Ok(None)` is the end of the data
    /// (a zero length); otherwise the record and its length on disk.
    pub fn decode(bytes: &[u8]) -> Result<Option<(Record, usize)>, DecodeError> {
        Ok(RecordRef::decode(bytes)?.map(|(r, n)| (r.to_owned(), n)))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::wal::format::{JobFields, JobRecord, StoredState};

    fn job(tube: &[u8], body: &[u8]) -> Record {
        Record::Job(JobRecord {
            fields: JobFields {
                id: 3,
                pri: 1,
                delay: 0,
                ttr: 1,
                state: StoredState::Ready,
                created: 0,
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

    #[test]
    fn every_kind_of_record_has_the_shape_and_a_cut_one_not() {
        let put = job(b"tube", b"body");
        let Record::Job(put) = &put else {
            unreachable!()
        };
        let put = JobRef {
            put_by: Some((1, 2)),
            ..put.as_ref()
        };
        let mut buf = Vec::new();
        let n = put.encode(&mut buf);
        assert!(RecordRef::has_shape(&buf));
        assert!(!RecordRef::has_shape(&buf[..n - 1]));
        buf[FRAME_LEN] = 1;
        assert!(!RecordRef::has_shape(&buf), "a put's length as a job");
        let records = [
            job(b"", b""),
            job(b"tube", &[0u8; 300]),
            Record::Reserve { id: 1 },
            Record::Release {
                id: 1,
                pri: 2,
                delay: 3,
                ready_at: 4,
            },
            Record::Bury {
                id: 1,
                pri: 2,
                bury_seq: 3,
            },
            Record::Kick { id: 1 },
            Record::Timeout { id: 1 },
            Record::Delete { id: 1 },
            Record::NextId { next_id: 1 },
            Record::Hold {
                id: 1,
                owner: 2,
                deadline: 3,
                seq: 4,
            },
            Record::Return { id: 1 },
            Record::Outcome {
                owner: 1,
                seq: 2,
                reply: b"INSERTED 7\r\n".to_vec(),
            },
            Record::Outcome {
                owner: 1,
                seq: 2,
                reply: Vec::new(),
            },
            Record::End { owner: 1 },
            Record::Pause {
                tube: b"emails".to_vec(),
                delay: 5,
                until: 6,
            },
        ];
        for r in &records {
            let mut buf = Vec::new();
            let n = r.encode(&mut buf);
            assert!(RecordRef::has_shape(&buf), "{r:?}");
            assert!(!RecordRef::has_shape(&buf[..n - 1]), "{r:?} cut");
            buf[FRAME_LEN] = 15;
            assert!(!RecordRef::has_shape(&buf), "{r:?} with kind 15");
        }
    }

    proptest! {
        #[test]
        fn whatever_decodes_has_the_shape(
            kind in 1..16u8,
            len in 0..120u32,
            tail in proptest::collection::vec(any::<u8>(), 0..140),
            seal in any::<bool>(),
        ) {
            // Frames with a chosen length and kind, sealed or not, so that some
            // decode and most do not.
            let mut bytes = len.to_le_bytes().to_vec();
            bytes.extend([0; 4]);
            bytes.push(kind);
            bytes.extend(&tail);
            let end = (FRAME_LEN + len as usize).min(bytes.len());
            if seal {
                let crc = checksum(&bytes[..4], &bytes[FRAME_LEN..end]);
                bytes[4..8].copy_from_slice(&crc.to_le_bytes());
            }
            if let Ok(Some(_)) = RecordRef::decode(&bytes) {
                prop_assert!(RecordRef::has_shape(&bytes));
            }
        }
    }
}
