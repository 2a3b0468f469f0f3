//! Recovery of the write-ahead log on real files: exact restart of jobs in every
//! state, torn tails cut at every byte, corruption in the middle, strange segments,
//! the directory lock, beanstalkd directories, and ids after compaction.

mod wal_util;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use beanpole_engine::server::ServerError;
use beanpole_engine::wal::format::{DecodeError, Header, Record, StoredState, HEADER_LEN};
use beanpole_engine::wal::fs::FsDir;
use beanpole_engine::wal::recover::{recover, RecoverError, Recovered};
use beanpole_engine::wal::{self, FsyncPolicy, LogError};
use wal_util::*;

const EVERY_50MS: FsyncPolicy = FsyncPolicy::Every(Duration::from_millis(50));

/// The fields of stats-job that must be the same after a restart (`file` may change:
/// compaction moves the jobs of a mostly empty directory forward right away).
const KEPT: [&str; 10] = [
    "id", "tube", "pri", "delay", "ttr", "reserves", "timeouts", "releases", "buries", "kicks",
];

/// Open the log as the server does, take what it recovered, and close it again.
fn open_and_close(dir: &Path) -> Recovered {
    let mut opened = wal::open(&log_config(dir, 8192, EVERY_50MS), MAX_JOB).expect("open");
    let recovered = std::mem::take(&mut opened.recovered);
    opened.pipe.stop();
    if let Some(w) = opened.writer.take() {
        w.join().expect("writer");
    }
    recovered
}

/// Records of one segment file: (start offset, end offset, record).
fn records_of(bytes: &[u8]) -> Vec<(usize, usize, Record)> {
    Header::decode(bytes).expect("header");
    let mut out = Vec::new();
    let mut at = HEADER_LEN;
    while let Ok(Some((record, n))) = Record::decode(&bytes[at..]) {
        out.push((at, at + n, record));
        at += n;
    }
    out
}

fn segment_path(dir: &Path, seq: u64) -> std::path::PathBuf {
    dir.join(beanpole_engine::wal::fs::segment_name(seq))
}

/// Segments of `dir` that hold at least one record.
fn data_segments(dir: &Path) -> Vec<u64> {
    segment_files(dir)
        .into_iter()
        .filter(|&(seq, _)| {
            let bytes = std::fs::read(segment_path(dir, seq)).expect("read");
            !records_of(&bytes).is_empty()
        })
        .map(|(seq, _)| seq)
        .collect()
}

