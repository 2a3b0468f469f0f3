//! Where each entry's frame lies in the segment files, for reading entries back
//! that the log no longer keeps in memory (`cache.rs`): the writer publishes
//! every frame it writes and every segment it starts, cuts or removes
//! (`files.rs`); readers look a range up here and read it from the files.
//!
//! A reader holds the segment's file open while it reads (an `Arc` of a read
//! handle), so a purge that removes the file meanwhile does not fail the read:
//! the inode lives until the last handle goes. Only entries that are committed
//! and on disk are ever read back this way, and those are never truncated, so
//! the bytes at a published place do not change under a reader.
//!
//! Imports the codec and the cluster's types, nothing of the engine.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;

use crate::codec;
use crate::types::Entry;

/// A frame's header: len u32, crc u32.
pub(super) const FRAME_LEN: usize = 8;
/// The largest frame payload read back (a 1 GiB batch and its header).
pub(super) const MAX_FRAME: usize = (1 << 30) + 4096;

/// One frame at the start of `bytes`: its payload and length, or why not.
pub(super) fn frame(bytes: &[u8]) -> Result<(&[u8], usize), String> {
    let Some(head) = bytes.get(..FRAME_LEN) else {
        return Err("a frame cut short".into());
    };
    let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
    let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    if len > MAX_FRAME {
        return Err(format!("impossible length {len}"));
    }
    let Some(payload) = bytes.get(FRAME_LEN..FRAME_LEN + len) else {
        return Err("a frame cut short".into());
    };
    if crc32c::crc32c_append(crc32c::crc32c(&head[..4]), payload) != crc {
        return Err("checksum mismatch".into());
    }
    Ok((payload, FRAME_LEN + len))
}

/// One segment's frames as readers see them.
#[derive(Debug, Clone)]
pub(super) struct Placed {
    /// Index of its first entry.
    pub first: u64,
    /// Where each entry's frame starts.
    pub offsets: Vec<u64>,
    /// Where its frames end.
    pub end: u64,
    /// A read handle on the file.
    pub file: Arc<File>,
}

/// The table of frames, shared by the writer and the log's readers. A std
/// mutex: held to push one offset or to look a range up, never across the
/// reads themselves, so an async lock would only add cost.
#[derive(Debug, Default)]
pub struct Frames {
    table: Mutex<Vec<Placed>>,
    /// Fault injection for tests: milliseconds each read is held back (a slow
    /// disk), settable while the node runs.
    stall: Arc<AtomicU64>,
    /// Reads under way now (the tests' view of a read held back).
    reading: AtomicU64,
}

/// A run of frames to read from one file.
struct Span {
    file: Arc<File>,
    first: u64,
    count: usize,
    from: u64,
    to: u64,
}

impl Frames {
    fn lock(&self) -> MutexGuard<'_, Vec<Placed>> {
        // Plain data: a panic elsewhere leaves it usable.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publish the segments as they now are (at open, and after a segment is
    /// started, cut or removed).
    pub(super) fn replace(&self, segments: Vec<Placed>) {
        *self.lock() = segments;
    }

    /// Publish the frame of entry `index`, written at `at` up to `end` in the
    /// last segment. The writer starts a new segment (and publishes it) for an
    /// entry that does not follow the last one, so it always does.
    pub(super) fn push(&self, index: u64, at: u64, end: u64) {
        let mut table = self.lock();
        let last = table.last_mut();
        debug_assert!(
            matches!(&last, Some(l) if l.first + l.offsets.len() as u64 == index),
            "frame of entry {index} does not follow the last segment's"
        );
        if let Some(last) = last {
            if last.first + last.offsets.len() as u64 == index {
                last.offsets.push(at);
                last.end = end;
            }
        }
    }

    /// The read stall knob ([`Frames::read`]), shared.
    pub(super) fn stall(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.stall)
    }

    /// How many reads are under way now.
    pub(super) fn reading(&self) -> u64 {
        self.reading.load(Ordering::SeqCst)
    }

    /// Read the entries `from..to` back from the files: those found, in order,
    /// from `from` on (none if `from` is not on disk; fewer if the range runs
    /// past what is, or past `max_bytes` of frames, though never none for that).
    /// Blocks on the disk: called off the Raft thread (`cache.rs`).
    pub fn read(&self, from: u64, to: u64, max_bytes: u64) -> io::Result<Vec<Entry>> {
        self.reading.fetch_add(1, Ordering::SeqCst);
        let stall = self.stall.load(Ordering::Relaxed);
        if stall > 0 {
            std::thread::sleep(Duration::from_millis(stall));
        }
        let out = self.read_spans(from, to, max_bytes);
        self.reading.fetch_sub(1, Ordering::SeqCst);
        out
    }

    fn read_spans(&self, from: u64, to: u64, max_bytes: u64) -> io::Result<Vec<Entry>> {
        let spans = self.spans(from, to, max_bytes);
        let mut out = Vec::new();
        for span in spans {
            let len = usize::try_from(span.to - span.from).map_err(io::Error::other)?;
            let mut buf = vec![0u8; len];
            span.file.read_exact_at(&mut buf, span.from)?;
            let buf = Bytes::from(buf);
            let mut at = 0;
            for i in 0..span.count {
                let expect = span.first + i as u64;
                let bad = |why: String| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("raft log entry {expect} read back: {why}"),
                    )
                };
                let (payload, n) = frame(&buf[at..]).map_err(bad)?;
                let entry = codec::entry_with(payload, |records| buf.slice_ref(records))
                    .map_err(|e| bad(e.to_string()))?;
                if entry.log_id.index != expect {
                    return Err(bad(format!("found entry {}", entry.log_id.index)));
                }
                out.push(entry);
                at += n;
            }
        }
        Ok(out)
    }

    /// The runs of frames holding `from..to`, one per segment, as far as they
    /// are consecutive from `from` and within `max_bytes` (but the first frame).
    fn spans(&self, from: u64, to: u64, max_bytes: u64) -> Vec<Span> {
        let table = self.lock();
        let mut spans = Vec::new();
        let mut next = from;
        let mut left = max_bytes;
        for seg in table.iter() {
            let count = seg.offsets.len() as u64;
            if next >= to {
                break;
            }
            if next < seg.first || next >= seg.first + count {
                if spans.is_empty() {
                    continue;
                }
                break;
            }
            let start = (next - seg.first) as usize;
            let mut stop = ((to - seg.first).min(count)) as usize;
            let end_of = |i: usize| seg.offsets.get(i).copied().unwrap_or(seg.end);
            let at = seg.offsets[start];
            while stop > start + 1 && end_of(stop) - at > left {
                stop -= 1;
            }
            let end = end_of(stop);
            if end - at > left && !spans.is_empty() {
                break;
            }
            left = left.saturating_sub(end - at);
            spans.push(Span {
                file: Arc::clone(&seg.file),
                first: next,
                count: stop - start,
                from: seg.offsets[start],
                to: end,
            });
            next = seg.first + stop as u64;
            if left == 0 {
                break;
            }
        }
        spans
    }
}
