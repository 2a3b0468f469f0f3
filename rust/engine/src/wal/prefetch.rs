//! Replay's helper thread: it maps the segments ahead of replay, checks their
//! records (checksums included) as far as they are intact, and unmaps the
//! segments replay is done with, so replay itself only decodes and applies. On a
//! machine with a second core this takes about a quarter of the work off a
//! restart's critical path.
//!
//! Replay still walks every segment itself and handles everything past the
//! checked part (torn tails, corruption) as before; within the checked part it
//! skips computing the checksums again. The bytes cannot change in between: a
//! mapping is read-only, and the directory lock keeps other beanpole processes off
//! the files.

use std::io;
use std::sync::mpsc;

use super::decode::RecordRef;
use super::format::HEADER_LEN;
use super::fs::LogDir;
use super::mapped::SegmentBytes;

/// Segments mapped ahead of replay at most (besides the one replay is in).
const AHEAD: usize = 2;

/// One segment, ready for replay.
#[derive(Debug)]
pub(super) struct Prefetched {
    pub bytes: io::Result<SegmentBytes>,
    /// Records from `HEADER_LEN` up to this offset decode, checksums included.
    pub checked: usize,
}

/// What replay is handed: the segments in order, and where to return them.
pub(super) struct Segments<'a>(Source<'a>);

enum Source<'a> {
    Helper {
        /// Bounded, so at most `AHEAD` mappings wait; a plain std channel, as one
        /// thread sends and one receives, both blocking.
        ahead: mpsc::Receiver<Prefetched>,
        /// Segments replay is done with, to unmap on the helper thread. Unbounded:
        /// the sender must never block; the helper drains it before every mapping.
        done: mpsc::Sender<SegmentBytes>,
    },
    /// Without a helper (none could be started, or a test asks): each segment is
    /// mapped when asked for, and all its checksums are left to replay.
    Inline {
        dir: &'a dyn LogDir,
        seqs: std::slice::Iter<'a, u64>,
    },
}

impl Segments<'_> {
    /// The next segment (in the order given to [`with_prefetch`]).
    pub fn next(&mut self) -> Option<Prefetched> {
        match &mut self.0 {
            Source::Helper { ahead, .. } => ahead.recv().ok(),
            Source::Inline { dir, seqs } => seqs.next().map(|&seq| Prefetched {
                bytes: dir.map(seq),
                checked: HEADER_LEN,
            }),
        }
    }

    /// Hand a segment back, to be unmapped off replay's thread.
    pub fn done(&self, bytes: SegmentBytes) {
        if let Source::Helper { done, .. } = &self.0 {
            // If the helper has exited already, the segment is dropped right here.
            let _ = done.send(bytes);
        }
    }
}

/// Run `replay` with a helper thread preparing the segments `seqs` of `dir`.
pub(super) fn with_prefetch<'a, R>(
    dir: &'a dyn LogDir,
    seqs: &'a [u64],
    replay: impl FnOnce(&mut Segments<'a>) -> R,
) -> R {
    prepare(dir, seqs, true, replay)
}

/// [`with_prefetch`], with a helper thread only if `helper` (and one can be had).
fn prepare<'a, R>(
    dir: &'a dyn LogDir,
    seqs: &'a [u64],
    helper: bool,
    replay: impl FnOnce(&mut Segments<'a>) -> R,
) -> R {
    if !helper {
        return replay(&mut Segments(Source::Inline {
            dir,
            seqs: seqs.iter(),
        }));
    }
    let (ahead_tx, ahead_rx) = mpsc::sync_channel(AHEAD);
    let (done_tx, done_rx) = mpsc::channel::<SegmentBytes>();
    std::thread::scope(|scope| {
        let helper = std::thread::Builder::new()
            .name("beanpole-replay".into())
            .spawn_scoped(scope, move || {
                for &seq in seqs {
                    while let Ok(used) = done_rx.try_recv() {
                        drop(used);
                    }
                    let bytes = dir.map(seq);
                    let checked = bytes.as_ref().map_or(HEADER_LEN, |b| check(b));
                    let failed = bytes.is_err();
                    // Replay stopped early (an error) when nobody receives: stop too.
                    if ahead_tx.send(Prefetched { bytes, checked }).is_err() || failed {
                        return;
                    }
                }
                // No more segments (so a further `next` is None), then unmap what
                // replay hands back until it is done.
                drop(ahead_tx);
                for used in done_rx {
                    drop(used);
                }
            });
        let mut segments = match helper {
            Ok(_) => Segments(Source::Helper {
                ahead: ahead_rx,
                done: done_tx,
            }),
            Err(_) => Segments(Source::Inline {
                dir,
                seqs: seqs.iter(),
            }),
        };
        // Dropping `segments` at the end ends the helper's loop, before the scope
        // joins it.
        replay(&mut segments)
    })
}

/// The end of the intact records of a segment: records from `HEADER_LEN` are
/// decoded one after the other until one does not decode.
fn check(bytes: &[u8]) -> usize {
    let mut at = HEADER_LEN;
    while at < bytes.len() {
        match RecordRef::decode(&bytes[at..]) {
            Ok(Some((_, n))) => at += n,
            Ok(None) | Err(_) => break,
        }
    }
    at
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::wal::format::{Header, Record};
    use crate::wal::fs::FsDir;

    /// Segment `seq` with `records` delete records, one of them (if `bad`) with a
    /// flipped byte; returns its bytes and where its intact records end.
    fn segment(seq: u64, records: u64, bad: Option<u64>) -> (Vec<u8>, usize) {
        let mut bytes = Header {
            seq,
            next_id: 1,
            created: 0,
        }
        .encode()
        .to_vec();
        let mut intact = None;
        for id in 0..records {
            let at = bytes.len();
            Record::Delete { id }.encode(&mut bytes);
            if bad == Some(id) {
                bytes[at + 10] ^= 1;
                intact = Some(at);
            }
        }
        let end = intact.unwrap_or(bytes.len());
        bytes.resize(bytes.len() + 100, 0);
        (bytes, end)
    }

    #[test]
    fn both_ways_hand_over_every_segment_in_order_and_mark_the_intact_records() {
        let tmp = std::env::temp_dir().join(format!("beanpole-prefetch-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        let dir = FsDir::new(&tmp);
        let mut want = Vec::new();
        for (seq, records, bad) in [
            (1, 50, None),
            (2, 7, Some(3)),
            (3, 0, None),
            (4, 900, Some(899)),
        ] {
            let (bytes, end) = segment(seq, records, bad);
            std::fs::write(tmp.join(crate::wal::fs::segment_name(seq)), &bytes).unwrap();
            want.push((bytes, end));
        }
        let seqs = dir.segments().unwrap();
        for helper in [true, false] {
            let got = prepare(&dir, &seqs, helper, |segments| {
                let mut got = Vec::new();
                while let Some(p) = segments.next() {
                    let bytes = p.bytes.unwrap();
                    got.push((bytes.to_vec(), p.checked));
                    segments.done(bytes);
                }
                got
            });
            assert_eq!(got.len(), want.len());
            for ((bytes, checked), (want_bytes, end)) in got.iter().zip(&want) {
                assert_eq!(bytes, want_bytes);
                assert_eq!(*checked, if helper { *end } else { HEADER_LEN });
            }
        }
        // Replay stopping early (an error) does not leave the helper waiting.
        let first = with_prefetch(&dir, &seqs, |segments| segments.next().map(|p| p.checked));
        assert_eq!(first, Some(want[0].1));
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