#[test]
fn jobs_in_every_state_come_back_exactly_after_a_restart() {
    let tmp = TempDir::new("wal-states");
    let config = log_config(tmp.path(), 64 * 1024, EVERY_50MS);
    let (server, addr) = start(config.clone());
    let mut c = Client::connect(addr);
    c.use_tube("alpha");
    let ready = c.put(5, 0, 30, b"ready-a");
    let binary = c.put(100, 0, 30, b"bin\0ary\r\nbody\xff");
    let big = c.put(6, 0, 30, &vec![b'x'; MAX_JOB as usize]);
    c.use_tube("beta");
    let delayed = c.put(7, 1000, 30, b"delayed");
    let reserved = c.put(1, 0, 100, b"reserved");
    let released0 = c.put(50, 0, 30, b"released with delay 0");
    let released_later = c.put(51, 0, 30, b"released with a delay");
    let kicked = c.put(52, 0, 30, b"kicked");
    let timed_out = c.put(53, 0, 1, b"timed out");
    let gone = c.put(54, 0, 30, b"deleted");
    c.use_tube("gamma");
    let buried: Vec<u64> = (0..3)
        .map(|i| c.put(60 + i, 0, 30, format!("buried-{i}").as_bytes()))
        .collect();

    assert!(c
        .cmd(&format!("reserve-job {released0}"))
        .starts_with("RESERVED"));
    c.body(21);
    assert_eq!(c.cmd(&format!("release {released0} 9 0")), "RELEASED\r\n");
    assert!(c
        .cmd(&format!("reserve-job {released_later}"))
        .starts_with("RESERVED"));
    c.body(21);
    assert_eq!(
        c.cmd(&format!("release {released_later} 11 500")),
        "RELEASED\r\n"
    );
    assert!(c
        .cmd(&format!("reserve-job {kicked}"))
        .starts_with("RESERVED"));
    c.body(6);
    assert_eq!(c.cmd(&format!("bury {kicked} 12")), "BURIED\r\n");
    assert_eq!(c.cmd(&format!("kick-job {kicked}")), "KICKED\r\n");
    // Buried out of id order: the buried order is the order of the buries.
    for (&id, pri) in [buried[1], buried[2], buried[0]].iter().zip([70, 71, 72]) {
        assert!(c.cmd(&format!("reserve-job {id}")).starts_with("RESERVED"));
        c.body(8);
        assert_eq!(c.cmd(&format!("bury {id} {pri}")), "BURIED\r\n");
    }
    assert!(c
        .cmd(&format!("reserve-job {gone}"))
        .starts_with("RESERVED"));
    c.body(7);
    assert_eq!(c.cmd(&format!("delete {gone}")), "DELETED\r\n");
    assert!(c
        .cmd(&format!("reserve-job {timed_out}"))
        .starts_with("RESERVED"));
    c.body(9);
    assert!(
        eventually(Duration::from_secs(5), || {
            c.stats_job(timed_out).expect("job")["state"] == "ready"
        }),
        "the TTR of 1 s ran out"
    );
    assert!(c
        .cmd(&format!("reserve-job {reserved}"))
        .starts_with("RESERVED"));
    c.body(8);

    let live = [
        ready,
        binary,
        big,
        delayed,
        reserved,
        released0,
        released_later,
        kicked,
        timed_out,
        buried[0],
        buried[1],
        buried[2],
    ];
    let mut before = BTreeMap::new();
    for &id in &live {
        let stats = c.stats_job(id).expect("job");
        let body = c.peek(&format!("peek {id}")).expect("body").1;
        before.insert(id, (stats, body));
    }
    assert_eq!(before[&reserved].0["state"], "reserved");
    let max_id = *live.iter().chain([&gone]).max().expect("ids");
    drop(c);
    stop(server);
    let stopped = Instant::now();

    // What the log itself holds: states as stored, the bury order, the counters.
    let rec = recover(&FsDir::new(tmp.path()), false).expect("recover");
    assert!(rec.warnings.is_empty(), "{:?}", rec.warnings);
    assert_eq!(rec.next_id, max_id + 1);
    let stored: BTreeMap<u64, _> = rec.jobs.iter().map(|r| (r.fields.id, r)).collect();
    assert_eq!(stored.keys().copied().collect::<Vec<_>>(), {
        let mut l = live.to_vec();
        l.sort_unstable();
        l
    });
    assert_eq!(stored[&reserved].fields.state, StoredState::Reserved);
    assert_eq!(stored[&delayed].fields.state, StoredState::Delayed);
    assert_eq!(stored[&released_later].fields.state, StoredState::Delayed);
    assert_eq!(stored[&released0].fields.state, StoredState::Ready);
    assert_eq!(stored[&released0].fields.pri, 9);
    assert_eq!(stored[&timed_out].fields.timeouts, 1);
    assert!(stored[&buried[1]].fields.bury_seq < stored[&buried[2]].fields.bury_seq);
    assert!(stored[&buried[2]].fields.bury_seq < stored[&buried[0]].fields.bury_seq);
    assert_eq!(stored[&big].body().len(), MAX_JOB as usize);

    let (server, addr) = start(config);
    let mut c = Client::connect(addr);
    for (&id, (old, body)) in &before {
        let new = c.stats_job(id).unwrap_or_else(|| panic!("job {id} lost"));
        for key in KEPT {
            assert_eq!(new[key], old[key], "job {id}: {key}");
        }
        let want_state = if id == reserved {
            "ready"
        } else {
            &old["state"]
        };
        assert_eq!(new["state"], want_state, "job {id}: state");
        assert!(num(&new, "age") >= num(old, "age"), "job {id}: age");
        if old["state"] == "delayed" {
            let left = num(&new, "time-left") as i64;
            let expect = num(old, "time-left") as i64 - stopped.elapsed().as_secs() as i64;
            assert!(
                (left - expect).abs() <= 2,
                "job {id}: time-left {left} vs {expect}"
            );
        }
        assert_eq!(&c.peek(&format!("peek {id}")).expect("body").1, body);
    }
    assert_eq!(c.stats_job(gone), None);
    c.use_tube("gamma");
    for &id in &[buried[1], buried[2], buried[0]] {
        assert_eq!(c.peek("peek-buried").expect("buried").0, id);
        assert_eq!(c.cmd("kick 1"), "KICKED 1\r\n");
    }
    assert_eq!(c.put(1, 0, 1, b"next"), max_id + 1);
    drop(c);
    stop(server);
}

