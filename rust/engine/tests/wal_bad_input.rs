//! Every reader of a beanpole log directory (recovery, `binlog dump`, `verify`,
//! `compact`) on damaged copies of a log a server really wrote: bits flipped,
//! bytes overwritten or spliced in, files cut at any offset, length fields set to
//! absurd values (checksum made right again, so the value is believed), records
//! duplicated or dropped, headers changed, segments removed. Each must end with
//! its documented outcome or a typed error: no panic, no allocation sized by a
//! field, a torn tail cut to exactly the records before it, corruption in the
//! middle reported with its segment and offset.
//!
//! The properties run a few dozen cases each; `PROPTEST_CASES=N` runs more.

mod bad_input;
mod wal_util;

use std::ops::Range;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use bad_input::model::{assert_same_jobs, jobs_of, records_of, reseal, Expected};
use bad_input::{config, largest_allocation, mutation, read_files, write_files, Image};
use beanpole_engine::server::Shared;
use beanpole_engine::wal::format::{
    DecodeError, Header, Record, DELETE_RECORD_LEN, HEADER_LEN, ID_LIMIT,
};
use beanpole_engine::wal::fs::FsDir;
use beanpole_engine::wal::recover::{recover, RecoverError, Recovered};
use beanpole_engine::wal::{self, tools, FsyncPolicy, LogError};
use proptest::prelude::*;
use proptest::sample::Index;
use wal_util::*;

const SEGMENT: u64 = 8192;

/// The segments of a log written by a real server: jobs in three tubes, released
/// (with and without a delay), buried, kicked and deleted, over several segments.
fn written_log() -> &'static [Image] {
    static LOG: OnceLock<Vec<Image>> = OnceLock::new();
    LOG.get_or_init(|| {
        let tmp = TempDir::new("bad-input-src");
        let policy = FsyncPolicy::Every(Duration::from_millis(50));
        let (server, addr) = start(log_config(tmp.path(), SEGMENT, policy));
        let mut c = Client::connect(addr);
        let mut ids = Vec::new();
        for i in 0..90u32 {
            c.use_tube(&format!("tube-{}", i % 3));
            let body = format!("job {i}: {}", "x".repeat((i as usize * 37) % 500));
            ids.push(c.put(i, if i % 11 == 0 { 600 } else { 0 }, 30, body.as_bytes()));
        }
        for (i, &id) in ids.iter().enumerate() {
            let step = match i % 6 {
                0 => "delete",
                1 => "release-now",
                2 => "release-later",
                3 => "bury",
                4 => "bury-kick",
                _ => continue,
            };
            if step == "delete" {
                assert_eq!(c.cmd(&format!("delete {id}")), "DELETED\r\n");
                continue;
            }
            if !c.cmd(&format!("reserve-job {id}")).starts_with("RESERVED") {
                continue;
            }
            c.line();
            let reply = match step {
                "release-now" => c.cmd(&format!("release {id} 7 0")),
                "release-later" => c.cmd(&format!("release {id} 8 900")),
                _ => c.cmd(&format!("bury {id} 9")),
            };
            assert!(reply.ends_with("ED\r\n"), "{step}: {reply:?}");
            if step == "bury-kick" {
                assert_eq!(c.cmd(&format!("kick-job {id}")), "KICKED\r\n");
            }
        }
        drop(c);
        stop(server);
        let files = read_files(tmp.path(), |n| n.ends_with(".log"));
        let images: Vec<Image> = files
            .into_iter()
            .map(|(name, bytes)| Image {
                records: records_of(&bytes).into_iter().map(|(r, _)| r).collect(),
                name,
                bytes,
            })
            .collect();
        let with_records = images.iter().filter(|i| !i.records.is_empty()).count();
        assert!(with_records >= 3, "the log spans {with_records} segments");
        images
    })
}

fn seq_of(img: &Image) -> u64 {
    img.name
        .strip_suffix(".log")
        .and_then(|s| s.parse().ok())
        .expect("a segment name")
}

/// A fresh directory holding `files`.
fn dir_with(tmp: &TempDir, name: &str, files: &[Image]) -> std::path::PathBuf {
    let dir = tmp.sub(name);
    std::fs::create_dir_all(&dir).expect("mkdir");
    write_files(&dir, files);
    dir
}

