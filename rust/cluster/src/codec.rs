//! The byte layouts of what the cluster stores and sends: log ids, votes,
//! memberships, log entries and snapshot metadata. Explicit little-endian, as
//! the engine's log; framing and checksums are the callers' (`logstore/files.rs`,
//! `snapshot.rs`).
//!
//! ```text
//! log id        present u8 (0: none, then nothing), term u64, leader node u64, index u64
//! vote          term u64, node u64, committed u8
//! membership    configs u32, per config: ids u32, id u64 each;
//!               nodes u32, per node: id u64, client (u16 len, bytes), peer (u16 len, bytes)
//! entry         term u64, leader node u64, index u64, kind u8, then by kind:
//!                 0 blank: nothing; 1 batch: at i64, records (the rest);
//!                 2 membership: a membership
//! snapshot meta last log id, membership log id, membership, id (u16 len, bytes)
//! ```
//!
//! Imports the cluster's types only.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use openraft::{CommittedLeaderId, EntryPayload};
use thiserror::Error;

use crate::types::{Batch, Entry, LogId, Membership, Peer, SnapshotMeta, StoredMembership, Vote};

/// Why bytes do not decode.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CodecError {
    #[error("ends early")]
    Truncated,
    #[error("unknown {what} tag {tag}")]
    Tag { what: &'static str, tag: u8 },
    #[error("a node address is not UTF-8")]
    Utf8,
    #[error("{0} bytes left over")]
    Trailing(usize),
}

/// Reads fields from the front of a byte slice.
#[derive(Debug)]
pub struct Reader<'a>(pub &'a [u8]);

impl<'a> Reader<'a> {
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        if self.0.len() < n {
            return Err(CodecError::Truncated);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], CodecError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    pub fn u8(&mut self) -> Result<u8, CodecError> {
        Ok(self.array::<1>()?[0])
    }

    pub fn u16(&mut self) -> Result<u16, CodecError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    pub fn u32(&mut self) -> Result<u32, CodecError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub fn u64(&mut self) -> Result<u64, CodecError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    pub fn i64(&mut self) -> Result<i64, CodecError> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    pub fn string(&mut self) -> Result<String, CodecError> {
        let n = self.u16()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| CodecError::Utf8)
    }

    /// Nothing may be left.
    pub fn end(&self) -> Result<(), CodecError> {
        match self.0.len() {
            0 => Ok(()),
            n => Err(CodecError::Trailing(n)),
        }
    }
}

pub fn put_str(out: &mut Vec<u8>, s: &str) {
    // Addresses are short; a longer one is cut rather than written unreadable.
    let bytes = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
    out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
    out.extend_from_slice(bytes);
}

fn put_log_id_fields(out: &mut Vec<u8>, id: &LogId) {
    out.extend_from_slice(&id.leader_id.term.to_le_bytes());
    out.extend_from_slice(&id.leader_id.node_id.to_le_bytes());
    out.extend_from_slice(&id.index.to_le_bytes());
}

fn log_id_fields(r: &mut Reader<'_>) -> Result<LogId, CodecError> {
    let term = r.u64()?;
    let node = r.u64()?;
    let index = r.u64()?;
    Ok(LogId::new(CommittedLeaderId::new(term, node), index))
}

pub fn put_log_id(out: &mut Vec<u8>, id: Option<&LogId>) {
    match id {
        None => out.push(0),
        Some(id) => {
            out.push(1);
            put_log_id_fields(out, id);
        }
    }
}

pub fn log_id(r: &mut Reader<'_>) -> Result<Option<LogId>, CodecError> {
    match r.u8()? {
        0 => Ok(None),
        1 => log_id_fields(r).map(Some),
        tag => Err(CodecError::Tag {
            what: "log id",
            tag,
        }),
    }
}

pub fn put_vote(out: &mut Vec<u8>, vote: &Vote) {
    out.extend_from_slice(&vote.leader_id.term.to_le_bytes());
    out.extend_from_slice(&vote.leader_id.node_id.to_le_bytes());
    out.push(u8::from(vote.committed));
}

pub fn vote(r: &mut Reader<'_>) -> Result<Vote, CodecError> {
    let term = r.u64()?;
    let node = r.u64()?;
    Ok(match r.u8()? {
        0 => Vote::new(term, node),
        1 => Vote::new_committed(term, node),
        tag => return Err(CodecError::Tag { what: "vote", tag }),
    })
}

pub fn put_membership(out: &mut Vec<u8>, m: &Membership) {
    let configs = m.get_joint_config();
    out.extend_from_slice(&(configs.len() as u32).to_le_bytes());
    for config in configs {
        out.extend_from_slice(&(config.len() as u32).to_le_bytes());
        for id in config {
            out.extend_from_slice(&id.to_le_bytes());
        }
    }
    let nodes: Vec<_> = m.nodes().collect();
    out.extend_from_slice(&(nodes.len() as u32).to_le_bytes());
    for (id, node) in nodes {
        out.extend_from_slice(&id.to_le_bytes());
        put_str(out, &node.client);
        put_str(out, &node.peer);
    }
}

pub fn membership(r: &mut Reader<'_>) -> Result<Membership, CodecError> {
    // Counts come from the bytes: nothing is allocated by them up front.
    let mut configs = Vec::new();
    for _ in 0..r.u32()? {
        let mut config = BTreeSet::new();
        for _ in 0..r.u32()? {
            config.insert(r.u64()?);
        }
        configs.push(config);
    }
    let mut nodes = BTreeMap::new();
    for _ in 0..r.u32()? {
        let id = r.u64()?;
        let client = r.string()?;
        let peer = r.string()?;
        nodes.insert(id, Peer { client, peer });
    }
    Ok(Membership::new(configs, nodes))
}