/// Write a log with a server, stop it, and cut its newest data segment at every byte
/// offset within its last records, both by truncating the file and by zeroing the
/// rest (a preallocated file): recovery keeps exactly the records fully before the
/// cut and reports a torn tail whenever part of a record was left.
#[test]
fn a_cut_at_every_byte_of_the_last_records_keeps_everything_before_it() {
    let tmp = TempDir::new("wal-cut");
    let src = tmp.sub("src");
    let config = log_config(&src, 8192, EVERY_50MS);
    let (server, addr) = start(config);
    let mut c = Client::connect(addr);
    let mut ids = Vec::new();
    for i in 0..6u32 {
        c.use_tube(&format!("t{}", i % 2));
        ids.push(c.put(i, 0, 30, format!("body number {i}").as_bytes()));
    }
    // One record of every kind at the end.
    assert!(c
        .cmd(&format!("reserve-job {}", ids[0]))
        .starts_with("RESERVED"));
    c.body(13);
    assert_eq!(c.cmd(&format!("release {} 3 0", ids[0])), "RELEASED\r\n");
    assert!(c
        .cmd(&format!("reserve-job {}", ids[1]))
        .starts_with("RESERVED"));
    c.body(13);
    assert_eq!(c.cmd(&format!("bury {} 4", ids[1])), "BURIED\r\n");
    assert_eq!(c.cmd(&format!("kick-job {}", ids[1])), "KICKED\r\n");
    assert_eq!(c.cmd(&format!("delete {}", ids[2])), "DELETED\r\n");
    c.use_tube("last");
    ids.push(c.put(9, 0, 30, b"the last job, with a body of some length"));
    assert!(c
        .cmd(&format!("reserve-job {}", ids[3]))
        .starts_with("RESERVED"));
    drop(c);
    stop(server);

    let data = data_segments(&src);
    let seq = *data.last().expect("a segment with records");
    let original = std::fs::read(segment_path(&src, seq)).expect("read");
    let records = records_of(&original);
    assert!(records.len() >= 10, "{} records", records.len());
    let end = records.last().expect("records").1;
    let first_cut = records[records.len() - 7].0;
    let base = recover(&FsDir::new(&src), false).expect("the whole log recovers");
    assert!(base.warnings.is_empty(), "{:?}", base.warnings);
    let older_records = base.records - records.len() as u64;

    let work = tmp.sub("work");
    let mut oracle: BTreeMap<usize, Recovered> = BTreeMap::new();
    for cut in first_cut..=end {
        for zero_fill in [false, true] {
            // The records left intact, and the start of the first one that is not.
            // (Zeroing can leave a record intact when its last bytes were zeros.)
            let whole = records
                .iter()
                .take_while(|r| {
                    r.1 <= cut || (zero_fill && original[cut..r.1].iter().all(|&b| b == 0))
                })
                .count();
            let split_at = records.get(whole).map_or(end, |r| r.0);
            let torn = split_at < cut && original[split_at..cut].iter().any(|&b| b != 0);
            let _ = std::fs::remove_dir_all(&work);
            copy_dir(&src, &work);
            let path = segment_path(&work, seq);
            if zero_fill {
                let mut bytes = original.clone();
                bytes[cut..].fill(0);
                std::fs::write(&path, bytes).expect("write");
            } else {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .expect("open");
                f.set_len(cut as u64).expect("truncate");
            }
            let what = format!("cut at {cut} (zero fill {zero_fill})");
            let got = match recover(&FsDir::new(&work), false) {
                Ok(r) => r,
                Err(e) => panic!("{what}: {e}"),
            };
            assert_eq!(got.records, older_records + whole as u64, "{what}");
            let tails: Vec<_> = got
                .warnings
                .iter()
                .filter(|w| w.contains("torn tail") && w.contains(&format!("segment {seq}")))
                .collect();
            assert_eq!(tails.len(), usize::from(torn), "{what}: {:?}", got.warnings);
            assert_eq!(
                got.warnings.len(),
                tails.len(),
                "{what}: {:?}",
                got.warnings
            );
            // Cutting inside a record is the same as cutting at its start.
            match oracle.get(&split_at) {
                Some(o) => {
                    assert_eq!(got.jobs, o.jobs, "{what}");
                    assert_eq!(got.next_id, o.next_id, "{what}");
                }
                None => {
                    assert!(!torn, "{what}: a record boundary comes first");
                    oracle.insert(split_at, got);
                }
            }
            // Recovery cut the torn tail: a second pass has nothing to report.
            let again = recover(&FsDir::new(&work), false).expect("again");
            assert!(again.warnings.is_empty(), "{what}: {:?}", again.warnings);
            assert_eq!(again.records, older_records + whole as u64, "{what}");
            if cut % 16 == 0 {
                // And a server starts on it and goes on with the next id.
                let next = oracle[&split_at].next_id;
                let (server, addr) = start(log_config(&work, 8192, EVERY_50MS));
                let mut c = Client::connect(addr);
                assert_eq!(c.put(0, 0, 1, b"after"), next, "{what}");
                drop(c);
                stop(server);
            }
        }
    }
    // The full cut is the original state: every job of the first run.
    let full = &oracle[&end];
    assert_eq!(full.jobs, base.jobs);
    assert_eq!(full.jobs.len(), ids.len() - 1);
}

