//! Hand-built segments (encoded by the log's own encoder) for what the damaged
//! copies in `wal_bad_input.rs` reach only by chance: a crash in the middle of a
//! binary job body, data that looks like the starts of many long records, and
//! counters and times at the ends of their ranges, which the server must take in
//! and count on.

mod wal_util;

use std::time::Duration;

use beanpole_engine::wal::format::{Header, JobFields, JobRecord, Record, StoredState, HEADER_LEN};
use beanpole_engine::wal::fs::{segment_name, FsDir};
use beanpole_engine::wal::recover::{recover, RecoverError};
use beanpole_engine::wal::FsyncPolicy;
use wal_util::*;

const SEGMENT: u64 = 8192;

/// Where the records of a segment start, up to the first that does not decode.
fn record_starts(bytes: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut at = HEADER_LEN;
    while let Ok(Some((_, n))) = Record::decode(&bytes[at..]) {
        out.push(at);
        at += n;
    }
    out
}

fn job(id: u64, body: Vec<u8>) -> Record {
    Record::Job(JobRecord {
        fields: JobFields {
            id,
            pri: 1,
            delay: 0,
            ttr: 10,
            state: StoredState::Ready,
            created: 1,
            ready_at: 0,
            bury_seq: 0,
            reserves: 0,
            timeouts: 0,
            releases: 0,
            buries: 0,
            kicks: 0,
        },
        tube: b"default".to_vec(),
        body,
    })
}

/// A segment of `size` bytes: a header, then `records`, then zeros.
fn segment(records: &[Record], size: usize) -> Vec<u8> {
    let mut bytes = Header {
        seq: 1,
        next_id: 1,
        created: 0,
    }
    .encode()
    .to_vec();
    for r in records {
        r.encode(&mut bytes);
    }
    bytes.resize(size.max(bytes.len()), 0);
    bytes
}

/// A crash in the middle of writing a job whose body is binary (small
/// little-endian numbers: many offsets in it read as a length that fits in the
/// segment) leaves a torn tail. Finding that nothing readable follows it used to
/// checksum up to the rest of the segment at every such offset: minutes for one
/// 128 KiB body in a debug build, hours for larger ones. (How much the search may
/// checksum is pinned in recover.rs's unit tests; this is the end-to-end case.)
#[test]
fn a_torn_binary_body_is_cut_without_a_checksum_at_every_offset() {
    let body: Vec<u8> = (0..128 * 1024).map(|i| [0x10, 0, 0x08, 0][i % 4]).collect();
    let mut bytes = segment(&[job(1, b"kept".to_vec()), job(2, body)], 0);
    let torn_at = record_starts(&bytes)[1];
    bytes.truncate(bytes.len() - 1000);
    bytes.resize(2 << 20, 0);
    let tmp = TempDir::new("bad-input-binary-tail");
    let dir = tmp.sub("log");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join(segment_name(1)), &bytes).expect("write");
    let rec = recover(&FsDir::new(&dir), false).expect("a torn tail is cut");
    assert_eq!(
        rec.jobs.iter().map(|j| j.fields.id).collect::<Vec<_>>(),
        [1]
    );
    let want = format!("torn tail cut at offset {torn_at}");
    assert!(
        rec.warnings.iter().any(|w| w.contains(&want)),
        "{:?}",
        rec.warnings
    );
}

