//! A log directory as a table, one part per segment, in Arrow's column layout
//! ([`columns`](super::columns)): what the Spark source `beanpole-binlog` reads.
//!
//! # The live jobs, one segment at a time
//!
//! A job's row comes from the segment that holds its latest snapshot (its tube and
//! body are there), but whether it is still live, and its state, depend on records
//! in later segments. So reading is done in two steps:
//!
//! 1. [`plan`] (on the Spark driver) reads every segment once, checking each
//!    record as replay does, and notes where each segment's readable records end.
//!    It follows each job's home (the segment of its latest snapshot) and, for
//!    every record of a later segment that changes a job homed earlier, appends
//!    that record to the earlier segment's *later* list: reserve, release, bury,
//!    kick, timeout and delete as they are, and a delete for a job that a later
//!    snapshot (compaction) moved away. A log of puts and deletes within a segment
//!    gives empty lists; the lists hold only what crosses segments.
//! 2. [`jobs`] (one task per segment) replays its own segment up to the planned end
//!    and then its later list, with the same rules as replay
//!    (`live::apply_change`), and gives the jobs still live.
//!
//! Both steps read only up to the planned ends, so the parts form one consistent
//! picture of the directory as it was when planned. Nothing here takes the
//! directory lock or writes: a server may be writing the directory meanwhile. A
//! record that does not read, with nothing readable after it in its segment, is
//! a write still in progress or torn by a crash, and is the end of the segment;
//! one with readable records after it is corruption and an error.
//!
//! [`records`] gives every record of one segment instead; [`beanstalkd_plan`] and
//! [`beanstalkd_jobs`] do the same as `plan`/`jobs` for a beanstalkd binlog
//! directory through the import reader.

use std::io;
use std::path::Path;

use thiserror::Error;

use super::columns::{ColumnError, ColumnKind, Columns};
use super::decode::RecordRef;
use super::format::{DecodeError, Header, JobFields, Record, StoredState, HEADER_LEN};
use super::fs::{FsDir, LogDir};
use super::import::{read_beanstalkd_dir, ImportError, ImportedState};
use super::live::apply_change;
use super::recover::{all_zero, next_valid, scan_budget, Next};
use crate::idindex::IdIndex;

/// Why a log could not be read as a table.
#[derive(Debug, Error)]
pub enum TableError {
    #[error("cannot read the log in {dir}: {source}")]
    Io { dir: String, source: io::Error },
    #[error("segment {seq} of {dir} is not a beanpole log segment: {reason}")]
    BadSegment {
        dir: String,
        seq: u64,
        reason: DecodeError,
    },
    #[error(
        "segment {seq} of {dir} is corrupt at offset {offset} ({reason}) with readable \
         records after it"
    )]
    Corrupt {
        dir: String,
        seq: u64,
        offset: u64,
        reason: DecodeError,
    },
    #[error(
        "segment {seq} of {dir} changed after the read was planned (compaction removed \
         or rewrote it); read the directory again"
    )]
    Changed { dir: String, seq: u64 },
    #[error("the log in {dir} kept changing while it was planned; read it again")]
    Unsettled { dir: String },
    #[error(transparent)]
    Column(#[from] ColumnError),
    #[error(transparent)]
    Import(#[from] ImportError),
}

/// One segment's part of a read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentPlan {
    pub seq: u64,
    /// Where its readable records end.
    pub end: u64,
    /// Records of later segments about jobs homed here, encoded as in the log.
    pub later: Vec<u8>,
}

/// What [`plan`] found.
#[derive(Debug, Clone, Default)]
pub struct LogPlan {
    /// Segments holding records, ascending.
    pub segments: Vec<SegmentPlan>,
    /// Torn tails and skipped files.
    pub warnings: Vec<String>,
}

/// Times a plan is started again when a segment goes away under it.
const PLAN_ATTEMPTS: usize = 5;

/// Plan a read of `path` (see the module documentation).
pub fn plan(path: &Path) -> Result<LogPlan, TableError> {
    for _ in 0..PLAN_ATTEMPTS {
        // A segment listed but gone when read was removed by compaction, after
        // its jobs were written again further on, perhaps in a segment created
        // after the listing: start again to see them.
        match plan_once(path)? {
            Some(plan) => return Ok(plan),
            None => continue,
        }
    }
    Err(TableError::Unsettled {
        dir: path.display().to_string(),
    })
}

