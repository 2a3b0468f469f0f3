//! The beanstalkd binlog reader (`wal::import`).
//!
//! * Committed directories under `tests/data/beanstalkd-binlog/`, written by the real
//!   beanstalkd through `tests/data/make_beanstalkd_binlogs.py`, are compared with the
//!   `expected.json` the generator wrote next to them. These run everywhere.
//! * Damaged copies of those files (every truncation, random byte flips, arbitrary
//!   bytes) must give `Ok` or `Err`, never a panic.
//! * Hand-built files cover what beanstalkd cannot be made to write on purpose:
//!   format version 5, corruption in the middle, torn records in earlier files.
//! * When beanstalkd is installed (`BEANSTALKD` or `beanstalkd` on `PATH`), fresh
//!   directories are generated and read back; otherwise those tests say so and pass.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use beanpole_engine::wal::import::{
    is_beanstalkd_dir, read_beanstalkd_dir, replay_beanstalkd_files, ImportError, ImportReport,
    ImportedJob, ImportedState,
};

// ---------------------------------------------------------------------------------
// A small JSON reader for expected.json (integers are kept exact).

#[derive(Debug, Clone, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Int(i128),
    Str(String),
    Arr(Vec<Json>),
    Obj(BTreeMap<String, Json>),
}

impl Json {
    fn parse(text: &str) -> Json {
        let mut p = JsonParser {
            s: text.as_bytes(),
            i: 0,
        };
        let v = p.value();
        p.ws();
        assert_eq!(p.i, p.s.len(), "trailing data in JSON");
        v
    }

    fn get(&self, key: &str) -> &Json {
        match self {
            Json::Obj(m) => m.get(key).unwrap_or(&Json::Null),
            _ => panic!("not an object looking up {key}"),
        }
    }

    fn int(&self) -> i128 {
        match self {
            Json::Int(n) => *n,
            other => panic!("not an integer: {other:?}"),
        }
    }

    fn str(&self) -> &str {
        match self {
            Json::Str(s) => s,
            other => panic!("not a string: {other:?}"),
        }
    }

    fn arr(&self) -> &[Json] {
        match self {
            Json::Arr(a) => a,
            other => panic!("not an array: {other:?}"),
        }
    }

    fn is_null(&self) -> bool {
        *self == Json::Null
    }
}

struct JsonParser<'a> {
    s: &'a [u8],
    i: usize,
}