fn segments_in(dir: &Path) -> Vec<(String, Vec<u8>)> {
    read_files(dir, |n| n.ends_with(".log"))
}

/// The largest single allocation a reader may make for these files: about a
/// file's size (whole-file reads, buffers of a segment), never a length field's.
fn allowed(files: &[Image]) -> usize {
    let total: usize = files.iter().map(|f| f.bytes.len()).sum();
    4 * total + (1 << 20)
}

/// What any recovery that succeeds must satisfy, whatever the input.
fn check_sane(rec: &Recovered, files: &[Image]) {
    let total: usize = files.iter().map(|f| f.bytes.len()).sum();
    assert!(rec.records as usize <= total / DELETE_RECORD_LEN);
    assert!(rec.jobs.len() as u64 <= rec.records);
    for j in &rec.jobs {
        assert!(j.body().len() <= total, "a body larger than the input");
        assert!((j.tube as usize) < rec.tubes.len());
        assert!(j.fields.id < rec.next_id, "job {} >= next id", j.fields.id);
    }
}

/// Recovery of `dir` (with the option to skip corruption or not), checked
/// against the documented outcomes; returns it when it succeeded.
fn recover_checked(dir: &Path, skip: bool, files: &[Image]) -> Option<Recovered> {
    let present: Vec<u64> = files.iter().map(seq_of).collect();
    let (got, peak) = largest_allocation(|| recover(&FsDir::new(dir), skip));
    assert!(
        peak <= allowed(files),
        "recovery allocated {peak} bytes at once"
    );
    match got {
        Ok(rec) => {
            check_sane(&rec, files);
            // A second recovery finds the same jobs, and without skipping
            // (so every cut was a torn tail) nothing more to cut. (Skipping may
            // have cut a torn segment after one whose end it skipped; that end
            // then reads as a torn tail.)
            let again = recover(&FsDir::new(dir), skip).expect("a second recovery");
            assert!(
                skip || again.warnings.iter().all(|w| !w.contains("torn tail")),
                "{:?}",
                again.warnings
            );
            assert_same_jobs(&jobs_of(&again), &jobs_of(&rec));
            Some(rec)
        }
        Err(RecoverError::Corrupt { seq, offset, .. }) => {
            assert!(!skip, "corruption not skipped");
            let img = files
                .iter()
                .find(|f| seq_of(f) == seq)
                .expect("its segment");
            assert!((HEADER_LEN as u64..img.bytes.len() as u64).contains(&offset));
            None
        }
        Err(RecoverError::BadSegment { seq, .. }) => {
            assert!(present.contains(&seq));
            None
        }
        Err(e @ RecoverError::Io { .. }) => panic!("{e}"),
    }
}

/// Open `dir` as a server does, move what it recovered into a store, let the
/// store write and compact once, and close it again.
fn start_store_on(dir: &Path) {
    let policy = FsyncPolicy::Every(Duration::from_millis(50));
    let mut opened = wal::open(&log_config(dir, SEGMENT, policy), MAX_JOB).expect("open");
    let shared = Shared::new(MAX_JOB, 0, Some(&mut opened), Duration::from_secs(5));
    shared.lock().flush_log();
    opened.pipe.stop();
    if let Some(writer) = opened.writer.take() {
        writer.join().expect("the writer thread");
    }
}