fn io_err(path: &Path) -> impl Fn(io::Error) -> TableError + '_ {
    move |source| TableError::Io {
        dir: path.display().to_string(),
        source,
    }
}

fn plan_once(path: &Path) -> Result<Option<LogPlan>, TableError> {
    let dir = FsDir::new(path);
    let mut out = LogPlan::default();
    // A job's id to the index in `out.segments` of the segment of its latest
    // snapshot.
    // (The job table's dense id index: ids come mostly in order.)
    let mut home = IdIndex::default();
    for seq in dir.segments().map_err(io_err(path))? {
        let bytes = match dir.read(seq) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(path)(e)),
        };
        let here = out.segments.len() as u32;
        let mut later: Vec<(u32, Record)> = Vec::new();
        let Some(end) = scan(path, seq, &bytes, &mut out.warnings, |record| {
            let id = record.id();
            match record {
                RecordRef::Job(_) => {
                    if let Some(was) = home.get(id) {
                        if was != here {
                            later.push((was, Record::Delete { id }));
                        }
                    }
                    home.insert(id, here);
                }
                RecordRef::Change(Record::Delete { .. }) => {
                    if let Some(was) = home.remove(id) {
                        if was != here {
                            later.push((was, Record::Delete { id }));
                        }
                    }
                }
                RecordRef::Change(
                    Record::NextId { .. }
                    | Record::Outcome { .. }
                    | Record::End { .. }
                    | Record::Pause { .. },
                ) => {}
                RecordRef::Change(change) => {
                    if let Some(was) = home.get(id) {
                        if was != here {
                            later.push((was, change));
                        }
                    }
                }
            }
        })?
        else {
            continue;
        };
        if end == HEADER_LEN {
            // Nothing written yet: a spare made ahead of need.
            continue;
        }
        for (at, record) in later {
            record.encode(&mut out.segments[at as usize].later);
        }
        out.segments.push(SegmentPlan {
            seq,
            end: end as u64,
            later: Vec::new(),
        });
    }
    Ok(Some(out))
}

/// Walk the readable records of one segment, calling `each` on them; returns where
/// they end, or `None` for a file with no header yet (all zeros: being created).
fn scan(
    path: &Path,
    seq: u64,
    bytes: &[u8],
    warnings: &mut Vec<String>,
    mut each: impl FnMut(RecordRef<'_>),
) -> Result<Option<usize>, TableError> {
    let dir = || path.display().to_string();
    if let Err(reason) = Header::decode(bytes) {
        if all_zero(bytes) {
            return Ok(None);
        }
        return Err(TableError::BadSegment {
            dir: dir(),
            seq,
            reason,
        });
    }
    let mut at = HEADER_LEN;
    let mut budget = scan_budget(bytes.len());
    while at < bytes.len() {
        match RecordRef::decode(&bytes[at..]) {
            Ok(Some((record, n))) => {
                each(record);
                at += n;
            }
            Ok(None) if all_zero(&bytes[at..]) => break,
            other => {
                let reason = other.err().unwrap_or(DecodeError::Length(0));
                if next_valid(bytes, at + 1, &mut budget) != Next::None {
                    return Err(TableError::Corrupt {
                        dir: dir(),
                        seq,
                        offset: at as u64,
                        reason,
                    });
                }
                warnings.push(format!(
                    "segment {seq}: unreadable record at offset {at} ({reason}) with nothing \
                     readable after it: a write in progress or a torn tail; read up to there"
                ));
                break;
            }
        }
    }
    Ok(Some(at))
}

/// A job's column spec: what `jobs` and `beanstalkd_jobs` give.
pub const JOB_COLUMNS: &[(&str, ColumnKind)] = &[
    ("id", ColumnKind::Int64),
    ("tube", ColumnKind::Utf8),
    ("state", ColumnKind::Utf8),
    ("priority", ColumnKind::Int64),
    ("delay", ColumnKind::Int64),
    ("ttr", ColumnKind::Int64),
    ("body", ColumnKind::Binary),
    ("reserves", ColumnKind::Int64),
    ("timeouts", ColumnKind::Int64),
    ("releases", ColumnKind::Int64),
    ("buries", ColumnKind::Int64),
    ("kicks", ColumnKind::Int64),
    ("segment", ColumnKind::Int64),
];

/// What `records` gives.
pub const RECORD_COLUMNS: &[(&str, ColumnKind)] = &[
    ("segment", ColumnKind::Int64),
    ("offset", ColumnKind::Int64),
    ("kind", ColumnKind::Utf8),
    ("id", ColumnKind::Int64),
    ("tube", ColumnKind::Utf8),
    ("state", ColumnKind::Utf8),
    ("priority", ColumnKind::Int64),
    ("delay", ColumnKind::Int64),
    ("ttr", ColumnKind::Int64),
    ("body_size", ColumnKind::Int64),
];

/// A job found in the segment: its fields and where its tube and body are.
struct Found {
    fields: JobFields,
    tube: (usize, usize),
    body: (usize, usize),
    live: bool,
}

/// Read a planned segment up to its planned end: the bytes, checked to hold what
/// the plan saw.
fn planned_bytes(path: &Path, seq: u64, end: u64) -> Result<Vec<u8>, TableError> {
    let changed = || TableError::Changed {
        dir: path.display().to_string(),
        seq,
    };
    let mut bytes = match FsDir::new(path).read(seq) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(changed()),
        Err(e) => return Err(io_err(path)(e)),
    };
    let end = usize::try_from(end).map_err(|_| changed())?;
    if bytes.len() < end || end < HEADER_LEN || Header::decode(&bytes).is_err() {
        return Err(changed());
    }
    bytes.truncate(end);
    Ok(bytes)
}