impl JsonParser<'_> {
    fn peek(&self) -> u8 {
        self.s.get(self.i).copied().unwrap_or(0)
    }

    fn ws(&mut self) {
        while matches!(self.peek(), b' ' | b'\n' | b'\r' | b'\t') {
            self.i += 1;
        }
    }

    fn lit(&mut self, word: &str, v: Json) -> Json {
        assert!(
            self.s[self.i..].starts_with(word.as_bytes()),
            "bad JSON literal"
        );
        self.i += word.len();
        v
    }

    fn value(&mut self) -> Json {
        self.ws();
        match self.peek() {
            b'{' => {
                self.i += 1;
                let mut m = BTreeMap::new();
                loop {
                    self.ws();
                    if self.peek() == b'}' {
                        self.i += 1;
                        break;
                    }
                    let Json::Str(k) = self.value() else {
                        panic!("JSON key is not a string")
                    };
                    self.ws();
                    assert_eq!(self.peek(), b':');
                    self.i += 1;
                    let v = self.value();
                    m.insert(k, v);
                    self.ws();
                    if self.peek() == b',' {
                        self.i += 1;
                    }
                }
                Json::Obj(m)
            }
            b'[' => {
                self.i += 1;
                let mut a = Vec::new();
                loop {
                    self.ws();
                    if self.peek() == b']' {
                        self.i += 1;
                        break;
                    }
                    a.push(self.value());
                    self.ws();
                    if self.peek() == b',' {
                        self.i += 1;
                    }
                }
                Json::Arr(a)
            }
            b'"' => {
                self.i += 1;
                let mut out = String::new();
                loop {
                    let c = self.peek();
                    self.i += 1;
                    match c {
                        b'"' => break,
                        b'\\' => {
                            let e = self.peek();
                            self.i += 1;
                            match e {
                                b'n' => out.push('\n'),
                                b'r' => out.push('\r'),
                                b't' => out.push('\t'),
                                b'b' => out.push('\u{8}'),
                                b'f' => out.push('\u{c}'),
                                b'u' => {
                                    let hex = std::str::from_utf8(&self.s[self.i..self.i + 4])
                                        .expect("hex");
                                    self.i += 4;
                                    let mut cp = u32::from_str_radix(hex, 16).expect("hex");
                                    if (0xD800..0xDC00).contains(&cp) {
                                        let lo =
                                            std::str::from_utf8(&self.s[self.i + 2..self.i + 6])
                                                .expect("hex");
                                        self.i += 6;
                                        let lo = u32::from_str_radix(lo, 16).expect("hex");
                                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                                    }
                                    out.push(char::from_u32(cp).expect("code point"));
                                }
                                other => out.push(other as char),
                            }
                        }
                        0 => panic!("unterminated JSON string"),
                        _ => {
                            // Multi-byte UTF-8 passes through byte by byte.
                            let start = self.i - 1;
                            let mut end = self.i;
                            while end < self.s.len() && (self.s[end] & 0xC0) == 0x80 {
                                end += 1;
                            }
                            out.push_str(std::str::from_utf8(&self.s[start..end]).expect("utf-8"));
                            self.i = end;
                        }
                    }
                }
                Json::Str(out)
            }
            b't' => self.lit("true", Json::Bool(true)),
            b'f' => self.lit("false", Json::Bool(false)),
            b'n' => self.lit("null", Json::Null),
            _ => {
                let start = self.i;
                while matches!(self.peek(), b'-' | b'0'..=b'9') {
                    self.i += 1;
                }
                let text = std::str::from_utf8(&self.s[start..self.i]).expect("number");
                Json::Int(text.parse().expect("JSON integer"))
            }
        }
    }
}

// ---------------------------------------------------------------------------------
// Helpers.

fn fnv1a64(data: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

fn state_name(s: ImportedState) -> &'static str {
    s.as_str()
}

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/beanstalkd-binlog")
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_nanos() as i64
}

fn read_ok(dir: &Path) -> ImportReport {
    match read_beanstalkd_dir(dir) {
        Ok(r) => r,
        Err(e) => panic!("{}: {e}", dir.display()),
    }
}

/// The binlog files of a directory, in replay order, with their bytes.
fn load_files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .expect("read_dir")
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let n = name.strip_prefix("binlog.")?.parse().ok()?;
            Some((n, e.path()))
        })
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|(_, p)| {
            let data = std::fs::read(&p).expect("read");
            (p, data)
        })
        .collect()
}

fn replay(files: &[(PathBuf, Vec<u8>)]) -> Result<ImportReport, ImportError> {
    let refs: Vec<(&Path, &[u8])> = files
        .iter()
        .map(|(p, d)| (p.as_path(), d.as_slice()))
        .collect();
    replay_beanstalkd_files(&refs)
}

// ---------------------------------------------------------------------------------
// The committed directories.

const CASES: &[&str] = &[
    "states",
    "max-size",
    "binary",
    "multi-file",
    "compaction",
    "burst-kill",
    "restart",
    "deleted",
    "fresh",
];

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

// ---------------------------------------------------------------------------------
// Hand-built files.

#[derive(Debug, Clone)]
struct Rec {
    id: u64,
    pri: u32,
    delay: i64,
    ttr: i64,
    size: i32,
    created: i64,
    deadline: i64,
    counters: [u32; 5],
    state: u8,
}