/// Every reader on one damaged directory.
fn check_all_readers(files: &[Image]) {
    let tmp = TempDir::new("bad-input");
    let dir = dir_with(&tmp, "dump", files);
    let (dump, peak) = largest_allocation(|| tools::dump(&dir));
    let dump = dump.expect("dump reads any segment");
    assert!(
        peak <= allowed(files),
        "dump allocated {peak} bytes at once"
    );
    let total: usize = files.iter().map(|f| f.bytes.len()).sum();
    assert!(dump.records.len() <= total / DELETE_RECORD_LEN);

    // verify changes nothing, and agrees with recovery.
    let before = segments_in(&dir);
    let verified = tools::verify(&dir);
    assert_eq!(segments_in(&dir), before, "verify changed the log");
    let refused = recover_checked(&dir, false, files).is_none();
    assert_eq!(verified.is_err(), refused, "verify and recovery disagree");
    if !refused {
        start_store_on(&dir);
    }

    let skipping = dir_with(&tmp, "skip", files);
    recover_checked(&skipping, true, files);

    // compact keeps exactly the jobs a recovery finds.
    let compacted = dir_with(&tmp, "compact", files);
    let expected = recover(&FsDir::new(dir_with(&tmp, "expected", files)), false);
    let (result, peak) = largest_allocation(|| tools::compact(&compacted, SEGMENT));
    assert!(
        peak <= allowed(files),
        "compact allocated {peak} bytes at once"
    );
    match (result, expected) {
        (Ok((kept, _)), Ok(expected)) => {
            let after = recover(&FsDir::new(&compacted), false).expect("a compacted log");
            assert!(after.warnings.is_empty(), "{:?}", after.warnings);
            assert_eq!(kept, expected.jobs.len());
            assert_same_jobs(&jobs_of(&after), &jobs_of(&expected));
            assert!(after.next_id >= expected.next_id);
        }
        (Err(LogError::Recover(_)), Err(_)) => {}
        (got, want) => panic!("compact gave {got:?}, recovery {want:?}"),
    }
}

/// The records a segment keeps when cut at `cut` (by truncating it, or by
/// zeroing from there on, which can leave a record whole if it ended in zeros).
fn kept_before(img: &Image, cut: usize, zero_fill: bool) -> usize {
    img.records
        .iter()
        .take_while(|r| {
            r.end <= cut || (zero_fill && img.bytes[cut..r.end].iter().all(|&b| b == 0))
        })
        .count()
}

/// All records of the log, each with the index of its segment among `files`.
fn all_records(files: &[Image]) -> Vec<(usize, std::ops::Range<usize>, Record)> {
    files
        .iter()
        .enumerate()
        .flat_map(|(i, f)| {
            records_of(&f.bytes)
                .into_iter()
                .map(move |(r, rec)| (i, r, rec))
        })
        .collect()
}

/// The next id a recovery of `files` keeping `records` must give.
fn next_id_of(files: &[Image], expected: &Expected) -> u64 {
    let headers = files
        .iter()
        .filter_map(|f| Header::decode(&f.bytes).ok())
        .map(|h| h.next_id);
    headers
        .chain([expected.floor, expected.max_id + 1, 1])
        .max()
        .unwrap_or(1)
}

/// Set field `field` of a record to `value` and encode it again, checksum and
/// all, so that replay believes it: ids, times, counters and floors at the ends
/// of their ranges.
fn set_odd_value(files: &mut [Image], which: usize, field: u8, value: u64) {
    let records = all_records(files);
    let (seg, range, mut record) = records[which % records.len()].clone();
    let (v32, v64) = (value as u32, value);
    match &mut record {
        Record::Job(j) => {
            let f = &mut j.fields;
            match field % 12 {
                0 => f.id = v64,
                1 => f.pri = v32,
                2 => f.delay = v32,
                3 => f.ttr = v32,
                4 => f.created = v64 as i64,
                5 => f.ready_at = v64 as i64,
                6 => f.bury_seq = v64,
                7 => f.reserves = v32,
                8 => f.timeouts = v32,
                9 => f.releases = v32,
                10 => f.buries = v32,
                _ => f.kicks = v32,
            }
        }
        Record::Release {
            id,
            pri,
            delay,
            ready_at,
        } => match field % 4 {
            0 => *id = v64,
            1 => *pri = v32,
            2 => *delay = v32,
            _ => *ready_at = v64 as i64,
        },
        Record::Bury { id, pri, bury_seq } => match field % 3 {
            0 => *id = v64,
            1 => *pri = v32,
            _ => *bury_seq = v64,
        },
        Record::Reserve { id }
        | Record::Kick { id }
        | Record::Timeout { id }
        | Record::Delete { id }
        | Record::Return { id } => *id = v64,
        Record::NextId { next_id } => *next_id = v64,
        // A single server's segments never hold session records.
        Record::Hold { id, .. } => *id = v64,
        Record::Outcome { owner, .. } | Record::End { owner } => *owner = v64,
        Record::Pause { until, .. } => *until = v64 as i64,
    }
    let mut bytes = Vec::new();
    record.encode(&mut bytes);
    files[seg].bytes.splice(range, bytes);
}