/// The state a restart at wall-clock time `now` (ns) gives a job: a reserved one
/// is ready again, a delayed one whose time has come is ready.
fn restart_state(f: &JobFields, now: i64) -> &'static [u8] {
    match f.state {
        StoredState::Ready | StoredState::Reserved => b"ready",
        StoredState::Delayed if f.ready_at <= now => b"ready",
        StoredState::Delayed => b"delayed",
        StoredState::Buried => b"buried",
    }
}

/// The live jobs homed in one planned segment, as a restart at wall-clock time
/// `now` (ns since 1970) would have them, in the order they were first put.
pub fn jobs(path: &Path, part: &SegmentPlan, now: i64) -> Result<Columns, TableError> {
    let bytes = planned_bytes(path, part.seq, part.end)?;
    let changed = || TableError::Changed {
        dir: path.display().to_string(),
        seq: part.seq,
    };
    let mut found: Vec<Found> = Vec::new();
    let mut index = IdIndex::default();
    let mut apply = |record: RecordRef<'_>, base: usize, found: &mut Vec<Found>| match record {
        RecordRef::Job(job) => {
            // Offsets of the tube and body inside `bytes` (they borrow it).
            let tube_at = job.tube.as_ptr() as usize - base;
            let body_at = job.body.as_ptr() as usize - base;
            let entry = Found {
                fields: job.fields,
                tube: (tube_at, tube_at + job.tube.len()),
                body: (body_at, body_at + job.body.len()),
                live: true,
            };
            match index.get(job.fields.id) {
                Some(at) => found[at as usize] = entry,
                None => {
                    index.insert(job.fields.id, found.len() as u32);
                    found.push(entry);
                }
            }
        }
        RecordRef::Change(Record::Delete { id }) => {
            if let Some(at) = index.remove(id) {
                found[at as usize].live = false;
            }
        }
        RecordRef::Change(change) => {
            if let Some(at) = index.get(change.id()) {
                apply_change(&mut found[at as usize].fields, &change);
            }
        }
    };
    let base = bytes.as_ptr() as usize;
    let mut at = HEADER_LEN;
    while at < bytes.len() {
        let Ok(Some((record, n))) = RecordRef::decode(&bytes[at..]) else {
            return Err(changed());
        };
        apply(record, base, &mut found);
        at += n;
    }
    let mut at = 0;
    while at < part.later.len() {
        let Ok(Some((record, n))) = RecordRef::decode(&part.later[at..]) else {
            return Err(changed());
        };
        apply(record, base, &mut found);
        at += n;
    }

    let live = found.iter().filter(|f| f.live).count();
    let body_bytes: usize = found
        .iter()
        .filter(|f| f.live)
        .map(|f| f.body.1 - f.body.0)
        .sum();
    let mut out = Columns::new(JOB_COLUMNS);
    for (i, c) in out.columns.iter_mut().enumerate() {
        c.reserve(live, if i == 6 { body_bytes } else { live * 8 });
    }
    for f in found.iter().filter(|f| f.live) {
        let j = &f.fields;
        let tube = &bytes[f.tube.0..f.tube.1];
        let body = &bytes[f.body.0..f.body.1];
        push_job(
            &mut out,
            j,
            tube,
            restart_state(j, now),
            body,
            part.seq as i64,
        )?;
    }
    Ok(out)
}

