//! Offline log tools behind `beanpole binlog`: dump, verify, compact, and import
//! from a beanstalkd binlog directory. Each takes the directory lock, so none of
//! them runs on a directory a live server is using.

use std::path::Path;

use super::format::{Header, JobFields, JobRecord, Record, StoredState, HEADER_LEN};
use super::fs::{DirLock, FsDir, LogDir};
use super::import::{read_beanstalkd_dir, ImportedState};
use super::recover::{all_zero, replay, Recovered};
use super::writer::wall_now;
use super::LogError;

/// One record as `dump` lists it.
#[derive(Debug, Clone)]
pub struct DumpedRecord {
    pub segment: u64,
    pub offset: u64,
    pub record: Record,
}

/// What `dump` found: the records in order, then any problem that stopped it.
#[derive(Debug, Default)]
pub struct Dump {
    pub headers: Vec<Header>,
    pub records: Vec<DumpedRecord>,
    pub problems: Vec<String>,
}

fn io_err(dir: &Path) -> impl Fn(std::io::Error) -> LogError + '_ {
    move |source| LogError::Io {
        dir: dir.display().to_string(),
        source,
    }
}

/// Every record of every segment, in order. Stops a segment at its first
/// unreadable record and says where.
pub fn dump(path: &Path) -> Result<Dump, LogError> {
    let dir = FsDir::new(path);
    let mut out = Dump::default();
    for seq in dir.segments().map_err(io_err(path))? {
        let bytes = dir.read(seq).map_err(io_err(path))?;
        match Header::decode(&bytes) {
            Ok(h) => out.headers.push(h),
            Err(e) => {
                out.problems.push(format!("segment {seq}: {e}"));
                continue;
            }
        }
        let mut at = HEADER_LEN;
        while at < bytes.len() {
            match Record::decode(&bytes[at..]) {
                Ok(Some((record, n))) => {
                    out.records.push(DumpedRecord {
                        segment: seq,
                        offset: at as u64,
                        record,
                    });
                    at += n;
                }
                Ok(None) if all_zero(&bytes[at..]) => break,
                Ok(None) => {
                    out.problems.push(format!(
                        "segment {seq}: zero length at offset {at} with data after it"
                    ));
                    break;
                }
                Err(e) => {
                    out.problems
                        .push(format!("segment {seq}: offset {at}: {e}"));
                    break;
                }
            }
        }
    }
    Ok(out)
}

/// Replay without changing anything; `Err` if the server would refuse to start.
pub fn verify(path: &Path) -> Result<Recovered, LogError> {
    let dir = FsDir::new(path);
    let _lock = DirLock::acquire(path).map_err(io_err(path))?;
    Ok(replay(&dir, false, false)?)
}

/// Write a snapshot of every live job into one new segment (or more if they do not
/// fit) and remove every older segment. Returns (jobs kept, segments removed).
pub fn compact(path: &Path, segment_size: u64) -> Result<(usize, usize), LogError> {
    let dir = FsDir::new(path);
    let _lock = DirLock::acquire(path).map_err(io_err(path))?;
    let mut recovered = replay(&dir, false, true)?;
    recovered.sort_jobs();
    let old: Vec<u64> = recovered.segments.iter().map(|&(seq, _)| seq).collect();
    let first = old.last().map_or(1, |s| s + 1);
    let jobs: Vec<JobRecord> = recovered.jobs.iter().map(|j| recovered.record(j)).collect();
    let kept = jobs.len();
    write_segments(&dir, first, recovered.next_id, &jobs, segment_size).map_err(io_err(path))?;
    for seq in &old {
        dir.remove(*seq).map_err(io_err(path))?;
    }
    Ok((kept, old.len()))
}

/// Convert a beanstalkd binlog directory into a new beanpole log in `dst` (which
/// must not hold a log yet). Returns the jobs written and the reader's warnings.
pub fn import(src: &Path, dst: &Path, segment_size: u64) -> Result<(usize, Vec<String>), LogError> {
    let report = read_beanstalkd_dir(src).map_err(|e| LogError::Io {
        dir: src.display().to_string(),
        source: std::io::Error::other(e.to_string()),
    })?;
    std::fs::create_dir_all(dst).map_err(io_err(dst))?;
    let dir = FsDir::new(dst);
    let _lock = DirLock::acquire(dst).map_err(io_err(dst))?;
    if !dir.segments().map_err(io_err(dst))?.is_empty() {
        return Err(LogError::Io {
            dir: dst.display().to_string(),
            source: std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "already holds a beanpole log",
            ),
        });
    }
    let mut buried = 0;
    let jobs: Vec<JobRecord> = report
        .jobs
        .iter()
        .map(|j| {
            let (state, ready_at, bury_seq) = match j.state {
                ImportedState::Ready => (StoredState::Ready, 0, 0),
                ImportedState::Reserved => (StoredState::Reserved, 0, 0),
                ImportedState::Delayed => (StoredState::Delayed, j.deadline_at_ns, 0),
                ImportedState::Buried => {
                    buried += 1;
                    (StoredState::Buried, 0, buried)
                }
            };
            JobRecord {
                fields: JobFields {
                    id: j.id,
                    pri: j.pri,
                    delay: secs(j.delay_ns),
                    ttr: secs(j.ttr_ns).max(1),
                    state,
                    created: j.created_at_ns,
                    ready_at,
                    bury_seq,
                    reserves: j.reserves,
                    timeouts: j.timeouts,
                    releases: j.releases,
                    buries: j.buries,
                    kicks: j.kicks,
                },
                tube: j.tube.clone(),
                body: j.body.clone(),
            }
        })
        .collect();
    write_segments(&dir, 1, report.max_id + 1, &jobs, segment_size).map_err(io_err(dst))?;
    Ok((jobs.len(), report.warnings))
}

fn secs(ns: i64) -> u32 {
    u32::try_from(ns.max(0) / 1_000_000_000).unwrap_or(u32::MAX)
}

/// Write job snapshots into fresh segments from `first`, synced.
fn write_segments(
    dir: &FsDir,
    first: u64,
    next_id: u64,
    jobs: &[JobRecord],
    segment_size: u64,
) -> std::io::Result<()> {
    let mut seq = first;
    let mut buf = Header {
        seq,
        next_id,
        created: wall_now(),
    }
    .encode()
    .to_vec();
    let flush = |seq: u64, buf: &[u8]| -> std::io::Result<()> {
        let size = segment_size.max(buf.len() as u64).div_ceil(4096) * 4096;
        let file = dir.create(seq, size)?;
        file.write_all_at(0, buf)?;
        file.sync()
    };
    for job in jobs {
        let mut rec = Vec::new();
        job.as_ref().encode(&mut rec);
        if buf.len() + rec.len() > segment_size as usize && buf.len() > HEADER_LEN {
            flush(seq, &buf)?;
            seq += 1;
            buf = Header {
                seq,
                next_id,
                created: wall_now(),
            }
            .encode()
            .to_vec();
        }
        buf.extend_from_slice(&rec);
    }
    flush(seq, &buf)
}