/// Damage followed by many shapes of long records whose checksums do not match
/// (crafted, or a body holding copies of log records): the search for a readable
/// record gives up after a bounded amount of checksumming and reports
/// corruption, since it cannot tell that nothing readable follows.
#[test]
fn a_search_that_gives_up_reports_corruption_rather_than_cutting() {
    let len = 1 << 20;
    let mut bytes = segment(&[job(1, b"kept".to_vec()), Record::Delete { id: 9 }], len);
    let damaged = record_starts(&bytes)[1];
    bytes[damaged + 10] ^= 1;
    // A job record with an empty body, made to claim the rest of the segment.
    let mut fake = Vec::new();
    let head = job(7, Vec::new()).encode(&mut fake);
    for at in (damaged + 100..len - 200).step_by(100) {
        let body = len - at - head;
        fake[..4].copy_from_slice(&((len - at - 8) as u32).to_le_bytes());
        fake[head - 4..].copy_from_slice(&(body as u32).to_le_bytes());
        bytes[at..at + head].copy_from_slice(&fake);
    }
    let tmp = TempDir::new("bad-input-gave-up");
    let dir = tmp.sub("log");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join(segment_name(1)), &bytes).expect("write");
    match recover(&FsDir::new(&dir), false) {
        Err(RecoverError::Corrupt { seq: 1, offset, .. }) => assert_eq!(offset, damaged as u64),
        other => panic!("expected corruption: {other:?}"),
    }
    let rec = recover(&FsDir::new(&dir), true).expect("skipped");
    assert_eq!(
        rec.jobs.iter().map(|j| j.fields.id).collect::<Vec<_>>(),
        [1]
    );
    assert!(
        rec.warnings.iter().any(|w| w.contains("gave up")),
        "{:?}",
        rec.warnings
    );
}

/// A directory holding one segment with `records`.
fn log_of(tmp: &TempDir, records: &[Record]) -> std::path::PathBuf {
    let dir = tmp.sub("log");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let bytes = segment(records, SEGMENT as usize);
    std::fs::write(dir.join(segment_name(1)), bytes).expect("write");
    dir
}

/// Counters and times are whatever the log says (any value passes the checksum):
/// counters at their largest wrap around when counted on, in replay and in the
/// server, and times at the ends of their range become the earliest or the
/// latest the server can hold, instead of overflowing.
#[test]
fn counters_and_times_at_the_ends_of_their_ranges_come_back_and_count_on() {
    let Record::Job(mut counted) = job(1, b"counted".to_vec()) else {
        unreachable!()
    };
    let f = &mut counted.fields;
    (f.reserves, f.timeouts, f.releases, f.buries, f.kicks) =
        (u32::MAX, 7, u32::MAX, u32::MAX, u32::MAX);
    f.created = i64::MIN;
    let Record::Job(mut late) = job(2, b"late".to_vec()) else {
        unreachable!()
    };
    (late.fields.state, late.fields.delay) = (StoredState::Delayed, u32::MAX);
    (late.fields.created, late.fields.ready_at) = (i64::MAX, i64::MAX);
    let Record::Job(mut early) = job(3, b"early".to_vec()) else {
        unreachable!()
    };
    (early.fields.state, early.fields.delay) = (StoredState::Delayed, 1);
    (early.fields.created, early.fields.ready_at) = (i64::MIN, i64::MIN);
    let records = [
        Record::Job(counted),
        Record::Job(late),
        Record::Job(early),
        Record::Reserve { id: 1 },
    ];
    let tmp = TempDir::new("bad-input-ranges");
    let dir = log_of(&tmp, &records);
    let policy = FsyncPolicy::Every(Duration::from_millis(50));
    let (server, addr) = start(log_config(&dir, SEGMENT, policy));
    let mut c = Client::connect(addr);
    let stats = c.stats_job(1).expect("job 1");
    assert_eq!(
        (num(&stats, "reserves"), stats["state"].as_str()),
        (0, "ready")
    );
    assert!(c.cmd("reserve-job 1").starts_with("RESERVED 1 "));
    c.line();
    assert_eq!(c.cmd("release 1 5 0"), "RELEASED\r\n");
    assert!(c.cmd("reserve-job 1").starts_with("RESERVED 1 "));
    c.line();
    assert_eq!(c.cmd("bury 1 5"), "BURIED\r\n");
    assert_eq!(c.cmd("kick-job 1"), "KICKED\r\n");
    let stats = c.stats_job(1).expect("job 1");
    for (key, want) in [
        ("reserves", 2),
        ("releases", 0),
        ("buries", 0),
        ("kicks", 0),
    ] {
        assert_eq!(num(&stats, key), want, "{key}");
    }
    assert_eq!(c.stats_job(2).expect("job 2")["state"], "delayed");
    assert_eq!(c.stats_job(3).expect("job 3")["state"], "ready");
    drop(c);
    stop(server);
    let rec = recover(&FsDir::new(&dir), false).expect("the log the server left");
    assert_eq!(rec.jobs.len(), 3);
}
