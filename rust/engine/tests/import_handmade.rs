//! Hand-built beanstalkd binlog files, for what beanstalkd cannot be made to write
//! on purpose: format version 5, corruption in the middle, torn records in earlier
//! files, ids out of range.

mod import_common;

use std::path::PathBuf;

use beanpole_engine::wal::import::{
    is_beanstalkd_dir, read_beanstalkd_dir, ImportError, ImportedState,
};

use import_common::*;

// ---------------------------------------------------------------------------------
// Hand-built files.

#[test]
fn version_5_is_read() {
    let mut a = Rec::new(3);
    a.delay = 5_000_000_000;
    a.deadline = 1_700_000_005_000_000_000;
    a.state = 4;
    let b = Rec::new(4);
    let mut b_buried = sized(&b, b"second");
    b_buried.state = 3;
    b_buried.counters = [1, 0, 0, 1, 0];
    let mut deleted = sized(&Rec::new(9), b"gone");
    let data = file(
        5,
        &[
            full5("v5-tube", &a, b"first"),
            full5("default", &b, b"second"),
            full5("default", &Rec::new(9), b"gone"),
            update5(&b_buried),
            {
                deleted.state = 0;
                update5(&deleted)
            },
        ],
        4096,
    );
    let r = one(data).expect("v5");
    assert_eq!(r.version, 5);
    assert_eq!(r.max_id, 9);
    assert_eq!(r.jobs.len(), 2);
    let j = &r.jobs[0];
    assert_eq!(
        (j.id, j.tube.as_slice(), j.body.as_slice()),
        (3, &b"v5-tube"[..], &b"first"[..])
    );
    assert_eq!(j.state, ImportedState::Delayed);
    assert_eq!(j.delay_ns, 5_000_000_000);
    assert_eq!(j.ttr_ns, 60_000_000_000);
    assert_eq!(j.created_at_ns, 1_700_000_000_000_000_000);
    assert_eq!(j.deadline_at_ns, 1_700_000_005_000_000_000);
    let j = &r.jobs[1];
    assert_eq!(
        (j.id, j.state, j.reserves, j.buries),
        (4, ImportedState::Buried, 1, 1)
    );
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

#[test]
fn version_5_then_version_7_files() {
    // beanstalkd 1.5+ reads an old directory and writes version 7 files after it.
    let a = Rec::new(1);
    let mut kicked = sized(&a, b"old job");
    kicked.counters = [0, 0, 0, 1, 1];
    let v5 = file(5, &[full5("t", &a, b"old job")], 0);
    let v7 = file(
        7,
        &[update7(&kicked), full7("t", &Rec::new(2), b"new job")],
        4096,
    );
    let r = replay(&[
        (PathBuf::from("binlog.1"), v5),
        (PathBuf::from("binlog.2"), v7),
    ])
    .expect("mixed");
    assert_eq!(r.version, 5);
    assert_eq!(r.jobs.len(), 2);
    assert_eq!(r.jobs[0].kicks, 1);
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
}

#[test]
fn unknown_version_is_refused() {
    match one(file(6, &[], 4096)) {
        Err(ImportError::UnsupportedVersion { version: 6, path }) => {
            assert_eq!(path, PathBuf::from("binlog.1"))
        }
        other => panic!("{other:?}"),
    }
    let err = one(file(8, &[], 16)).expect_err("version 8");
    assert!(err.to_string().contains("version 8"), "{err}");
}

#[test]
fn directories() {
    let tmp = TempDir::new("dirs");
    assert!(!is_beanstalkd_dir(&tmp.0));
    assert!(matches!(
        read_beanstalkd_dir(&tmp.0),
        Err(ImportError::NotABinlogDir { .. })
    ));
    assert!(matches!(
        read_beanstalkd_dir(&tmp.0.join("missing")),
        Err(ImportError::Io { .. })
    ));
    assert!(!is_beanstalkd_dir(&tmp.0.join("missing")));
    std::fs::write(tmp.0.join("lock"), b"").expect("write");
    std::fs::write(tmp.0.join("binlog.1.bak"), b"junk").expect("write");
    assert!(!is_beanstalkd_dir(&tmp.0));
    std::fs::write(tmp.0.join("binlog.007"), b"junk").expect("write");
    assert!(!is_beanstalkd_dir(&tmp.0));
    let rec = |id| full7("default", &Rec::new(id), b"x");
    std::fs::write(tmp.0.join("binlog.9"), file(7, &[rec(9)], 0)).expect("write");
    std::fs::write(tmp.0.join("binlog.10"), file(7, &[rec(10)], 4096)).expect("write");
    std::fs::write(tmp.0.join("binlog.12"), file(7, &[rec(12)], 4096)).expect("write");
    assert!(is_beanstalkd_dir(&tmp.0));
    let r = read_ok(&tmp.0);
    let names: Vec<_> = r
        .files
        .iter()
        .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["binlog.9", "binlog.10", "binlog.12"]);
    assert_eq!(r.jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [9, 10, 12]);
    assert_eq!(r.warnings.len(), 2, "{:?}", r.warnings);
    assert!(r.warnings.iter().any(|w| w.contains("binlog.007")));
    assert!(r
        .warnings
        .iter()
        .any(|w| w.contains("binlog.11 is missing")));
}