fn push_job(
    out: &mut Columns,
    j: &JobFields,
    tube: &[u8],
    state: &[u8],
    body: &[u8],
    segment: i64,
) -> Result<(), TableError> {
    let c = &mut out.columns;
    c[0].push_i64(Some(j.id as i64));
    c[1].push_str(Some(tube))?;
    c[2].push_bytes(Some(state))?;
    c[3].push_i64(Some(i64::from(j.pri)));
    c[4].push_i64(Some(i64::from(j.delay)));
    c[5].push_i64(Some(i64::from(j.ttr)));
    c[6].push_bytes(Some(body))?;
    c[7].push_i64(Some(i64::from(j.reserves)));
    c[8].push_i64(Some(i64::from(j.timeouts)));
    c[9].push_i64(Some(i64::from(j.releases)));
    c[10].push_i64(Some(i64::from(j.buries)));
    c[11].push_i64(Some(i64::from(j.kicks)));
    c[12].push_i64(Some(segment));
    Ok(())
}

/// The name of a record's kind, as `binlog dump` prints it.
fn kind_name(record: &RecordRef<'_>) -> &'static [u8] {
    match record {
        RecordRef::Job(_) => b"job",
        RecordRef::Change(Record::Job(_)) => b"job",
        RecordRef::Change(Record::Reserve { .. }) => b"reserve",
        RecordRef::Change(Record::Release { .. }) => b"release",
        RecordRef::Change(Record::Bury { .. }) => b"bury",
        RecordRef::Change(Record::Kick { .. }) => b"kick",
        RecordRef::Change(Record::Timeout { .. }) => b"timeout",
        RecordRef::Change(Record::Delete { .. }) => b"delete",
        RecordRef::Change(Record::NextId { .. }) => b"next-id",
        RecordRef::Change(Record::Hold { .. }) => b"hold",
        RecordRef::Change(Record::Return { .. }) => b"return",
        RecordRef::Change(Record::Outcome { .. }) => b"outcome",
        RecordRef::Change(Record::End { .. }) => b"end",
        RecordRef::Change(Record::Pause { .. }) => b"pause",
    }
}

fn stored_state(s: StoredState) -> &'static [u8] {
    match s {
        StoredState::Ready => b"ready",
        StoredState::Delayed => b"delayed",
        StoredState::Buried => b"buried",
        StoredState::Reserved => b"reserved",
    }
}

/// Every record of one segment up to `end` (a planned end), in order.
pub fn records(path: &Path, seq: u64, end: u64) -> Result<Columns, TableError> {
    let bytes = planned_bytes(path, seq, end)?;
    let mut out = Columns::new(RECORD_COLUMNS);
    let mut at = HEADER_LEN;
    while at < bytes.len() {
        let Ok(Some((record, n))) = RecordRef::decode(&bytes[at..]) else {
            return Err(TableError::Changed {
                dir: path.display().to_string(),
                seq,
            });
        };
        let c = &mut out.columns;
        c[0].push_i64(Some(seq as i64));
        c[1].push_i64(Some(at as i64));
        c[2].push_bytes(Some(kind_name(&record)))?;
        let (id, tube, state, pri, delay, ttr, size) = match &record {
            RecordRef::Job(j) => (
                Some(j.fields.id),
                Some(j.tube),
                Some(stored_state(j.fields.state)),
                Some(j.fields.pri),
                Some(j.fields.delay),
                Some(j.fields.ttr),
                Some(j.body.len() as i64),
            ),
            RecordRef::Change(Record::Release { id, pri, delay, .. }) => {
                (Some(*id), None, None, Some(*pri), Some(*delay), None, None)
            }
            RecordRef::Change(Record::Bury { id, pri, .. }) => {
                (Some(*id), None, None, Some(*pri), None, None, None)
            }
            RecordRef::Change(
                Record::NextId { .. }
                | Record::Outcome { .. }
                | Record::End { .. }
                | Record::Pause { .. },
            ) => (None, None, None, None, None, None, None),
            RecordRef::Change(r) => (Some(r.id()), None, None, None, None, None, None),
        };
        c[3].push_i64(id.map(|v| v as i64));
        c[4].push_str(tube)?;
        c[5].push_bytes(state)?;
        c[6].push_i64(pri.map(i64::from));
        c[7].push_i64(delay.map(i64::from));
        c[8].push_i64(ttr.map(i64::from));
        c[9].push_i64(size);
        at += n;
    }
    Ok(out)
}