impl Rec {
    fn new(id: u64) -> Rec {
        Rec {
            id,
            pri: 1024,
            delay: 0,
            ttr: 60_000_000_000,
            size: 2,
            created: 1_700_000_000_000_000_000,
            deadline: 0,
            counters: [0; 5],
            state: 1,
        }
    }

    /// The 80-byte struct of version 7, padding filled with junk as memory may be.
    fn v7(&self) -> Vec<u8> {
        let mut b = vec![0xAAu8; 80];
        b[0..8].copy_from_slice(&self.id.to_le_bytes());
        b[8..12].copy_from_slice(&self.pri.to_le_bytes());
        b[16..24].copy_from_slice(&self.delay.to_le_bytes());
        b[24..32].copy_from_slice(&self.ttr.to_le_bytes());
        b[32..36].copy_from_slice(&self.size.to_le_bytes());
        b[40..48].copy_from_slice(&self.created.to_le_bytes());
        b[48..56].copy_from_slice(&self.deadline.to_le_bytes());
        for (i, c) in self.counters.iter().enumerate() {
            b[56 + 4 * i..60 + 4 * i].copy_from_slice(&c.to_le_bytes());
        }
        b[76] = self.state;
        b
    }

    /// The 77-byte struct of version 5: times in microseconds.
    fn v5(&self) -> Vec<u8> {
        let mut b = self.v7();
        for at in [16, 24, 40, 48] {
            let ns = i64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
            b[at..at + 8].copy_from_slice(&(ns / 1000).to_le_bytes());
        }
        b.truncate(77);
        b
    }
}

fn full7(tube: &str, rec: &Rec, body: &[u8]) -> Vec<u8> {
    let mut rec = rec.clone();
    rec.size = body.len() as i32 + 2;
    let mut out = (tube.len() as i32).to_le_bytes().to_vec();
    out.extend(tube.as_bytes());
    out.extend(rec.v7());
    out.extend(body);
    out.extend(b"\r\n");
    out
}

fn update7(rec: &Rec) -> Vec<u8> {
    let mut out = 0i32.to_le_bytes().to_vec();
    out.extend(rec.v7());
    out
}

fn full5(tube: &str, rec: &Rec, body: &[u8]) -> Vec<u8> {
    let mut rec = rec.clone();
    rec.size = body.len() as i32 + 2;
    let mut out = (tube.len() as u64).to_le_bytes().to_vec();
    out.extend(tube.as_bytes());
    out.extend(rec.v5());
    out.extend(body);
    out.extend(b"\r\n");
    out
}

fn update5(rec: &Rec) -> Vec<u8> {
    let mut out = 0u64.to_le_bytes().to_vec();
    out.extend(rec.v5());
    out
}

/// A file: version, records, then zeros up to `pad_to` bytes.
fn file(version: i32, records: &[Vec<u8>], pad_to: usize) -> Vec<u8> {
    let mut out = version.to_le_bytes().to_vec();
    for r in records {
        out.extend(r);
    }
    if out.len() < pad_to {
        out.resize(pad_to, 0);
    }
    out
}

fn one(data: Vec<u8>) -> Result<ImportReport, ImportError> {
    replay(&[(PathBuf::from("binlog.1"), data)])
}

fn sized(rec: &Rec, body: &[u8]) -> Rec {
    let mut r = rec.clone();
    r.size = body.len() as i32 + 2;
    r
}

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

