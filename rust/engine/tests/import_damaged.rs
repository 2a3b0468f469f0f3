//! Damaged copies of the committed beanstalkd binlogs (every truncation, random
//! byte flips, arbitrary bytes): the reader gives `Ok` or `Err`, never a panic.

mod import_common;

use std::path::{Path, PathBuf};

use beanpole_engine::wal::import::{replay_beanstalkd_files, ImportError, ImportReport};

use import_common::*;

// ---------------------------------------------------------------------------------
// Damaged copies: Ok or Err, never a panic.

/// Offsets at which to cut a file of `len` bytes whose data ends at `data_end`: every
/// one up to a little past the data (a large file gets a stride, and every offset near
/// its start and its end of data), then a few in the zeros after it.
fn cut_points(len: usize, data_end: usize) -> Vec<usize> {
    let dense_end = (data_end + 64).min(len);
    let mut cuts: Vec<usize> = if dense_end <= 20_000 {
        (0..=dense_end).collect()
    } else {
        let mut c: Vec<usize> = (0..=dense_end).step_by(97).collect();
        c.extend(0..400);
        c.extend(data_end.saturating_sub(400)..=dense_end);
        c
    };
    cuts.extend((dense_end..=len).step_by(509));
    cuts.push(len);
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

/// Replays `files` with file `i` replaced by `data`, copying nothing.
fn replay_with(
    files: &[(PathBuf, Vec<u8>)],
    i: usize,
    data: &[u8],
) -> Result<ImportReport, ImportError> {
    let refs: Vec<(&Path, &[u8])> = files
        .iter()
        .enumerate()
        .map(|(k, (p, d))| (p.as_path(), if k == i { data } else { d.as_slice() }))
        .collect();
    replay_beanstalkd_files(&refs)
}

#[test]
fn every_truncation_of_the_last_file_reads() {
    // A cut anywhere in the last file is a torn tail: always Ok.
    for case in CASES {
        let files = load_files(&data_dir().join(case));
        let last = files.len() - 1;
        let full = &files[last].1;
        let data_end = full.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
        for cut in cut_points(full.len(), data_end) {
            if let Err(e) = replay_with(&files, last, &full[..cut]) {
                panic!("{case}: cut at {cut}: {e}");
            }
        }
    }
}

#[test]
fn every_truncation_of_an_earlier_file_is_ok_or_err() {
    for case in CASES {
        let files = load_files(&data_dir().join(case));
        for i in 0..files.len().saturating_sub(1) {
            // This file with the one before (for updates to jobs it knows) and the one
            // after (so that it is not the last).
            let first = i.saturating_sub(1);
            let set = &files[first..i + 2];
            let full = &files[i].1;
            let data_end = full.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
            for cut in cut_points(full.len(), data_end) {
                match replay_with(set, i - first, &full[..cut]) {
                    Ok(_) => {}
                    Err(ImportError::Corrupt { offset, .. }) => {
                        assert!(offset as usize <= cut, "{case}: offset past the cut")
                    }
                    Err(e) => panic!("{case}: file {i} cut at {cut}: unexpected {e}"),
                }
            }
        }
    }
}

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[test]
fn random_byte_flips_never_panic() {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut outcomes = [0usize; 2];
    for case in CASES {
        let files = load_files(&data_dir().join(case));
        for _ in 0..600 {
            let mut set = files.clone();
            let flips = 1 + rng.below(4);
            for _ in 0..flips {
                let f = rng.below(set.len());
                let data = &mut set[f].1;
                let data_end = data.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
                let at = rng.below((data_end + 32).min(data.len()));
                if let Some(b) = data.get_mut(at) {
                    *b = match rng.below(3) {
                        0 => *b ^ (1 << rng.below(8)),
                        1 => rng.next() as u8,
                        _ => 0xff,
                    };
                }
            }
            outcomes[usize::from(replay(&set).is_ok())] += 1;
        }
    }
    // Both outcomes happen: the flips are not all harmless, nor all fatal.
    assert!(outcomes[0] > 0 && outcomes[1] > 0, "{outcomes:?}");
}

mod arbitrary {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn arbitrary_bytes_after_a_version(
            version in prop_oneof![Just(7i32), Just(5i32)],
            body in proptest::collection::vec(any::<u8>(), 0..600),
            last in any::<bool>(),
        ) {
            let mut data = version.to_le_bytes().to_vec();
            data.extend_from_slice(&body);
            let mut set = vec![(PathBuf::from("binlog.1"), data)];
            if !last {
                set.push((PathBuf::from("binlog.2"), 7i32.to_le_bytes().to_vec()));
            }
            let _ = replay(&set);
        }

        #[test]
        fn arbitrary_records_with_plausible_lengths(
            parts in proptest::collection::vec(
                (0u8..4, any::<u64>(), any::<u8>(), 0i32..40, any::<bool>()), 0..12),
        ) {
            // Records assembled from valid-looking pieces with random values in them.
            let mut data = 7i32.to_le_bytes().to_vec();
            for (kind, id, state, size, crlf) in parts {
                let mut rec = Rec::new(id % 8);
                rec.state = state % 6;
                rec.size = size;
                let mut body = vec![b'x'; size.max(0) as usize];
                if crlf && body.len() >= 2 {
                    let n = body.len();
                    body[n - 2..].copy_from_slice(b"\r\n");
                }
                match kind {
                    0 => data.extend(update7(&rec)),
                    1 => {
                        data.extend(6i32.to_le_bytes());
                        data.extend(b"tube-x");
                        data.extend(rec.v7());
                        data.extend(&body);
                    }
                    2 => data.extend(vec![0u8; (id % 100) as usize]),
                    _ => data.extend(&body),
                }
            }
            let _ = replay(&[(PathBuf::from("binlog.1"), data)]);
        }
    }
}
