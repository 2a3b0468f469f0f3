//! The beanstalkd binlog reader and `beanpole binlog import` on damaged copies of
//! the committed beanstalkd directories (tests/data/beanstalkd-binlog): bits
//! flipped, bytes overwritten or spliced in, files cut anywhere, length, size and
//! id fields set to absurd values, records duplicated or dropped, version words
//! changed, files removed. The reader must return its report or a typed error,
//! never panic or allocate by a field's value; a cut record at the end of the data
//! is dropped with exactly the records before it kept; and whatever it returns,
//! import must write a log that beanpole recovers to exactly those jobs.
//!
//! The properties run a few dozen cases each; `PROPTEST_CASES=N` runs more.

mod bad_input;
mod import_common;
mod wal_util;

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::OnceLock;

use bad_input::{config, largest_allocation, mutation, write_files, Image};
use beanpole_engine::wal::format::ID_LIMIT;
use beanpole_engine::wal::fs::FsDir;
use beanpole_engine::wal::import::{read_beanstalkd_dir, ImportError, ImportReport};
use beanpole_engine::wal::recover::recover;
use beanpole_engine::wal::tools;
use import_common::{data_dir, CASES};
use proptest::prelude::*;
use proptest::sample::Index;
use wal_util::TempDir;

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Where the records of a version 7 file are: the name length, the name, the
/// 80-byte job struct, and for a full record the body (its size in the struct).
fn records_v7(bytes: &[u8]) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut at = 4;
    while let Some(name_len) = u32_at(bytes, at) {
        let name_len = name_len as usize;
        let job = at + 4 + name_len;
        let id = bytes
            .get(job..job + 8)
            .map_or(0, |b| b.iter().fold(0, |a, &x| a | x));
        if name_len > 200 || id == 0 {
            break;
        }
        let Some(size) = u32_at(bytes, job + 32) else {
            break;
        };
        let end = job + 80 + if name_len > 0 { size as usize } else { 0 };
        if end > bytes.len() {
            break;
        }
        out.push(at..end);
        at = end;
    }
    out
}

/// Each committed directory's files, in replay order.
fn committed() -> &'static [(&'static str, Vec<Image>)] {
    static DIRS: OnceLock<Vec<(&str, Vec<Image>)>> = OnceLock::new();
    DIRS.get_or_init(|| {
        CASES
            .iter()
            // "fresh" holds only a version word: nothing to damage.
            .filter(|&&case| case != "fresh")
            .map(|&case| {
                let dir = data_dir().join(case);
                let mut files: Vec<(u64, Image)> = std::fs::read_dir(&dir)
                    .expect("read dir")
                    .map(|e| e.expect("entry"))
                    .filter_map(|e| {
                        let name = e.file_name().to_string_lossy().into_owned();
                        let n = name.strip_prefix("binlog.")?.parse().ok()?;
                        let bytes = std::fs::read(e.path()).expect("read");
                        let records = records_v7(&bytes);
                        Some((
                            n,
                            Image {
                                name,
                                bytes,
                                records,
                            },
                        ))
                    })
                    .collect();
                files.sort_by_key(|(n, _)| *n);
                (case, files.into_iter().map(|(_, f)| f).collect())
            })
            .collect()
    })
}

fn no_seal(_: &mut [u8]) {}

/// The start of the record part (name length, name, struct, body) that `at` is in.
fn part_start(img: &Image, at: usize) -> usize {
    let Some(r) = img.records.iter().find(|r| r.contains(&at)) else {
        return at;
    };
    let name_len = u32_at(&img.bytes, r.start).unwrap_or(0) as usize;
    let parts = [
        r.start,
        r.start + 4,
        r.start + 4 + name_len,
        r.start + 84 + name_len,
    ];
    parts
        .into_iter()
        .filter(|&p| p <= at)
        .max()
        .unwrap_or(r.start)
}

fn allowed(files: &[Image]) -> usize {
    let total: usize = files.iter().map(|f| f.bytes.len()).sum();
    4 * total + (1 << 20)
}

/// Jobs by id: (tube, state, body).
fn summary(report: &ImportReport) -> BTreeMap<u64, (Vec<u8>, &'static str, Vec<u8>)> {
    report
        .jobs
        .iter()
        .map(|j| (j.id, (j.tube.clone(), j.state.as_str(), j.body.clone())))
        .collect()
}