/// Append an entry's bytes to `out`.
pub fn put_entry(out: &mut Vec<u8>, entry: &Entry) {
    put_log_id_fields(out, &entry.log_id);
    match &entry.payload {
        EntryPayload::Blank => out.push(0),
        EntryPayload::Normal(batch) => {
            out.push(1);
            out.extend_from_slice(&batch.at.to_le_bytes());
            out.extend_from_slice(&batch.records);
        }
        EntryPayload::Membership(m) => {
            out.push(2);
            put_membership(out, m);
        }
    }
}

/// The bytes [`put_entry`] appends for `entry`, about (exactly, for an
/// entry of records).
pub fn entry_len(entry: &Entry) -> usize {
    // A log id's fields: term, node, index.
    let id = 24;
    match &entry.payload {
        EntryPayload::Blank => id + 1,
        EntryPayload::Normal(batch) => id + 1 + 8 + batch.records.len(),
        EntryPayload::Membership(_) => id + 1 + 256,
    }
}

/// An entry from exactly its bytes.
pub fn entry(bytes: &[u8]) -> Result<Entry, CodecError> {
    entry_with(bytes, Bytes::copy_from_slice)
}

/// [`entry`], its records made by `records` from their bytes (a copy, or a
/// slice of the buffer they were read into).
pub fn entry_with(bytes: &[u8], records: impl FnOnce(&[u8]) -> Bytes) -> Result<Entry, CodecError> {
    let mut r = Reader(bytes);
    let log_id = log_id_fields(&mut r)?;
    let payload = match r.u8()? {
        0 => EntryPayload::Blank,
        1 => {
            let at = r.i64()?;
            let records = records(r.0);
            r.0 = &[];
            EntryPayload::Normal(Batch { at, records })
        }
        2 => EntryPayload::Membership(membership(&mut r)?),
        tag => {
            return Err(CodecError::Tag {
                what: "entry kind",
                tag,
            })
        }
    };
    r.end()?;
    Ok(Entry { log_id, payload })
}

pub fn put_snapshot_meta(out: &mut Vec<u8>, meta: &SnapshotMeta) {
    put_log_id(out, meta.last_log_id.as_ref());
    put_log_id(out, meta.last_membership.log_id().as_ref());
    put_membership(out, meta.last_membership.membership());
    put_str(out, &meta.snapshot_id);
}

pub fn snapshot_meta(r: &mut Reader<'_>) -> Result<SnapshotMeta, CodecError> {
    let last_log_id = log_id(r)?;
    let membership_log_id = log_id(r)?;
    let membership = membership(r)?;
    let snapshot_id = r.string()?;
    Ok(SnapshotMeta {
        last_log_id,
        last_membership: StoredMembership::new(membership_log_id, membership),
        snapshot_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members() -> Membership {
        let mut nodes = BTreeMap::new();
        for id in 1..=3u64 {
            nodes.insert(
                id,
                Peer {
                    client: format!("127.0.0.1:{}", 11300 + id),
                    peer: format!("127.0.0.1:{}", 11400 + id),
                },
            );
        }
        Membership::new(vec![BTreeSet::from([1, 2]), BTreeSet::from([2, 3])], nodes)
    }

    #[test]
    fn every_kind_of_entry_reads_back_and_a_cut_one_does_not() {
        let id = LogId::new(CommittedLeaderId::new(7, 2), 41);
        let entries = [
            Entry {
                log_id: id,
                payload: EntryPayload::Blank,
            },
            Entry {
                log_id: id,
                payload: EntryPayload::Normal(Batch {
                    at: -5,
                    records: Bytes::from_static(b"records"),
                }),
            },
            Entry {
                log_id: id,
                payload: EntryPayload::Membership(members()),
            },
        ];
        for e in &entries {
            let mut out = Vec::new();
            put_entry(&mut out, e);
            let back = entry(&out).expect("decodes");
            assert_eq!(back.log_id, e.log_id);
            assert_eq!(format!("{:?}", back.payload), format!("{:?}", e.payload));
            if !matches!(e.payload, EntryPayload::Normal(_)) {
                assert!(entry(&out[..out.len() - 1]).is_err());
                out.push(0);
                assert_eq!(entry(&out).err(), Some(CodecError::Trailing(1)));
            }
        }
        let mut out = Vec::new();
        put_log_id_fields(&mut out, &id);
        out.push(9);
        assert!(matches!(entry(&out), Err(CodecError::Tag { tag: 9, .. })));
    }

    #[test]
    fn votes_and_snapshot_metadata_read_back() {
        for v in [Vote::new(3, 1), Vote::new_committed(4, 2)] {
            let mut out = Vec::new();
            put_vote(&mut out, &v);
            assert_eq!(vote(&mut Reader(&out)), Ok(v));
        }
        let meta = SnapshotMeta {
            last_log_id: Some(LogId::new(CommittedLeaderId::new(2, 1), 9)),
            last_membership: StoredMembership::new(
                Some(LogId::new(CommittedLeaderId::new(1, 1), 3)),
                members(),
            ),
            snapshot_id: "2-9-1".into(),
        };
        let mut out = Vec::new();
        put_snapshot_meta(&mut out, &meta);
        let mut r = Reader(&out);
        assert_eq!(snapshot_meta(&mut r), Ok(meta));
        assert_eq!(r.end(), Ok(()));
    }
}
