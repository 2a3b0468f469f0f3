//! The bytes on a link between two nodes: frames, the handshake, and openraft's
//! requests, replies and errors, in the codec's explicit little-endian layouts.
//!
//! ```text
//! frame      len u32 (of kind and body), kind u8, body
//!   1 hello      magic "BPPEER", version u16, from u64, to u64, cluster id 16 bytes
//!   2 welcome    node u64, cluster id 16 bytes
//!   3 refused    reason (u16 len, bytes)
//!   4 append     vote, prev log id, leader commit, count u32, per entry: len u32, entry
//!   5 vote       vote, last log id
//!   6 snapshot   vote, snapshot meta, offset u64, done u8, data (the rest)
//!   7 reply      append: 0 success | 1 partial, log id | 2 conflict | 3 higher, vote;
//!                vote: vote, granted u8, last log id; snapshot: vote
//!   8 failed     0 stopped | 1 panicked | 2 storage, message | 3 snapshot mismatch,
//!                expected id, offset u64, got id, offset u64
//!   9, 10        a status ask and its answer (`status.rs`), not between peers
//!   11, 12       a membership change and its answer (`members.rs`), likewise
//!   13, 14       a leader's request that a follower campaign, and its answer
//!                (`handover.rs`), on a peer connection after the hello
//!   15, 16       a client session's attach and its answer (`attach.rs`), likewise
//!   17 link      a hello's body: the connection then carries many sessions
//!                (`mux`), answered welcome or refused
//! ```
//!
//! A connection opens with hello and its answer (welcome or refused), then
//! carries one request and its reply at a time. Imports the codec and the
//! cluster's types.

use std::io;

use anyerror::AnyError;
use bytes::Bytes;
use openraft::error::{Fatal, SnapshotMismatch};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{SnapshotSegmentId, StorageIOError};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::codec::{self, CodecError, Reader};
use crate::identity::ClusterId;
use crate::types::{NodeId, TypeConfig};

pub const HELLO: u8 = 1;
pub const WELCOME: u8 = 2;
pub const REFUSED: u8 = 3;
pub const APPEND: u8 = 4;
pub const VOTE: u8 = 5;
pub const SNAPSHOT: u8 = 6;
pub const REPLY: u8 = 7;
pub const FAILED: u8 = 8;

pub(super) const MAGIC: &[u8; 6] = b"BPPEER";
pub(super) const VERSION: u16 = 1;

/// A frame's kind and body.
pub type Frame = (u8, Vec<u8>);

/// A frame's body is read this much at a time at most.
const READ_STEP: usize = 64 << 10;

/// Start a frame of `kind`: room for its length, filled in by [`finish`].
pub fn start(kind: u8) -> Vec<u8> {
    start_sized(kind, 0)
}

/// [`start`] with room for a frame of `size` bytes.
fn start_sized(kind: u8, size: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(size.max(5));
    out.extend_from_slice(&[0; 4]);
    out.push(kind);
    out
}

/// Fill in the length of a frame made with [`start`].
pub fn finish(mut frame: Vec<u8>) -> Vec<u8> {
    let len = (frame.len() - 4) as u32;
    frame[..4].copy_from_slice(&len.to_le_bytes());
    frame
}

/// Read one frame of at most `max` bytes. Memory grows with the bytes that
/// arrive, not with the length a peer claims.
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R, max: usize) -> io::Result<Frame> {
    let len = r.read_u32_le().await? as usize;
    if len == 0 || len > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a frame of {len} bytes (at most {max})"),
        ));
    }
    let kind = r.read_u8().await?;
    // Read into exactly its room, a step at a time (`read_to_end` doubled a
    // full buffer to look for the end).
    let want = len - 1;
    let mut body = Vec::new();
    while body.len() < want {
        let step = (want - body.len()).min(READ_STEP);
        body.reserve_exact(step);
        let mut part = (&mut *r).take(step as u64);
        while part.limit() > 0 {
            if part.read_buf(&mut body).await? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
    }
    Ok((kind, body))
}

pub async fn write_frame<W: AsyncWrite + Unpin>(w: &mut W, frame: &[u8]) -> io::Result<()> {
    w.write_all(frame).await?;
    w.flush().await
}

/// What a connecting node says first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    pub from: NodeId,
    pub to: NodeId,
    pub cluster: ClusterId,
}

pub fn hello(h: &Hello) -> Vec<u8> {
    hello_as(HELLO, h)
}

