//! The beanstalkd binlog reader (`wal::import`), split over four test files:
//!
//! * Committed directories under `tests/data/beanstalkd-binlog/`, written by the real
//!   beanstalkd through `tests/data/make_beanstalkd_binlogs.py`, are compared with the
//!   `expected.json` the generator wrote next to them (this file). These run everywhere.
//! * Damaged copies of those files (every truncation, random byte flips, arbitrary
//!   bytes) must give `Ok` or `Err`, never a panic (`import_damaged.rs`).
//! * Hand-built files cover what beanstalkd cannot be made to write on purpose:
//!   format version 5, corruption in the middle, torn records in earlier files
//!   (`import_handmade.rs`).
//! * When beanstalkd is installed (`BEANSTALKD` or `beanstalkd` on `PATH`), fresh
//!   directories are generated and read back; otherwise those tests say so and pass
//!   (`import_live.rs`).

mod import_common;

use std::collections::{HashMap, HashSet};
use std::path::Path;

use beanpole_engine::wal::import::{
    is_beanstalkd_dir, read_beanstalkd_dir, ImportReport, ImportedJob, ImportedState,
};

use import_common::*;

// ---------------------------------------------------------------------------------
// The committed directories.

/// Compares what the reader makes of `dir` with `expected.json`.
fn check_case(dir: &Path, exp: &Json) -> Result<ImportReport, String> {
    let report = read_beanstalkd_dir(dir).map_err(|e| e.to_string())?;
    let case = exp.get("case").str().to_owned();
    let mut errors = Vec::new();
    if i128::from(report.version) != exp.get("version").int() {
        errors.push(format!("version {}", report.version));
    }
    let names: Vec<String> = report
        .files
        .iter()
        .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
        .collect();
    let want_names: Vec<&str> = exp.get("files").arr().iter().map(Json::str).collect();
    if names != want_names {
        errors.push(format!("files {names:?}, expected {want_names:?}"));
    }
    let max_id = i128::from(report.max_id);
    if max_id < exp.get("max_id_min").int() || max_id > exp.get("max_id_max").int() {
        errors.push(format!("max_id {max_id}"));
    }

    let got: HashMap<u64, &ImportedJob> = report.jobs.iter().map(|j| (j.id, j)).collect();
    let mut expected_ids = HashSet::new();
    for want in exp.get("jobs").arr() {
        let id = want.get("id").int() as u64;
        expected_ids.insert(id);
        let Some(job) = got.get(&id) else {
            errors.push(format!("job {id} missing"));
            continue;
        };
        let mut diff = |field: &str, got: String, want: String| {
            if got != want {
                errors.push(format!("job {id}: {field} is {got}, expected {want}"));
            }
        };
        diff(
            "tube",
            String::from_utf8_lossy(&job.tube).into_owned(),
            want.get("tube").str().to_owned(),
        );
        diff(
            "pri",
            job.pri.to_string(),
            want.get("pri").int().to_string(),
        );
        diff(
            "state",
            state_name(job.state).into(),
            want.get("state").str().into(),
        );
        diff(
            "delay_ns",
            job.delay_ns.to_string(),
            want.get("delay_ns").int().to_string(),
        );
        diff(
            "ttr_ns",
            job.ttr_ns.to_string(),
            want.get("ttr_ns").int().to_string(),
        );
        for (name, value) in [
            ("reserves", job.reserves),
            ("timeouts", job.timeouts),
            ("releases", job.releases),
            ("buries", job.buries),
            ("kicks", job.kicks),
        ] {
            diff(name, value.to_string(), want.get(name).int().to_string());
        }
        diff(
            "body length",
            job.body.len().to_string(),
            want.get("body_len").int().to_string(),
        );
        diff(
            "body hash",
            fnv1a64(&job.body),
            want.get("body_fnv1a64").str().into(),
        );
        if !want.get("body_hex").is_null() {
            diff("body", hex(&job.body), want.get("body_hex").str().into());
        }
        let created = i128::from(job.created_at_ns);
        if created < want.get("created_at_min_ns").int()
            || created > want.get("created_at_max_ns").int()
        {
            errors.push(format!(
                "job {id}: created_at {created} outside the put's window"
            ));
        }
        if !want.get("deadline_at_min_ns").is_null() {
            let deadline = i128::from(job.deadline_at_ns);
            if deadline < want.get("deadline_at_min_ns").int()
                || deadline > want.get("deadline_at_max_ns").int()
            {
                errors.push(format!("job {id}: deadline {deadline} outside its window"));
            }
        }
    }

    let optional: HashSet<u64> = exp
        .get("optional_ids")
        .arr()
        .iter()
        .map(|v| v.int() as u64)
        .collect();
    let unacked: HashSet<&str> = exp
        .get("unacked_put_bodies_fnv1a64")
        .arr()
        .iter()
        .map(Json::str)
        .collect();
    let deleted: HashSet<u64> = exp
        .get("deleted_ids")
        .arr()
        .iter()
        .map(|v| v.int() as u64)
        .collect();
    for job in &report.jobs {
        if expected_ids.contains(&job.id) || optional.contains(&job.id) {
            continue;
        }
        if deleted.contains(&job.id) {
            errors.push(format!("job {} was deleted but is back", job.id));
        } else if !unacked.contains(fnv1a64(&job.body).as_str()) {
            errors.push(format!("unexpected job {}", job.id));
        }
    }

    let want_buried: Vec<u64> = exp
        .get("buried_order")
        .arr()
        .iter()
        .map(|v| v.int() as u64)
        .collect();
    let got_buried: Vec<u64> = report
        .jobs
        .iter()
        .filter(|j| j.state == ImportedState::Buried && !optional.contains(&j.id))
        .map(|j| j.id)
        .collect();
    if got_buried != want_buried {
        errors.push(format!(
            "bury order {got_buried:?}, expected {want_buried:?}"
        ));
    }

    let torn = !exp.get("torn").is_null();
    if case == "max-size" {
        let ok = report.warnings.len() == 1
            && report.warnings[0].contains("job 1 ")
            && report.warnings[0].contains("65535-byte");
        if !ok {
            errors.push(format!("warnings {:?}", report.warnings));
        }
    } else if torn {
        let ok = !report.warnings.is_empty()
            && report.warnings.iter().all(|w| {
                w.contains("incomplete record")
                    || w.contains("body of zeros")
                    || w.contains("never written")
            });
        if !ok {
            errors.push(format!("warnings {:?}", report.warnings));
        }
    } else if !report.warnings.is_empty() {
        errors.push(format!("warnings {:?}", report.warnings));
    }

    if errors.is_empty() {
        Ok(report)
    } else {
        Err(format!("{case}:\n  {}", errors.join("\n  ")))
    }
}