fn odd_value() -> impl Strategy<Value = u64> {
    prop_oneof![
        proptest::sample::select(&bad_input::ODD_U64[..]),
        proptest::sample::select(&bad_input::ODD_U32[..]).prop_map(u64::from),
        Just(i64::MIN as u64),
        any::<u64>(),
    ]
}

proptest! {
    #![proptest_config(config(48))]

    #[test]
    fn any_damage_gives_a_documented_outcome_or_a_typed_error(
        mutations in proptest::collection::vec(mutation(), 1..4),
    ) {
        let mut files = written_log().to_vec();
        for m in &mutations {
            m.apply(&mut files, HEADER_LEN, reseal);
        }
        check_all_readers(&files);
    }

    #[test]
    fn odd_values_that_a_checksum_vouches_for_are_replayed_or_refused(
        changes in proptest::collection::vec((any::<Index>(), any::<u8>(), odd_value()), 1..4),
        more in proptest::collection::vec(mutation(), 0..2),
    ) {
        let mut files = written_log().to_vec();
        for (which, field, value) in changes {
            set_odd_value(&mut files, which.index(usize::MAX), field, value);
        }
        for m in &more {
            m.apply(&mut files, HEADER_LEN, reseal);
        }
        check_all_readers(&files);
    }

    #[test]
    fn a_torn_tail_keeps_exactly_the_records_before_it(
        at in any::<Index>(),
        zero_fill in any::<bool>(),
    ) {
        let mut files = written_log().to_vec();
        let last = files.iter().rposition(|f| !f.records.is_empty()).expect("data");
        let img = files[last].clone();
        let (first, end) = (img.records[0].start, img.records.last().expect("records").end);
        let cut = first + at.index(end - first + 1);
        let kept = kept_before(&img, cut, zero_fill);
        let split = img.records.get(kept).map_or(end, |r| r.start);
        let torn = split < cut && img.bytes[split..cut].iter().any(|&b| b != 0);
        if zero_fill {
            files[last].bytes[cut..].fill(0);
        } else {
            files[last].bytes.truncate(cut);
        }
        let records = all_records(written_log());
        let survivors = records
            .iter()
            .filter(|(i, r, _)| *i < last || (*i == last && img.records[..kept].contains(r)))
            .map(|(_, _, rec)| rec);
        let expected = Expected::of(survivors);

        let tmp = TempDir::new("bad-input-torn");
        let dir = dir_with(&tmp, "log", &files);
        let rec = recover_checked(&dir, false, &files).expect("a torn tail is cut, not refused");
        let tails = rec.warnings.iter().filter(|w| w.contains("torn tail")).count();
        prop_assert_eq!(tails, usize::from(torn), "{:?}", rec.warnings);
        assert_same_jobs(&jobs_of(&rec), &expected.jobs);
        prop_assert_eq!(rec.next_id, next_id_of(&files, &expected));
    }

    #[test]
    fn damage_in_the_middle_is_reported_with_segment_and_offset(
        which in any::<Index>(),
        at in any::<Index>(),
        bit in 0..8u8,
    ) {
        let mut files = written_log().to_vec();
        let records = all_records(&files);
        let (seg, range, _) = records[which.index(records.len())].clone();
        files[seg].bytes[range.start + at.index(range.len())] ^= 1 << bit;
        let last = files.iter().rposition(|f| !f.records.is_empty()).expect("data");
        let is_tail = seg == last && files[seg].records.last() == Some(&range);
        let expected = Expected::of(
            records.iter().filter(|(s, r, _)| !(*s == seg && *r == range)).map(|(_, _, rec)| rec),
        );

        let tmp = TempDir::new("bad-input-middle");
        let dir = dir_with(&tmp, "log", &files);
        match recover(&FsDir::new(&dir), false) {
            Ok(rec) => {
                prop_assert!(is_tail, "damage in the middle was not reported");
                assert_same_jobs(&jobs_of(&rec), &expected.jobs);
            }
            Err(RecoverError::Corrupt { seq, offset, .. }) => {
                prop_assert!(!is_tail, "a torn tail was refused");
                prop_assert_eq!((seq, offset), (seq_of(&files[seg]), range.start as u64));
                let rec = recover_checked(&dir, true, &files).expect("skipped");
                assert_same_jobs(&jobs_of(&rec), &expected.jobs);
                let name = format!("segment {seq}");
                prop_assert!(rec.warnings.iter().any(|w| w.contains(&name)), "{:?}", rec.warnings);
            }
            Err(e) => prop_assert!(false, "{}", e),
        }
    }
}