/// A hello's body under frame kind `kind` (a link's opening, `mux`).
pub fn hello_as(kind: u8, h: &Hello) -> Vec<u8> {
    let mut out = start(kind);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&h.from.to_le_bytes());
    out.extend_from_slice(&h.to.to_le_bytes());
    out.extend_from_slice(&h.cluster.0);
    finish(out)
}

/// A hello's fields; `None` if it is not a beanpole peer of this version.
pub fn read_hello(body: &[u8]) -> Option<Hello> {
    let mut r = Reader(body);
    if r.take(6).ok()? != MAGIC || r.u16().ok()? != VERSION {
        return None;
    }
    let from = r.u64().ok()?;
    let to = r.u64().ok()?;
    let cluster = ClusterId(r.take(16).ok()?.try_into().ok()?);
    r.end().ok()?;
    Some(Hello { from, to, cluster })
}

pub fn welcome(node: NodeId, cluster: ClusterId) -> Vec<u8> {
    let mut out = start(WELCOME);
    out.extend_from_slice(&node.to_le_bytes());
    out.extend_from_slice(&cluster.0);
    finish(out)
}

pub fn read_welcome(body: &[u8]) -> Result<(NodeId, ClusterId), CodecError> {
    let mut r = Reader(body);
    let node = r.u64()?;
    let cluster = ClusterId(r.take(16)?.try_into().map_err(|_| CodecError::Truncated)?);
    r.end()?;
    Ok((node, cluster))
}

pub fn refused(reason: &str) -> Vec<u8> {
    let mut out = start(REFUSED);
    codec::put_str(&mut out, reason);
    finish(out)
}

pub fn read_refused(body: &[u8]) -> Result<String, CodecError> {
    let mut r = Reader(body);
    let reason = r.string()?;
    r.end()?;
    Ok(reason)
}

pub fn append(rpc: &AppendEntriesRequest<TypeConfig>) -> Vec<u8> {
    // Sized once: the entries' records are most of it (grown by doubling, the
    // frame had cost the leader's Raft thread a copy and fresh pages or two).
    let size = 128
        + rpc
            .entries
            .iter()
            .map(|e| 4 + codec::entry_len(e))
            .sum::<usize>();
    let mut out = start_sized(APPEND, size);
    codec::put_vote(&mut out, &rpc.vote);
    codec::put_log_id(&mut out, rpc.prev_log_id.as_ref());
    codec::put_log_id(&mut out, rpc.leader_commit.as_ref());
    out.extend_from_slice(&(rpc.entries.len() as u32).to_le_bytes());
    for entry in &rpc.entries {
        let at = out.len();
        out.extend_from_slice(&[0; 4]);
        codec::put_entry(&mut out, entry);
        let len = (out.len() - at - 4) as u32;
        out[at..at + 4].copy_from_slice(&len.to_le_bytes());
    }
    finish(out)
}

/// An append request from its frame's body; the entries' records are slices
/// of the body, not copies.
pub fn read_append(body: &Bytes) -> Result<AppendEntriesRequest<TypeConfig>, CodecError> {
    let mut r = Reader(body);
    let vote = codec::vote(&mut r)?;
    let prev_log_id = codec::log_id(&mut r)?;
    let leader_commit = codec::log_id(&mut r)?;
    // The count comes from the bytes: entries are pushed as they decode.
    let mut entries = Vec::new();
    for _ in 0..r.u32()? {
        let len = r.u32()? as usize;
        let bytes = r.take(len)?;
        entries.push(codec::entry_with(bytes, |records| body.slice_ref(records))?);
    }
    r.end()?;
    Ok(AppendEntriesRequest {
        vote,
        prev_log_id,
        entries,
        leader_commit,
    })
}

pub fn vote_request(rpc: &VoteRequest<NodeId>) -> Vec<u8> {
    let mut out = start(VOTE);
    codec::put_vote(&mut out, &rpc.vote);
    codec::put_log_id(&mut out, rpc.last_log_id.as_ref());
    finish(out)
}

pub fn read_vote_request(body: &[u8]) -> Result<VoteRequest<NodeId>, CodecError> {
    let mut r = Reader(body);
    let vote = codec::vote(&mut r)?;
    let last_log_id = codec::log_id(&mut r)?;
    r.end()?;
    Ok(VoteRequest { vote, last_log_id })
}

pub fn snapshot(rpc: &InstallSnapshotRequest<TypeConfig>) -> Vec<u8> {
    let mut out = start(SNAPSHOT);
    codec::put_vote(&mut out, &rpc.vote);
    codec::put_snapshot_meta(&mut out, &rpc.meta);
    out.extend_from_slice(&rpc.offset.to_le_bytes());
    out.push(u8::from(rpc.done));
    out.extend_from_slice(&rpc.data);
    finish(out)
}