/// Read `files` as a directory, check the outcome, and import it; returns the
/// report when the reader accepted the files.
fn read_and_import(files: &[Image]) -> Option<ImportReport> {
    let tmp = TempDir::new("import-bad-input");
    let src = tmp.sub("src");
    std::fs::create_dir_all(&src).expect("mkdir");
    write_files(&src, files);
    let (read, peak) = largest_allocation(|| read_beanstalkd_dir(&src));
    assert!(
        peak <= allowed(files),
        "the reader allocated {peak} bytes at once"
    );
    let dst = tmp.sub("dst");
    let (imported, peak) = largest_allocation(|| tools::import(&src, &dst, 8192));
    assert!(
        peak <= allowed(files),
        "import allocated {peak} bytes at once"
    );
    let report = match read {
        Ok(report) => report,
        Err(ImportError::Corrupt { path, offset, .. }) => {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            let file = files.iter().find(|f| Some(&f.name) == name.as_ref());
            let file = file.expect("the corrupt file is one of the directory's");
            assert!(offset <= file.bytes.len() as u64);
            assert!(imported.is_err(), "import went on after a read error");
            return None;
        }
        Err(ImportError::UnsupportedVersion { .. } | ImportError::NotABinlogDir { .. }) => {
            assert!(imported.is_err(), "import went on after a read error");
            return None;
        }
        Err(e) => panic!("{e}"),
    };
    let (written, _) = imported.expect("import of a directory the reader accepted");
    assert_eq!(written, report.jobs.len());
    let rec = recover(&FsDir::new(&dst), false).expect("recovery of an imported log");
    assert!(rec.warnings.is_empty(), "{:?}", rec.warnings);
    let mut ids: Vec<u64> = report.jobs.iter().map(|j| j.id).collect();
    ids.sort_unstable();
    let mut got: Vec<u64> = rec.jobs.iter().map(|j| j.fields.id).collect();
    got.sort_unstable();
    assert_eq!(got, ids);
    assert!(rec.next_id > report.max_id);
    for j in &report.jobs {
        assert!(j.id < ID_LIMIT);
    }
    Some(report)
}

proptest! {
    #![proptest_config(config(48))]

    #[test]
    fn any_damage_gives_a_report_or_a_typed_error(
        case in any::<Index>(),
        mutations in proptest::collection::vec(mutation(), 1..4),
    ) {
        let (_, files) = &committed()[case.index(committed().len())];
        let mut files = files.clone();
        for m in &mutations {
            m.apply(&mut files, 4, no_seal);
        }
        read_and_import(&files);
    }

    #[test]
    fn a_cut_record_keeps_exactly_the_records_before_it(
        case in any::<Index>(),
        at in any::<Index>(),
        zero_fill in any::<bool>(),
    ) {
        let (_, files) = &committed()[case.index(committed().len())];
        let mut files = files.clone();
        let Some(f) = files.iter().rposition(|f| !f.records.is_empty()) else {
            return Ok(());
        };
        let img = files[f].clone();
        let end = img.records.last().map_or(4, |r| r.end);
        let mut cut = 4 + at.index(end - 4 + 1);
        if zero_fill {
            // Zeros stand for parts never written: each part of a record is one
            // write. (Zeros inside a part can read as a value; see the reader.)
            cut = part_start(&img, cut);
        }
        let kept = img
            .records
            .iter()
            .take_while(|r| {
                r.end <= cut || (zero_fill && img.bytes[cut..r.end].iter().all(|&b| b == 0))
            })
            .count();
        let boundary = img.records.get(kept).map_or(end, |r| r.start);
        let mut clean = files.clone();
        clean[f].bytes[boundary..].fill(0);
        if zero_fill {
            files[f].bytes[cut..].fill(0);
        } else {
            files[f].bytes.truncate(cut);
        }
        let want = read_and_import(&clean).expect("a cut at a record boundary reads");
        match read_and_import(&files) {
            Some(got) => prop_assert_eq!(summary(&got), summary(&want)),
            // Outside the last file only whole parts may be missing (each part
            // of a record is one write); a part cut inside is corruption there.
            None => prop_assert!(f + 1 < files.len(), "a cut in the last file was refused"),
        }
    }
}

#[test]
fn the_committed_directories_import_whole() {
    for (case, files) in committed() {
        assert!(
            read_and_import(files).is_some(),
            "{case}: the reader refused it"
        );
        let records: usize = files.iter().map(|f| f.records.len()).sum();
        assert!(records > 0, "{case}: no record found");
    }
}