// ---------------------------------------------------------------------------------
// Fresh directories from the real beanstalkd, when it is installed.

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let p =
            std::env::temp_dir().join(format!("beanpole-import-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("mkdir");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn beanstalkd() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("BEANSTALKD") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("beanstalkd"))
        .find(|p| p.is_file())
}

macro_rules! need_beanstalkd {
    () => {
        match beanstalkd() {
            Some(exe) => exe,
            None => {
                eprintln!("skipped: beanstalkd is not installed (apt-get install beanstalkd)");
                return;
            }
        }
    };
}

struct Beanstalkd {
    child: Child,
    port: u16,
}

impl Beanstalkd {
    /// Starts beanstalkd on a listening socket bound here first (socket activation),
    /// so there is no port race and nothing to wait for.
    fn start(exe: &Path, dir: &Path, args: &[&str]) -> Beanstalkd {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        let script = "exec 3<&0 0</dev/null; LISTEN_PID=$$ LISTEN_FDS=1 exec \"$@\"";
        let child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg("sh")
            .arg(exe)
            .arg("-b")
            .arg(dir)
            .args(args)
            .stdin(Stdio::from(OwnedFd::from(listener)))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn beanstalkd");
        Beanstalkd { child, port }
    }

    fn client(&self) -> Client {
        Client::connect(self.port)
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Beanstalkd {
    fn drop(&mut self) {
        self.kill();
    }
}

struct Client {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Client {
    fn connect(port: u16) -> Client {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_nodelay(true).expect("nodelay");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        Client {
            r: BufReader::new(s.try_clone().expect("clone")),
            w: s,
        }
    }

    fn line(&mut self) -> std::io::Result<String> {
        let mut l = String::new();
        self.r.read_line(&mut l)?;
        if !l.ends_with("\r\n") {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        l.truncate(l.len() - 2);
        Ok(l)
    }

    /// Sends a command and returns the reply line, reading (and returning) a body.
    fn cmd(&mut self, line: &str, body: Option<&[u8]>) -> (String, Vec<u8>) {
        let mut out = line.as_bytes().to_vec();
        out.extend(b"\r\n");
        if let Some(b) = body {
            out.extend(b);
            out.extend(b"\r\n");
        }
        self.w.write_all(&out).expect("send");
        let reply = self.line().expect("reply");
        let word = reply.split(' ').next().unwrap_or("");
        let mut payload = Vec::new();
        if matches!(word, "OK" | "RESERVED" | "FOUND") {
            let n: usize = reply
                .rsplit(' ')
                .next()
                .and_then(|n| n.parse().ok())
                .expect("size");
            payload = vec![0; n + 2];
            self.r.read_exact(&mut payload).expect("body");
            payload.truncate(n);
        }
        (reply, payload)
    }

    fn ok(&mut self, line: &str, want: &str) {
        let (reply, _) = self.cmd(line, None);
        assert_eq!(reply, want, "{line}");
    }

    fn put(&mut self, pri: u32, delay: u32, ttr: u32, body: &[u8]) -> u64 {
        let (reply, _) = self.cmd(
            &format!("put {pri} {delay} {ttr} {}", body.len()),
            Some(body),
        );
        reply
            .strip_prefix("INSERTED ")
            .and_then(|id| id.parse().ok())
            .unwrap_or_else(|| panic!("put: {reply}"))
    }

    fn stats_job(&mut self, id: u64) -> HashMap<String, String> {
        let (reply, body) = self.cmd(&format!("stats-job {id}"), None);
        assert!(reply.starts_with("OK"), "stats-job {id}: {reply}");
        String::from_utf8_lossy(&body)
            .lines()
            .filter_map(|l| l.split_once(": "))
            .map(|(k, v)| (k.to_owned(), v.trim_matches('"').to_owned()))
            .collect()
    }
}

/// What the test expects on disk for one job: its last journaled struct.
#[derive(Debug, Clone, PartialEq)]
struct Snap {
    tube: String,
    body: Vec<u8>,
    pri: u32,
    state: String,
    counters: [u32; 5],
}

fn snap(c: &mut Client, id: u64, body: &[u8]) -> Snap {
    let s = c.stats_job(id);
    let n = |k: &str| s[k].parse::<u32>().expect("number");
    Snap {
        tube: s["tube"].clone(),
        body: body.to_vec(),
        pri: n("pri"),
        state: s["state"].clone(),
        counters: [
            n("reserves"),
            n("timeouts"),
            n("releases"),
            n("buries"),
            n("kicks"),
        ],
    }
}

fn snap_of(j: &ImportedJob) -> Snap {
    Snap {
        tube: String::from_utf8_lossy(&j.tube).into_owned(),
        body: j.body.clone(),
        pri: j.pri,
        state: j.state.as_str().to_owned(),
        counters: [j.reserves, j.timeouts, j.releases, j.buries, j.kicks],
    }
}

#[test]
fn live_jobs_in_every_state_over_many_files() {
    let exe = need_beanstalkd!();
    let tmp = TempDir::new("live-states");
    let mut srv = Beanstalkd::start(&exe, &tmp.0, &["-f", "0", "-s", "2048"]);
    let (mut p, mut w) = (srv.client(), srv.client());
    let mut disk: BTreeMap<u64, Snap> = BTreeMap::new();
    let mut bury_order = Vec::new();
    let t0 = now_ns();

    let tubes = ["default", "t$()+;./_-", "a(b)c", "x.y_z-1"];
    let mut ids = Vec::new();
    for (i, tube) in tubes.iter().cycle().take(20).enumerate() {
        p.ok(&format!("use {tube}"), &format!("USING {tube}"));
        let mut body = format!("job {i}\r\n\0").into_bytes();
        body.extend(std::iter::repeat_n(i as u8, i * 13));
        let delay = if i % 5 == 4 { 3600 } else { 0 };
        let id = p.put(i as u32 * 3, delay, 60, &body);
        disk.insert(id, snap(&mut p, id, &body));
        ids.push((id, body));
    }
    // The maximum size, then two small ones: beanstalkd's own replay loses all three.
    p.ok("use big", "USING big");
    for body in [
        vec![b'M'; 65535],
        b"after big".to_vec(),
        b"after big 2".to_vec(),
    ] {
        let id = p.put(7, 0, 60, &body);
        disk.insert(id, snap(&mut p, id, &body));
        ids.push((id, body));
    }
    // Bury three in an order unlike their ids.
    for k in [6, 2, 9] {
        let (id, body) = &ids[k];
        w.ok(
            &format!("reserve-job {id}"),
            &format!("RESERVED {id} {}", body.len()),
        );
        w.ok(&format!("bury {id} {}", 100 + k), "BURIED");
        disk.insert(*id, snap(&mut p, *id, body));
        bury_order.push(*id);
    }
    // Release with a new priority and a delay; delete some; kick one.
    let (id, body) = &ids[0];
    w.ok(
        &format!("reserve-job {id}"),
        &format!("RESERVED {id} {}", body.len()),
    );
    w.ok(&format!("release {id} 77 900"), "RELEASED");
    disk.insert(*id, snap(&mut p, *id, body));
    for k in [1, 3, 10] {
        let id = ids[k].0;
        p.ok(&format!("delete {id}"), "DELETED");
        disk.remove(&id);
    }
    let (id, body) = &ids[2];
    p.ok(&format!("kick-job {id}"), "KICKED");
    disk.insert(*id, snap(&mut p, *id, body));
    bury_order.retain(|x| x != id);
    // Held at the kill: not journaled, so its last record (the put) stands.
    let (id, body) = &ids[5];
    w.ok(
        &format!("reserve-job {id}"),
        &format!("RESERVED {id} {}", body.len()),
    );
    srv.kill();

    let r = read_ok(&tmp.0);
    assert!(r.files.len() > 3, "{:?}", r.files);
    let max = ids.iter().map(|(id, _)| *id).max().expect("ids");
    assert_eq!(r.max_id, max);
    let got: BTreeMap<u64, Snap> = r.jobs.iter().map(|j| (j.id, snap_of(j))).collect();
    assert_eq!(got, disk);
    let buried: Vec<u64> = r
        .jobs
        .iter()
        .filter(|j| j.state == ImportedState::Buried)
        .map(|j| j.id)
        .collect();
    assert_eq!(buried, bury_order);
    for j in &r.jobs {
        assert!(j.created_at_ns >= t0 && j.created_at_ns <= now_ns());
    }
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings); // the 65535-byte job
}

#[test]
fn live_killed_during_a_burst() {
    let exe = need_beanstalkd!();
    for round in 0..3 {
        let tmp = TempDir::new("live-burst");
        let mut srv = Beanstalkd::start(&exe, &tmp.0, &["-s", "8192"]);
        let acked: Arc<Mutex<HashMap<u64, Vec<u8>>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let threads: Vec<_> = (0..3)
            .map(|t| {
                let mut c = srv.client();
                let acked = Arc::clone(&acked);
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut n = 0u32;
                    while !stop.load(Ordering::Relaxed) {
                        // Pipelined batches keep beanstalkd busy writing.
                        let bodies: Vec<Vec<u8>> = (0..16)
                            .map(|k| {
                                n += 1;
                                let mut b = format!("t{t} n{n} ").into_bytes();
                                b.extend(std::iter::repeat_n(b'.', ((n * 7 + k) % 150) as usize));
                                b
                            })
                            .collect();
                        let mut out = Vec::new();
                        for b in &bodies {
                            out.extend(format!("put 5 0 60 {}\r\n", b.len()).as_bytes());
                            out.extend(b);
                            out.extend(b"\r\n");
                        }
                        if c.w.write_all(&out).is_err() {
                            return;
                        }
                        for b in bodies {
                            let Ok(line) = c.line() else { return };
                            if let Some(id) = line.strip_prefix("INSERTED ") {
                                if let Ok(id) = id.parse() {
                                    acked.lock().expect("lock").insert(id, b);
                                }
                            }
                        }
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(30 + 40 * round));
        srv.kill();
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            let _ = t.join();
        }
        let acked = acked.lock().expect("lock").clone();
        let r = read_ok(&tmp.0);
        let got: HashMap<u64, &ImportedJob> = r.jobs.iter().map(|j| (j.id, j)).collect();
        for (id, body) in &acked {
            let j = got
                .get(id)
                .unwrap_or_else(|| panic!("acknowledged job {id} missing"));
            assert_eq!(&j.body, body);
        }
        assert!(r.max_id >= acked.keys().copied().max().unwrap_or(0));
        for w in &r.warnings {
            // A torn record, or a file killed between its creation and its first write.
            assert!(
                w.contains("incomplete record") || w.contains("never written"),
                "{w}"
            );
        }
    }
}

#[test]
fn live_restarted_directory() {
    let exe = need_beanstalkd!();
    let tmp = TempDir::new("live-restart");
    let args = ["-s", "1024"];
    let mut srv = Beanstalkd::start(&exe, &tmp.0, &args);
    let mut c = srv.client();
    let a = c.put(1, 0, 60, b"first run, buried");
    c.ok(&format!("reserve-job {a}"), &format!("RESERVED {a} 17"));
    c.ok(&format!("bury {a} 3"), "BURIED");
    let b = c.put(2, 0, 60, b"first run, ready");
    srv.kill();
    // beanstalkd replays the directory (burying a again in memory) and carries on.
    let mut srv = Beanstalkd::start(&exe, &tmp.0, &args);
    let mut c = srv.client();
    let s = c.stats_job(a);
    assert_eq!(s["state"], "buried");
    let d = c.put(4, 0, 60, b"second run");
    assert!(d > b);
    c.ok(&format!("delete {b}"), "DELETED");
    srv.kill();

    let r = read_ok(&tmp.0);
    let ids: Vec<u64> = r.jobs.iter().map(|j| j.id).collect();
    assert_eq!(ids, [a, d]);
    assert_eq!(r.jobs[0].state, ImportedState::Buried);
    assert_eq!(r.jobs[0].buries, 1); // as journaled; beanstalkd's replay would say 2
    assert_eq!(r.max_id, d);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}