/// The files of a beanstalkd binlog directory that hold live jobs (their names),
/// and the import reader's warnings.
pub fn beanstalkd_plan(path: &Path) -> Result<(Vec<String>, Vec<String>), TableError> {
    let report = read_beanstalkd_dir(path)?;
    let mut holding = vec![false; report.files.len()];
    for job in &report.jobs {
        if let Some(h) = holding.get_mut(job.file) {
            *h = true;
        }
    }
    let files = report
        .files
        .iter()
        .zip(holding)
        .filter(|(_, h)| *h)
        .map(|(f, _)| file_name(f))
        .collect();
    Ok((files, report.warnings))
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The live jobs whose latest full record is in one of the beanstalkd `files`
/// (`binlog.N`), as beanstalkd restarted at wall-clock time `now` (ns) would have
/// them. Each part replays the whole directory (beanstalkd's update records only
/// make sense after the full records before them), keeping its own files' jobs.
pub fn beanstalkd_jobs(path: &Path, files: &[String], now: i64) -> Result<Columns, TableError> {
    let report = read_beanstalkd_dir(path)?;
    // Per file of the directory: its number if the part keeps its jobs.
    let kept: Vec<Option<i64>> = report
        .files
        .iter()
        .map(|f| {
            let name = file_name(f);
            files.contains(&name).then(|| {
                name.strip_prefix("binlog.")
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0)
            })
        })
        .collect();
    let mut out = Columns::new(JOB_COLUMNS);
    for job in &report.jobs {
        let Some(&Some(number)) = kept.get(job.file) else {
            continue;
        };
        let state: &[u8] = match job.state {
            ImportedState::Ready | ImportedState::Reserved => b"ready",
            ImportedState::Delayed if job.deadline_at_ns <= now => b"ready",
            ImportedState::Delayed => b"delayed",
            ImportedState::Buried => b"buried",
        };
        let fields = JobFields {
            id: job.id,
            pri: job.pri,
            delay: secs(job.delay_ns),
            ttr: secs(job.ttr_ns),
            state: StoredState::Ready,
            created: job.created_at_ns,
            ready_at: job.deadline_at_ns,
            bury_seq: 0,
            reserves: job.reserves,
            timeouts: job.timeouts,
            releases: job.releases,
            buries: job.buries,
            kicks: job.kicks,
        };
        push_job(&mut out, &fields, &job.tube, state, &job.body, number)?;
    }
    Ok(out)
}