pub fn read_snapshot(body: &[u8]) -> Result<InstallSnapshotRequest<TypeConfig>, CodecError> {
    let mut r = Reader(body);
    let vote = codec::vote(&mut r)?;
    let meta = codec::snapshot_meta(&mut r)?;
    let offset = r.u64()?;
    let done = match r.u8()? {
        0 => false,
        1 => true,
        tag => return Err(CodecError::Tag { what: "done", tag }),
    };
    Ok(InstallSnapshotRequest {
        vote,
        meta,
        offset,
        data: r.0.to_vec(),
        done,
    })
}

pub fn append_reply(resp: &AppendEntriesResponse<NodeId>) -> Vec<u8> {
    let mut out = start(REPLY);
    match resp {
        AppendEntriesResponse::Success => out.push(0),
        AppendEntriesResponse::PartialSuccess(id) => {
            out.push(1);
            codec::put_log_id(&mut out, id.as_ref());
        }
        AppendEntriesResponse::Conflict => out.push(2),
        AppendEntriesResponse::HigherVote(vote) => {
            out.push(3);
            codec::put_vote(&mut out, vote);
        }
    }
    finish(out)
}

pub fn read_append_reply(body: &[u8]) -> Result<AppendEntriesResponse<NodeId>, CodecError> {
    let mut r = Reader(body);
    let resp = match r.u8()? {
        0 => AppendEntriesResponse::Success,
        1 => AppendEntriesResponse::PartialSuccess(codec::log_id(&mut r)?),
        2 => AppendEntriesResponse::Conflict,
        3 => AppendEntriesResponse::HigherVote(codec::vote(&mut r)?),
        tag => {
            return Err(CodecError::Tag {
                what: "append reply",
                tag,
            })
        }
    };
    r.end()?;
    Ok(resp)
}

pub fn vote_reply(resp: &VoteResponse<NodeId>) -> Vec<u8> {
    let mut out = start(REPLY);
    codec::put_vote(&mut out, &resp.vote);
    out.push(u8::from(resp.vote_granted));
    codec::put_log_id(&mut out, resp.last_log_id.as_ref());
    finish(out)
}

pub fn read_vote_reply(body: &[u8]) -> Result<VoteResponse<NodeId>, CodecError> {
    let mut r = Reader(body);
    let vote = codec::vote(&mut r)?;
    let vote_granted = r.u8()? != 0;
    let last_log_id = codec::log_id(&mut r)?;
    r.end()?;
    Ok(VoteResponse {
        vote,
        vote_granted,
        last_log_id,
    })
}

pub fn snapshot_reply(resp: &InstallSnapshotResponse<NodeId>) -> Vec<u8> {
    let mut out = start(REPLY);
    codec::put_vote(&mut out, &resp.vote);
    finish(out)
}

pub fn read_snapshot_reply(body: &[u8]) -> Result<InstallSnapshotResponse<NodeId>, CodecError> {
    let mut r = Reader(body);
    let vote = codec::vote(&mut r)?;
    r.end()?;
    Ok(InstallSnapshotResponse { vote })
}

fn put_fatal(out: &mut Vec<u8>, fatal: &Fatal<NodeId>) {
    match fatal {
        Fatal::Stopped => out.push(0),
        Fatal::Panicked => out.push(1),
        Fatal::StorageError(e) => {
            out.push(2);
            codec::put_str(out, &e.to_string());
        }
    }
}

/// The frame for a fatal error of the local Raft.
pub fn failed(fatal: &Fatal<NodeId>) -> Vec<u8> {
    let mut out = start(FAILED);
    put_fatal(&mut out, fatal);
    finish(out)
}

/// The frame for a snapshot chunk that is not the one expected.
pub fn mismatch(m: &SnapshotMismatch) -> Vec<u8> {
    let mut out = start(FAILED);
    out.push(3);
    codec::put_str(&mut out, &m.expect.id);
    out.extend_from_slice(&m.expect.offset.to_le_bytes());
    codec::put_str(&mut out, &m.got.id);
    out.extend_from_slice(&m.got.offset.to_le_bytes());
    finish(out)
}

/// What a failed frame reports: a fatal error of the remote node, or a
/// snapshot chunk out of order.
#[derive(Debug)]
pub enum Failure {
    Fatal(Fatal<NodeId>),
    Mismatch(SnapshotMismatch),
}