/// A log of many small segments, written by a server and stopped.
fn many_segments(dir: &Path, jobs: usize) -> Vec<u64> {
    let (server, addr) = start(log_config(dir, 8192, EVERY_50MS));
    let mut c = Client::connect(addr);
    let ids = (0..jobs)
        .map(|i| c.put(1, 0, 30, format!("{i:0>300}").as_bytes()))
        .collect();
    drop(c);
    stop(server);
    ids
}

/// Flip a byte in the middle of the middle record of segment `seq`; returns the
/// record's offset and the id of the job it was.
fn flip_middle_record(dir: &Path, seq: u64) -> (u64, u64) {
    let path = segment_path(dir, seq);
    let mut bytes = std::fs::read(&path).expect("read");
    let records = records_of(&bytes);
    assert!(
        records.len() >= 3,
        "segment {seq} has {} records",
        records.len()
    );
    let (start, end, record) = records[records.len() / 2].clone();
    bytes[(start + end) / 2] ^= 0x40;
    std::fs::write(&path, bytes).expect("write");
    (start as u64, record.id())
}

fn expect_corrupt(dir: &Path, seq: u64, offset: u64) {
    match recover(&FsDir::new(dir), false) {
        Err(e @ RecoverError::Corrupt { .. }) => {
            let RecoverError::Corrupt {
                seq: s, offset: o, ..
            } = &e
            else {
                unreachable!()
            };
            assert_eq!((*s, *o), (seq, offset), "{e}");
            let msg = e.to_string();
            assert!(msg.contains(&format!("segment {seq}")), "{msg}");
            assert!(msg.contains(&format!("offset {offset}")), "{msg}");
        }
        other => panic!("expected corruption in segment {seq} at {offset}: {other:?}"),
    }
    // The server refuses to start on it.
    match try_start(log_config(dir, 8192, EVERY_50MS)) {
        Err(ServerError::Log(LogError::Recover(RecoverError::Corrupt { seq: s, .. }))) => {
            assert_eq!(s, seq)
        }
        Err(e) => panic!("unexpected error: {e}"),
        Ok(_) => panic!("a server started on a corrupt log"),
    }
}