fn secs(ns: i64) -> u32 {
    u32::try_from(ns.max(0) / 1_000_000_000).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::wal::format::JobRecord;
    use crate::wal::recover::replay;

    fn snapshot(id: u64, pri: u32, state: u8) -> Record {
        let state = [
            StoredState::Ready,
            StoredState::Delayed,
            StoredState::Buried,
            StoredState::Reserved,
        ][usize::from(state % 4)];
        Record::Job(JobRecord {
            fields: JobFields {
                id,
                pri,
                delay: 0,
                ttr: 1,
                state,
                created: 0,
                // Delayed jobs wait far into the future, so they stay delayed.
                ready_at: i64::MAX,
                bury_seq: 0,
                reserves: 0,
                timeouts: 0,
                releases: 0,
                buries: 0,
                kicks: 0,
            },
            tube: format!("t{}", id % 3).into_bytes(),
            body: vec![id as u8; (id % 7) as usize],
        })
    }

    /// Records about a few ids; `true` starts a new segment after the record.
    fn record() -> impl Strategy<Value = (Record, bool)> {
        let id = 1..16u64;
        let r = prop_oneof![
            4 => (id.clone(), 0..9u32, any::<u8>()).prop_map(|(id, p, s)| snapshot(id, p, s)),
            1 => id.clone().prop_map(|id| Record::Reserve { id }),
            1 => (id.clone(), 0..9u32, 0..3u32)
                .prop_map(|(id, pri, delay)| Record::Release { id, pri, delay, ready_at: i64::MAX }),
            1 => (id.clone(), 0..9u32).prop_map(|(id, pri)| Record::Bury { id, pri, bury_seq: 1 }),
            1 => id.clone().prop_map(|id| Record::Kick { id }),
            1 => id.clone().prop_map(|id| Record::Timeout { id }),
            3 => id.prop_map(|id| Record::Delete { id }),
        ];
        (r, proptest::bool::weighted(0.2))
    }

    /// A fresh directory under the system's temporary directory, removed on drop.
    struct TempDir(std::path::PathBuf);

    impl TempDir {
        fn new() -> TempDir {
            use std::sync::atomic::{AtomicU32, Ordering};
            static NEXT: AtomicU32 = AtomicU32::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let dir =
                std::env::temp_dir().join(format!("beanpole-table-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("temp dir");
            TempDir(dir)
        }

        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn write_log(dir: &Path, records: &[(Record, bool)]) {
        let mut seq = 1;
        let mut buf = Header {
            seq,
            next_id: 1,
            created: 0,
        }
        .encode()
        .to_vec();
        for (record, next) in records {
            record.encode(&mut buf);
            if *next {
                std::fs::write(dir.join(crate::wal::fs::segment_name(seq)), &buf).expect("write");
                seq += 1;
                buf = Header {
                    seq,
                    next_id: 1,
                    created: 0,
                }
                .encode()
                .to_vec();
            }
        }
        std::fs::write(dir.join(crate::wal::fs::segment_name(seq)), &buf).expect("write");
    }

    fn int(c: &super::super::columns::Column, row: usize) -> i64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&c.values[row * 8..row * 8 + 8]);
        i64::from_le_bytes(b)
    }

    fn bytes(c: &super::super::columns::Column, row: usize) -> Vec<u8> {
        let at = |i: usize| {
            let mut b = [0u8; 4];
            b.copy_from_slice(&c.offsets[i * 4..i * 4 + 4]);
            i32::from_le_bytes(b) as usize
        };
        c.values[at(row)..at(row + 1)].to_vec()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// The parts together hold exactly the jobs replay gives, each once, with
        /// the same fields, tube and body.
        #[test]
        fn parts_together_are_what_replay_gives(records in proptest::collection::vec(record(), 0..120)) {
            let tmp = TempDir::new();
            write_log(tmp.path(), &records);
            let recovered = replay(&FsDir::new(tmp.path()), false, false).expect("replay");
            let mut want = BTreeMap::new();
            for j in &recovered.jobs {
                let state: &[u8] = match j.fields.state {
                    StoredState::Ready | StoredState::Reserved => b"ready",
                    StoredState::Delayed => b"delayed",
                    StoredState::Buried => b"buried",
                };
                let f = &j.fields;
                let nums = vec![i64::from(f.pri), i64::from(f.delay), i64::from(f.ttr),
                    i64::from(f.reserves), i64::from(f.timeouts), i64::from(f.releases),
                    i64::from(f.buries), i64::from(f.kicks), j.home as i64];
                want.insert(f.id as i64, (recovered.tube(j).to_vec(), state.to_vec(), j.body().to_vec(), nums));
            }
            let plan = plan(tmp.path()).expect("plan");
            let mut got = BTreeMap::new();
            for part in &plan.segments {
                let cols = jobs(tmp.path(), part, 0).expect("jobs");
                let c = &cols.columns;
                for row in 0..cols.rows() {
                    let nums = [3, 4, 5, 7, 8, 9, 10, 11, 12].iter().map(|&i| int(&c[i], row)).collect::<Vec<_>>();
                    let old = got.insert(int(&c[0], row), (bytes(&c[1], row), bytes(&c[2], row), bytes(&c[6], row), nums));
                    prop_assert!(old.is_none(), "job {} twice", int(&c[0], row));
                }
            }
            prop_assert_eq!(got, want);
        }
    }
}