pub fn read_failed(body: &[u8]) -> Result<Failure, CodecError> {
    let mut r = Reader(body);
    let failure = match r.u8()? {
        0 => Failure::Fatal(Fatal::Stopped),
        1 => Failure::Fatal(Fatal::Panicked),
        2 => {
            let message = r.string()?;
            let io = StorageIOError::read(AnyError::error(message));
            Failure::Fatal(Fatal::StorageError(io.into()))
        }
        3 => {
            let expect = SnapshotSegmentId {
                id: r.string()?,
                offset: r.u64()?,
            };
            let got = SnapshotSegmentId {
                id: r.string()?,
                offset: r.u64()?,
            };
            Failure::Mismatch(SnapshotMismatch { expect, got })
        }
        tag => {
            return Err(CodecError::Tag {
                what: "failure",
                tag,
            })
        }
    };
    r.end()?;
    Ok(failure)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Batch, Entry, LogId, Vote};
    use openraft::{CommittedLeaderId, EntryPayload};

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        match tokio::runtime::Builder::new_current_thread().build() {
            Ok(rt) => rt.block_on(f),
            Err(e) => panic!("no runtime: {e}"),
        }
    }

    #[test]
    fn an_append_reads_back_and_a_cut_or_padded_one_does_not() {
        let id = |i| LogId::new(CommittedLeaderId::new(3, 1), i);
        let rpc = AppendEntriesRequest::<TypeConfig> {
            vote: Vote::new_committed(3, 1),
            prev_log_id: Some(id(4)),
            entries: vec![
                Entry {
                    log_id: id(5),
                    payload: EntryPayload::Blank,
                },
                Entry {
                    log_id: id(6),
                    payload: EntryPayload::Normal(Batch {
                        at: 9,
                        records: bytes::Bytes::from_static(b"records"),
                    }),
                },
            ],
            leader_commit: Some(id(5)),
        };
        let frame = append(&rpc);
        let (kind, body) = block_on(read_frame(&mut &frame[..], 1 << 20)).expect("a frame");
        assert_eq!(kind, APPEND);
        assert_eq!(body.capacity(), body.len(), "read into exactly its room");
        let mut padded = body.clone();
        padded.push(0);
        let body = Bytes::from(body);
        let back = read_append(&body).expect("decodes");
        assert_eq!(format!("{back:?}"), format!("{rpc:?}"));
        // The records are the frame's own bytes.
        let EntryPayload::Normal(batch) = &back.entries[1].payload else {
            panic!("not the records")
        };
        let within = body.as_ptr_range();
        assert!(within.contains(&batch.records.as_ptr()));
        assert!(read_append(&body.slice(..body.len() - 1)).is_err());
        assert_eq!(
            read_append(&Bytes::from(padded)).err(),
            Some(CodecError::Trailing(1))
        );
        // The frame was made in one allocation of its size or a little more.
        assert!(frame.capacity() - frame.len() < 256, "{}", frame.capacity());
    }

    #[test]
    fn a_frame_larger_than_a_read_step_is_read_whole() {
        let records = Bytes::from((0..3 * READ_STEP + 7).map(|i| i as u8).collect::<Vec<u8>>());
        let rpc = AppendEntriesRequest::<TypeConfig> {
            vote: Vote::new_committed(3, 1),
            prev_log_id: None,
            entries: vec![Entry {
                log_id: LogId::new(CommittedLeaderId::new(3, 1), 1),
                payload: EntryPayload::Normal(Batch { at: 1, records }),
            }],
            leader_commit: None,
        };
        let frame = append(&rpc);
        let (_, body) = block_on(read_frame(&mut &frame[..], 1 << 20)).expect("a frame");
        let back = read_append(&Bytes::from(body)).expect("decodes");
        assert_eq!(format!("{back:?}"), format!("{rpc:?}"));
        assert!(block_on(read_frame(&mut &frame[..frame.len() - 1], 1 << 20)).is_err());
    }

    #[test]
    fn frames_over_the_limit_or_cut_short_are_refused() {
        let frame = vote_request(&VoteRequest::new(Vote::new(2, 2), None));
        let len = frame.len() - 4;
        assert!(block_on(read_frame(&mut &frame[..], len)).is_ok());
        assert!(block_on(read_frame(&mut &frame[..], len - 1)).is_err());
        assert!(block_on(read_frame(&mut &frame[..frame.len() - 1], len)).is_err());
        assert!(block_on(read_frame(&mut &[0u8, 0, 0, 0][..], len)).is_err());
    }
}