fn expect_skipped(dir: &Path, seq: u64, lost: u64, ids: &[u64]) {
    let rec = recover(&FsDir::new(dir), true).expect("skip corrupt");
    assert!(
        rec.warnings
            .iter()
            .any(|w| w.contains(&format!("segment {seq}")) && w.contains("corrupt")),
        "{:?}",
        rec.warnings
    );
    let got: Vec<u64> = rec.jobs.iter().map(|r| r.fields.id).collect();
    let want: Vec<u64> = ids.iter().copied().filter(|&id| id != lost).collect();
    assert_eq!(got, want);
    // And a server started with the option serves every other job.
    let (server, addr) = start(wal::LogConfig {
        skip_corrupt: true,
        ..log_config(dir, 8192, EVERY_50MS)
    });
    let mut c = Client::connect(addr);
    assert_eq!(num(&c.stats(), "current-jobs-ready"), want.len() as u64);
    assert_eq!(c.stats_job(lost), None);
    drop(c);
    stop(server);
}

#[test]
fn a_flipped_byte_in_an_older_segment_is_refused_unless_skipped() {
    let tmp = TempDir::new("wal-corrupt-old");
    let ids = many_segments(tmp.path(), 60);
    let data = data_segments(tmp.path());
    assert!(data.len() >= 3, "{data:?}");
    let (offset, lost) = flip_middle_record(tmp.path(), data[1]);
    expect_corrupt(tmp.path(), data[1], offset);
    expect_skipped(tmp.path(), data[1], lost, &ids);
}

#[test]
fn a_flipped_byte_in_the_newest_segment_with_records_after_it_is_refused_unless_skipped() {
    let tmp = TempDir::new("wal-corrupt-new");
    let ids = many_segments(tmp.path(), 40);
    let seq = *data_segments(tmp.path()).last().expect("data");
    let (offset, lost) = flip_middle_record(tmp.path(), seq);
    expect_corrupt(tmp.path(), seq, offset);
    expect_skipped(tmp.path(), seq, lost, &ids);
}

#[test]
fn a_segment_with_a_bad_magic_or_version_is_refused() {
    let tmp = TempDir::new("wal-header");
    let src = tmp.sub("src");
    many_segments(&src, 30);
    let seq = data_segments(&src)[0];
    for (at, value, want) in [
        (0, b'X', DecodeError::BadMagic),
        (8, 9, DecodeError::Version(9)),
    ] {
        let work = tmp.sub(&format!("at{at}"));
        copy_dir(&src, &work);
        let path = segment_path(&work, seq);
        let mut bytes = std::fs::read(&path).expect("read");
        bytes[at] = value;
        std::fs::write(&path, bytes).expect("write");
        match recover(&FsDir::new(&work), true) {
            Err(RecoverError::BadSegment { seq: s, reason, .. }) => {
                assert_eq!((s, reason), (seq, want.clone()))
            }
            other => panic!("expected a bad segment: {other:?}"),
        }
        match try_start(log_config(&work, 8192, EVERY_50MS)) {
            Err(ServerError::Log(LogError::Recover(RecoverError::BadSegment { .. }))) => {}
            Err(e) => panic!("unexpected error: {e}"),
            Ok(_) => panic!("a server started on a bad segment"),
        }
    }
}

#[test]
fn a_second_open_of_a_locked_directory_fails() {
    let tmp = TempDir::new("wal-lock");
    let config = log_config(tmp.path(), 8192, EVERY_50MS);
    let (server, _addr) = start(config.clone());
    match wal::open(&config, MAX_JOB) {
        Err(LogError::Io { source, .. }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::AddrInUse, "{source}")
        }
        Err(e) => panic!("unexpected error: {e}"),
        Ok(_) => panic!("opened a directory another server holds"),
    }
    match try_start(config.clone()) {
        Err(ServerError::Log(LogError::Io { .. })) => {}
        Err(e) => panic!("unexpected error: {e}"),
        Ok(_) => panic!("a second server started on the same directory"),
    }
    stop(server);
    // Released with the server.
    let (server, _addr) = start(config);
    stop(server);
}