#[test]
fn corruption_in_the_middle_is_an_error_with_its_offset() {
    let recs: Vec<Vec<u8>> = (1..=3)
        .map(|id| full7("default", &Rec::new(id), b"body"))
        .collect();
    let second_struct = 4 + recs[0].len() + 4 + 7;
    for last in [true, false] {
        let mut data = file(7, &recs, 4096);
        data[second_struct + 76] = 9; // state 9
        let mut set = vec![(PathBuf::from("binlog.1"), data)];
        if !last {
            set.push((PathBuf::from("binlog.2"), file(7, &[], 4096)));
        }
        match replay(&set) {
            Err(ImportError::Corrupt {
                path,
                offset,
                reason,
            }) => {
                assert_eq!(path, PathBuf::from("binlog.1"));
                assert_eq!(offset as usize, second_struct);
                assert!(reason.contains("state 9"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }
    // A bad tube-name length, a bad name, a body without its CRLF, a short body size.
    let mut data = file(7, &recs, 4096);
    data[4 + recs[0].len()] = 0xC9; // length 201
    assert!(
        matches!(one(data), Err(ImportError::Corrupt { offset, .. }) if offset as usize == 4 + recs[0].len())
    );
    let mut data = file(7, &recs, 4096);
    data[4 + recs[0].len() + 4] = b' ';
    assert!(matches!(one(data), Err(ImportError::Corrupt { .. })));
    let mut data = file(7, &recs, 4096);
    data[4 + recs[0].len() - 1] = b'x';
    assert!(matches!(one(data), Err(ImportError::Corrupt { .. })));
    let mut data = file(7, &recs, 4096);
    data[4 + 4 + 7 + 32] = 1;
    assert!(matches!(one(data), Err(ImportError::Corrupt { .. })));
    // An update that disagrees with the body size of its job.
    let mut upd = sized(&Rec::new(1), b"body");
    upd.size = 99;
    upd.state = 3;
    let data = file(7, &[recs[0].clone(), update7(&upd), recs[1].clone()], 4096);
    assert!(matches!(one(data), Err(ImportError::Corrupt { .. })));
    // A full record claiming state 0.
    let mut zero = Rec::new(5);
    zero.state = 0;
    let data = file(7, &[full7("t", &zero, b"b"), recs[1].clone()], 4096);
    assert!(matches!(one(data), Err(ImportError::Corrupt { .. })));
}

/// beanstalkd counts ids up from 1, so an id of 2^63 or more is damage; beanpole's
/// log cannot hold it, and `import` once overflowed computing the id after it.
#[test]
fn a_job_id_out_of_range_is_corruption_where_it_is() {
    let first = full7("default", &Rec::new(1), b"body");
    for id in [u64::MAX, 1 << 63] {
        let data = file(
            7,
            &[first.clone(), full7("default", &Rec::new(id), b"b")],
            4096,
        );
        match one(data) {
            Err(ImportError::Corrupt { offset, reason, .. }) => {
                assert_eq!(offset as usize, 4 + first.len() + 4 + 7);
                assert!(reason.contains("out of range"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }
    let data = file(
        7,
        &[first, full7("default", &Rec::new((1 << 63) - 1), b"b")],
        4096,
    );
    assert_eq!(one(data).expect("the largest id").max_id, (1 << 63) - 1);
}

#[test]
fn torn_records_are_cut_with_a_warning_in_any_file() {
    // The two shapes a killed beanstalkd leaves, followed by zeros. beanstalkd keeps
    // files after the one it was writing (space reserved for deletes), and starts a
    // new file on restart, so the torn file is often not the last one.
    let a = full7("default", &Rec::new(1), b"kept");
    let b = full7("default", &Rec::new(2), b"lost");
    let struct_missing = {
        let mut r = a.clone();
        r.extend(&b[..4 + 7]);
        r
    };
    let body_missing = {
        let mut r = a.clone();
        r.extend(&b[..b.len() - 6]);
        r
    };
    for torn in [struct_missing, body_missing] {
        let mut data = 7i32.to_le_bytes().to_vec();
        data.extend(&torn);
        data.resize(4096, 0);
        for last in [true, false] {
            let mut set = vec![(PathBuf::from("binlog.1"), data.clone())];
            if !last {
                set.push((
                    PathBuf::from("binlog.2"),
                    file(7, &[full7("t", &Rec::new(3), b"later")], 4096),
                ));
            }
            let r = replay(&set).expect("torn tail");
            let ids: Vec<u64> = r.jobs.iter().map(|j| j.id).collect();
            assert_eq!(ids, if last { vec![1] } else { vec![1, 3] });
            assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
            assert!(r.warnings[0].contains("incomplete record"));
        }
    }
    // A file that simply ends inside a record: a warning in the last file, an error
    // in an earlier one.
    let mut data = file(7, &[a.clone(), b.clone()], 0);
    data.truncate(data.len() - 3);
    let r = one(data.clone()).expect("short last file");
    assert_eq!(r.jobs.len(), 1);
    assert_eq!(r.warnings.len(), 1);
    let set = vec![
        (PathBuf::from("binlog.1"), data),
        (PathBuf::from("binlog.2"), file(7, &[], 4096)),
    ];
    assert!(matches!(replay(&set), Err(ImportError::Corrupt { .. })));
}

#[test]
fn zero_body_copied_after_a_crash_is_dropped() {
    // Killed after the struct and before the body; beanstalkd restarted, took the
    // zeros as the body and compaction later copied the job: zeros without CRLF,
    // with more records after them.
    let mut ghost = Rec::new(7);
    ghost.size = 12;
    let mut rec = 4i32.to_le_bytes().to_vec();
    rec.extend(b"tube");
    rec.extend(ghost.v7());
    rec.extend([0u8; 12]);
    let data = file(7, &[rec, full7("t", &Rec::new(8), b"after")], 4096);
    let r = one(data).expect("dropped");
    assert_eq!(r.jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [8]);
    assert_eq!(r.max_id, 8);
    assert!(r.warnings[0].contains("body of zeros"), "{:?}", r.warnings);
}

#[test]
fn updates_deletes_copies_and_order() {
    let mk = |id, body: &[u8]| sized(&Rec::new(id), body);
    let (a, b, c) = (mk(1, b"A"), mk(2, b"B"), mk(3, b"C"));
    let bury = |r: &Rec, buries: u32| {
        let mut r = r.clone();
        r.state = 3;
        r.counters = [buries, 0, 0, buries, 0];
        r
    };
    let f1 = file(
        7,
        &[
            full7("q", &a, b"A"),
            full7("q", &b, b"B"),
            full7("q", &c, b"C"),
            update7(&bury(&b, 1)), // B buried first
            update7(&bury(&a, 1)), // then A
        ],
        0,
    );
    // Compaction copies A, then B, into a later file: neither moves in the order.
    // C is copied while reserved; its state changed, so it moves to the end.
    let mut c_reserved = c.clone();
    c_reserved.state = 2;
    c_reserved.counters = [1, 0, 0, 0, 0];
    let f2 = file(
        7,
        &[
            full7("q", &bury(&a, 1), b"A"),
            full7("q", &bury(&b, 1), b"B"),
            full7("q", &c_reserved, b"C"),
            // An update for a job whose full record is in a deleted file: ignored.
            update7(&mk(40, b"?")),
        ],
        4096,
    );
    let r = replay(&[
        (PathBuf::from("binlog.1"), f1),
        (PathBuf::from("binlog.2"), f2),
    ])
    .expect("replay");
    let order: Vec<(u64, ImportedState)> = r.jobs.iter().map(|j| (j.id, j.state)).collect();
    assert_eq!(
        order,
        [
            (2, ImportedState::Buried),
            (1, ImportedState::Buried),
            (3, ImportedState::Reserved)
        ]
    );
    assert_eq!(r.max_id, 40);
    assert_eq!(r.jobs[2].reserves, 1);

    // A full record for a known id replaces it wholesale; a delete then removes it.
    let mut del = mk(1, b"new body");
    let f = file(
        7,
        &[
            full7("q", &a, b"A"),
            full7("other", &mk(1, b"new body"), b"new body"),
            full7("q", &b, b"B"),
        ],
        4096,
    );
    let r = one(f).expect("replace");
    assert_eq!(r.jobs[0].tube, b"other");
    assert_eq!(r.jobs[0].body, b"new body");
    del.state = 0;
    let f = file(
        7,
        &[full7("q", &mk(1, b"new body"), b"new body"), update7(&del)],
        4096,
    );
    let r = one(f).expect("delete");
    assert!(r.jobs.is_empty());
    assert_eq!(r.max_id, 1);
}

#[test]
fn a_job_beanstalkd_would_refuse_is_kept_with_a_warning() {
    for size in [65533usize, 65534, 65535, 100_000] {
        let big = vec![b'z'; size];
        let data = file(
            7,
            &[
                full7("default", &Rec::new(1), &big),
                full7("default", &Rec::new(2), b"small"),
                full7("default", &Rec::new(3), b"small"),
            ],
            0,
        );
        let r = one(data).expect("big");
        assert_eq!(r.jobs.len(), 3);
        assert_eq!(r.jobs[0].body.len(), size);
        assert_eq!(r.warnings.len(), usize::from(size >= 65534), "{size}");
    }
}

#[test]
fn files_of_zeros_and_short_files() {
    let r = one(vec![0; 4096]).expect("zeros");
    assert_eq!((r.version, r.jobs.len(), r.warnings.len()), (0, 0, 1));
    let r = one(Vec::new()).expect("empty");
    assert_eq!(r.warnings.len(), 1);
    let r = one(vec![7, 0]).expect("short last file");
    assert_eq!(r.warnings.len(), 1);
    let set = vec![
        (PathBuf::from("binlog.1"), vec![7, 0]),
        (PathBuf::from("binlog.2"), file(7, &[], 4096)),
    ];
    assert!(matches!(
        replay(&set),
        Err(ImportError::Corrupt { offset: 0, .. })
    ));
}