#[test]
fn the_fixture_is_read_whole_by_every_reader() {
    let files = written_log();
    check_all_readers(files);
    let tmp = TempDir::new("bad-input-whole");
    let rec = recover(&FsDir::new(dir_with(&tmp, "log", files)), false).expect("recover");
    let expected = Expected::of(all_records(files).iter().map(|(_, _, r)| r));
    assert_same_jobs(&jobs_of(&rec), &expected.jobs);
    assert_eq!(rec.next_id, next_id_of(files, &expected));
    assert!(rec.warnings.is_empty(), "{:?}", rec.warnings);
}

/// The first record (of the given kind) of the log, as (its number among all
/// records, segment index, byte range).
fn first_record(files: &[Image], kind: fn(&Record) -> bool) -> (usize, usize, Range<usize>) {
    let (n, (seg, range, _)) = all_records(files)
        .into_iter()
        .enumerate()
        .find(|(_, (_, _, r))| kind(r))
        .expect("a record of that kind");
    (n, seg, range)
}

/// Recovery refuses `files` at the record in `range` of segment `seg` for
/// `reason`, and skipping drops just that record.
fn refused_at(files: &[Image], seg: usize, range: Range<usize>, reason: DecodeError) {
    let tmp = TempDir::new("bad-input-refused");
    let dir = dir_with(&tmp, "log", files);
    match recover(&FsDir::new(&dir), false) {
        Err(RecoverError::Corrupt {
            seq,
            offset,
            reason: why,
            ..
        }) => {
            assert_eq!(
                (seq, offset, why),
                (seq_of(&files[seg]), range.start as u64, reason)
            )
        }
        other => panic!("expected corruption: {other:?}"),
    }
    let rec = recover_checked(&dir, true, files).expect("skipped");
    let others = all_records(written_log());
    let expected = Expected::of(
        others
            .iter()
            .filter(|(s, r, _)| !(*s == seg && *r == range))
            .map(|(_, _, rec)| rec),
    );
    assert_same_jobs(&jobs_of(&rec), &expected.jobs);
    check_all_readers(files);
}

#[test]
fn an_id_at_the_top_of_the_range_is_refused_where_it_is() {
    for (kind, field) in [
        (
            (|r: &Record| matches!(r, Record::Job(_))) as fn(&Record) -> bool,
            0,
        ),
        (|r: &Record| matches!(r, Record::Delete { .. }), 0),
        (|r: &Record| matches!(r, Record::Bury { .. }), 0),
    ] {
        for id in [u64::MAX, ID_LIMIT] {
            let mut files = written_log().to_vec();
            let (n, seg, range) = first_record(&files, kind);
            set_odd_value(&mut files, n, field, id);
            refused_at(&files, seg, range, DecodeError::Id(id));
        }
    }
}

#[test]
fn a_header_whose_id_floor_is_out_of_range_is_refused() {
    let mut files = written_log().to_vec();
    files[0].bytes[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
    let tmp = TempDir::new("bad-input-header-id");
    let dir = dir_with(&tmp, "log", &files);
    match recover(&FsDir::new(&dir), true) {
        Err(RecoverError::BadSegment { seq, reason, .. }) => {
            assert_eq!(
                (seq, reason),
                (seq_of(&files[0]), DecodeError::Id(u64::MAX))
            )
        }
        other => panic!("expected a bad segment: {other:?}"),
    }
    check_all_readers(&files);
}