fn committed(case: &str) -> ImportReport {
    let dir = data_dir().join(case);
    let text = std::fs::read_to_string(dir.join("expected.json")).expect("expected.json");
    let exp = Json::parse(&text);
    match check_case(&dir, &exp) {
        Ok(report) => report,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn committed_states() {
    let r = committed("states");
    // Spot checks that do not depend on the generator: the job reserved when the
    // server stopped reads back as its last journaled state, ready.
    let held = r
        .jobs
        .iter()
        .find(|j| j.body == b"reserved when the server stopped")
        .expect("held job");
    assert_eq!(held.state, ImportedState::Ready);
    assert_eq!(held.reserves, 0);
    let odd = r
        .jobs
        .iter()
        .find(|j| j.tube == b"t$()+;./_-")
        .expect("odd tube");
    assert_eq!(odd.pri, 0);
    let long = r
        .jobs
        .iter()
        .find(|j| j.tube.len() == 200)
        .expect("long tube");
    assert_eq!(long.body, b"in a 200-byte tube name");
    // release with delay 0 is not journaled: the put's priority is what is on disk.
    let rel = r
        .jobs
        .iter()
        .find(|j| j.body == b"released with a new priority, no delay")
        .expect("released job");
    assert_eq!(
        (rel.pri, rel.releases, rel.state),
        (60, 0, ImportedState::Ready)
    );
    let rel = r
        .jobs
        .iter()
        .find(|j| j.body == b"released with a new priority and a delay")
        .expect("released job");
    assert_eq!(
        (rel.pri, rel.releases, rel.state),
        (51, 1, ImportedState::Delayed)
    );
    assert_eq!(rel.delay_ns, 1800 * 1_000_000_000);
    assert!(rel.deadline_at_ns > rel.created_at_ns + 1799 * 1_000_000_000);
}

#[test]
fn committed_max_size() {
    let r = committed("max-size");
    assert_eq!(r.jobs.len(), 3);
    assert_eq!(r.jobs[0].body.len(), 65535);
    assert_eq!(r.jobs[1].body, b"small after the big one");
    assert_eq!(r.jobs[2].state, ImportedState::Delayed);
}

#[test]
fn committed_binary() {
    let r = committed("binary");
    let bodies: Vec<&[u8]> = r.jobs.iter().map(|j| j.body.as_slice()).collect();
    assert!(bodies.contains(&&b""[..]));
    assert!(bodies.contains(&&b"a\r\nb"[..]));
    assert!(bodies.contains(&&b"\r\n\r\n"[..]));
    assert!(bodies.iter().any(|b| b.len() == 256));
}

#[test]
fn committed_multi_file() {
    let r = committed("multi-file");
    assert!(r.files.len() > 3);
}

#[test]
fn committed_compaction() {
    let r = committed("compaction");
    // Only a compaction copy records a reserved job as reserved.
    assert!(r.jobs.iter().any(|j| j.state == ImportedState::Reserved));
}

#[test]
fn committed_burst_kill() {
    committed("burst-kill");
}

#[test]
fn committed_restart() {
    committed("restart");
}

#[test]
fn committed_deleted() {
    let r = committed("deleted");
    assert!(r.jobs.is_empty());
    assert_eq!(r.max_id, 3);
}

#[test]
fn committed_fresh() {
    let r = committed("fresh");
    assert!(r.jobs.is_empty());
    assert_eq!((r.version, r.max_id), (7, 0));
}

#[test]
fn every_committed_case_is_tested() {
    let mut found: Vec<String> = std::fs::read_dir(data_dir())
        .expect("tests/data/beanstalkd-binlog")
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    let mut known: Vec<String> = CASES.iter().map(|s| s.to_string()).collect();
    known.sort();
    assert_eq!(found, known);
    for case in CASES {
        assert!(is_beanstalkd_dir(&data_dir().join(case)), "{case}");
    }
}