#[test]
fn a_beanstalkd_binlog_directory_is_refused() {
    let tmp = TempDir::new("wal-beanstalkd");
    std::fs::write(tmp.path().join("binlog.1"), b"\x07\0\0\0").expect("write");
    let config = log_config(tmp.path(), 8192, EVERY_50MS);
    match wal::open(&config, MAX_JOB) {
        Err(e @ LogError::BeanstalkdDir { .. }) => {
            assert!(e.to_string().contains("beanpole binlog import"), "{e}")
        }
        Err(e) => panic!("unexpected error: {e}"),
        Ok(_) => panic!("opened a beanstalkd directory"),
    }
    assert!(matches!(
        try_start(config),
        Err(ServerError::Log(LogError::BeanstalkdDir { .. }))
    ));
    // Nothing was written into it.
    let names: Vec<_> = std::fs::read_dir(tmp.path())
        .expect("read dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names, ["binlog.1"]);
}

#[test]
fn ids_go_on_after_the_highest_even_when_it_was_deleted_and_compacted_away() {
    let tmp = TempDir::new("wal-ids");
    let config = log_config(tmp.path(), 8192, EVERY_50MS);
    let (server, addr) = start(config.clone());
    let mut c = Client::connect(addr);
    let ids: Vec<u64> = (0..5).map(|_| c.put(1, 0, 30, b"x")).collect();
    for id in &ids {
        assert_eq!(c.cmd(&format!("delete {id}")), "DELETED\r\n");
    }
    drop(c);
    stop(server);
    let first_run = data_segments(tmp.path());

    // The next run starts a new segment and drops the emptied ones.
    let (server, addr) = start(config.clone());
    let mut c = Client::connect(addr);
    assert!(eventually(Duration::from_secs(5), || {
        c.stats();
        let on_disk: Vec<u64> = segment_files(tmp.path()).iter().map(|s| s.0).collect();
        first_run.iter().all(|s| !on_disk.contains(s))
    }));
    drop(c);
    stop(server);
    // No record of those jobs is left (only what keeps the id floor).
    for (seq, _) in segment_files(tmp.path()) {
        let bytes = std::fs::read(segment_path(tmp.path(), seq)).expect("read");
        for (_, _, record) in records_of(&bytes) {
            assert!(
                !matches!(record, Record::Job(_) | Record::Delete { .. }),
                "segment {seq}: {record:?}"
            );
        }
    }

    let rec = open_and_close(tmp.path());
    assert_eq!(rec.next_id, ids[4] + 1);
    assert!(rec.jobs.is_empty());
    let (server, addr) = start(config);
    let mut c = Client::connect(addr);
    assert_eq!(c.put(1, 0, 30, b"y"), ids[4] + 1);
    drop(c);
    stop(server);
}

/// Every start preallocates spares after its current segment; the next start must
/// not leave them behind in the middle of the directory, or each restart would add
/// a set of empty segments (until compaction's bound of twice the live data).
#[test]
fn unused_spares_of_the_last_run_do_not_pile_up_over_restarts() {
    const JOBS: usize = 100;
    let tmp = TempDir::new("wal-spares");
    let config = log_config(tmp.path(), 8192, EVERY_50MS);
    let body = |i: usize| format!("{i:0200}").into_bytes();
    let mut ids = Vec::new();
    let mut counts = Vec::new();
    for round in 0..4u32 {
        let (server, addr) = start(config.clone());
        let mut c = Client::connect(addr);
        if round == 0 {
            // About 25 KB of live jobs over several segments: too much live data
            // for compaction to move on its own.
            ids = (0..JOBS).map(|i| c.put(1, 0, 60, &body(i))).collect();
        }
        for (i, &id) in ids.iter().enumerate() {
            assert_eq!(c.peek(&format!("peek {id}")), Some((id, body(i))));
        }
        drop(c);
        stop(server);
        let files = segment_files(tmp.path());
        let data = data_segments(tmp.path());
        // Each start makes its current segment and a spare; the ones the last
        // run left unused are gone, so the count settles after the first restart.
        counts.push(files.len());
        assert!(
            counts.len() < 3 || counts[counts.len() - 1] <= counts[1],
            "round {round}: {files:?} (with records: {data:?}; files per round {counts:?})"
        );
    }
}
