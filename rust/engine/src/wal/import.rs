//! Reading a beanstalkd binlog directory (`beanstalkd -b DIR`).
//!
//! `beanpole binlog import` uses [`read_beanstalkd_dir`] to carry beanstalkd's jobs
//! over, and `beanpole serve -b DIR` uses [`is_beanstalkd_dir`] to recognise such a
//! directory instead of misreading it. Nothing here writes to the directory.
//!
//! # The directory
//!
//! beanstalkd keeps files named `binlog.N` (N in decimal, counting up from 1) and an
//! empty `lock` file. Replaying the files in increasing N rebuilds its jobs. Files
//! whose jobs are all gone are deleted from the low end, so the lowest N present may
//! be above 1; a gap in the middle means a file was lost.
//!
//! Every file starts with its format version, a native-endian `int` (7 for
//! beanstalkd 1.5 to 1.13, 5 for 1.4.x). beanstalkd fills a new file with zeros up to
//! the segment size (`-s`, in 4096-byte steps, so it is rounded up) and cuts it back
//! to the bytes it used only when it moves on to the next file. The file it was
//! writing when it stopped therefore ends in zeros, and so does a file that was being
//! written before a crash and restart (beanstalkd starts a new file on every start).
//! beanstalkd also creates files ahead of the one it writes, to hold space reserved
//! for later deletes; those hold only the version and zeros, so the file being written
//! is often not the newest. A zero job id where a record would begin marks the end of
//! the data.
//!
//! # Format version 7, x86-64 (checked against files written by beanstalkd 1.12)
//!
//! Records follow the version back to back; all integers are little-endian:
//!
//! | offset | bytes | field                                                         |
//! |--------|-------|---------------------------------------------------------------|
//! | 0      | 4     | `i32` tube-name length L, 0..=200; 0 means an *update* record |
//! | 4      | L     | the tube name, no terminator                                  |
//! | 4+L    | 80    | the job struct (below)                                        |
//! | 84+L   | S     | the body and its CRLF; only in a *full* record (L > 0)        |
//!
//! The job struct is beanstalkd's in-memory C struct, padding included:
//!
//! | offset | bytes | field                                                              |
//! |--------|-------|--------------------------------------------------------------------|
//! | 0      | 8     | `u64` job id (never 0)                                             |
//! | 8      | 4     | `u32` priority                                                     |
//! | 12     | 4     | padding                                                            |
//! | 16     | 8     | `i64` delay, ns                                                    |
//! | 24     | 8     | `i64` time to run, ns                                              |
//! | 32     | 4     | `i32` S, the body size counting its CRLF                           |
//! | 36     | 4     | padding                                                            |
//! | 40     | 8     | `i64` created at, wall-clock ns since 1970                         |
//! | 48     | 8     | `i64` deadline: when a delay ends, or when a reservation runs out  |
//! | 56     | 20    | `u32` ×5: reserves, timeouts, releases, buries, kicks              |
//! | 76     | 1     | `u8` state: 0 deleted, 1 ready, 2 reserved, 3 buried, 4 delayed    |
//! | 77     | 3     | padding                                                            |
//!
//! Padding holds whatever was in memory and is not checked.
//!
//! beanstalkd writes a full record when a job is put, and again when compaction copies
//! a live job out of the oldest file into the current one (a *migration*: the same
//! job, its struct as it is at that moment). It writes an update record, the whole
//! struct without name or body, after the changes it journals: delete (state 0),
//! bury, kick, and release with a non-zero delay. Reserve, touch, release with delay
//! 0, a TTR timeout and a delay running out are not journaled, so a job reserved when
//! beanstalkd stopped normally reads back as ready, with the counters of its last
//! journaled change; only a migration can record state 2.
//!
//! The four parts of a record are written with separate `write` calls into the
//! zero-filled file, so a process killed mid-record leaves a record whose later parts
//! are still zeros: a name length with a zero name after it, a name with an all-zero
//! struct after it, or a struct whose body is zeros instead of ending in CRLF.
//!
//! # Format version 5 (beanstalkd 1.4.x)
//!
//! The same sequence, except that the tube-name length is a `size_t` (8 bytes), the
//! job struct is the first 77 bytes of the layout above (no trailing padding), and
//! delay, time to run, created at and deadline are `u64` microseconds. beanstalkd 1.5
//! and later read such files and write version 7 files next to them, so one directory
//! can hold both; this reader handles each file by its own version.
//!
//! # Where this reader differs from beanstalkd's own replay
//!
//! * A job whose stored size exceeds beanstalkd's `-z` limit is kept. beanstalkd
//!   compares the stored size, CRLF included, with the limit, so with the default
//!   limit it refuses a job of 65534 or 65535 bytes it accepted earlier, and then
//!   skips everything after it in that file. Such a job gets a warning here.
//! * Jobs come out in the order of their last record, so buried jobs keep the order
//!   in which they were buried; a migration copy does not move a job unless its state
//!   changed. (beanstalkd replays in the order of first records and buries again,
//!   which reorders them and bumps `buries`.) The format itself loses the bury order
//!   once compaction has copied buried jobs forward and deleted the file that held
//!   their bury records: the copies are written in the order of the jobs' puts, and
//!   that is the order they then come out in.
//! * Reserved jobs are reported as reserved; the caller decides (beanstalkd makes
//!   them ready).
//! * An incomplete record at the end of a file's data is cut with a warning: one whose
//!   unwritten parts are zeros to the end of the file (in any file, since the file
//!   being written is often not the newest, and a restart leaves it behind too), and,
//!   in the last file only, one the file ends inside or whose non-zero bytes stop
//!   inside the part that fails to read. Such a record was never acknowledged to a
//!   client. Anything else that does not read as beanstalkd's format is an error
//!   naming the file and byte offset; beanstalkd would print a warning, skip the
//!   rest of that file and carry on. An all-zero or empty file is skipped with a
//!   warning, and so is a last file too short for its version.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Longest tube name beanstalkd accepts.
const MAX_TUBE_NAME: usize = 200;

/// beanstalkd's default `-z`. Its replay refuses a full record whose stored body size
/// (body plus CRLF) is larger.
const DEFAULT_MAX_JOB_SIZE: i64 = 65535;

/// Bytes a tube name may contain (it may not start with `-`).
const TUBE_NAME_CHARS: &[u8] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-+/;.$_()";

/// The state of a live job as its last record gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ImportedState {
    Ready,
    /// Only a migration copy records this; beanstalkd makes such a job ready again.
    Reserved,
    Buried,
    Delayed,
}

impl ImportedState {
    /// The name stats-job uses: `ready`, `reserved`, `buried`, `delayed`.
    pub fn as_str(self) -> &'static str {
        match self {
            ImportedState::Ready => "ready",
            ImportedState::Reserved => "reserved",
            ImportedState::Buried => "buried",
            ImportedState::Delayed => "delayed",
        }
    }
}

/// One live job, as its records leave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportedJob {
    pub id: u64,
    pub tube: Vec<u8>,
    pub pri: u32,
    /// The delay of the last put or release, in ns.
    pub delay_ns: i64,
    pub ttr_ns: i64,
    /// The body without its trailing CRLF.
    pub body: Vec<u8>,
    /// As stored: wall-clock ns since 1970 (version 5 stores µs; converted).
    pub created_at_ns: i64,
    /// As stored: for a delayed job, the wall-clock ns when it becomes ready; for a
    /// reserved one, when the reservation runs out; otherwise left over.
    pub deadline_at_ns: i64,
    pub reserves: u32,
    pub timeouts: u32,
    pub releases: u32,
    pub buries: u32,
    pub kicks: u32,
    pub state: ImportedState,
}

/// What a beanstalkd binlog directory holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// The format version of the oldest file that has one (7, or 5); 0 if no file
    /// had one. A directory that mixes versions also gets a warning.
    pub version: i32,
    /// Every `binlog.N` file read, in replay order.
    pub files: Vec<PathBuf>,
    /// Live jobs in the order of their last record (see the module documentation).
    pub jobs: Vec<ImportedJob>,
    /// The highest job id in any record, live or deleted; new ids must follow it.
    pub max_id: u64,
    /// Things an operator should hear about; none of them stopped the reading.
    pub warnings: Vec<String>,
}

/// Why a beanstalkd binlog directory could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{}: no beanstalkd binlog.N files in this directory", .dir.display())]
    NotABinlogDir { dir: PathBuf },
    #[error(
        "{}: beanstalkd binlog format version {version} is not supported \
         (this reader knows version 7, written by beanstalkd 1.5 to 1.13, and version 5, \
         written by 1.4)",
        .path.display()
    )]
    UnsupportedVersion { path: PathBuf, version: i32 },
    #[error("{}: corrupt at byte {offset}: {reason}", .path.display())]
    Corrupt {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
}

/// Whether `dir` holds beanstalkd `binlog.N` files. False when it cannot be read.
pub fn is_beanstalkd_dir(dir: &Path) -> bool {
    match fs::read_dir(dir) {
        Ok(entries) => entries
            .flatten()
            .any(|e| matches!(binlog_number(&e.file_name()), Name::Binlog(_))),
        Err(_) => false,
    }
}

/// Reads every `binlog.N` file in `dir`, in increasing N, and returns the live jobs.
pub fn read_beanstalkd_dir(dir: &Path) -> Result<ImportReport, ImportError> {
    let io_err = |source| ImportError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut numbered = Vec::new();
    let mut odd_names = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_err)? {
        let entry = entry.map_err(io_err)?;
        let name = entry.file_name();
        match binlog_number(&name) {
            Name::Binlog(n) => numbered.push((n, entry.path())),
            Name::Odd => odd_names.push(name.to_string_lossy().into_owned()),
            Name::Other => {}
        }
    }
    if numbered.is_empty() {
        return Err(ImportError::NotABinlogDir {
            dir: dir.to_path_buf(),
        });
    }
    numbered.sort();
    odd_names.sort();

    let mut replay = Replay::default();
    for name in odd_names {
        replay.warnings.push(format!(
            "{}: {name}: not a name beanstalkd writes (binlog.N with N in plain decimal); \
             ignored",
            dir.display()
        ));
    }
    for pair in numbered.windows(2) {
        if let [(a, _), (b, _)] = pair {
            if b.saturating_sub(*a) > 1 {
                let missing = if b - a == 2 {
                    format!("binlog.{} is", a + 1)
                } else {
                    format!("binlog.{} to binlog.{} are", a + 1, b - 1)
                };
                replay.warnings.push(format!(
                    "{}: {missing} missing; jobs whose records were there are lost",
                    dir.display()
                ));
            }
        }
    }
    let last = numbered.len() - 1;
    for (i, (_, path)) in numbered.iter().enumerate() {
        let data = fs::read(path).map_err(|source| ImportError::Io {
            path: path.clone(),
            source,
        })?;
        replay.file(path, &data, i == last)?;
    }
    Ok(replay.finish())
}

/// Replays binlog files already in memory, in the order given, the last being the one
/// beanstalkd was writing. [`read_beanstalkd_dir`] is this over a directory's files;
/// the paths only name the files in messages.
pub fn replay_beanstalkd_files(files: &[(&Path, &[u8])]) -> Result<ImportReport, ImportError> {
    let mut replay = Replay::default();
    let last = files.len().saturating_sub(1);
    for (i, (path, data)) in files.iter().enumerate() {
        replay.file(path, data, i == last)?;
    }
    Ok(replay.finish())
}

#[derive(Debug, PartialEq, Eq)]
enum Name {
    /// `binlog.N`, N in plain decimal.
    Binlog(u64),
    /// `binlog.` and digits, but not as beanstalkd names its files (`binlog.007`).
    Odd,
    Other,
}

fn binlog_number(name: &OsStr) -> Name {
    let Some(digits) = name.to_str().and_then(|s| s.strip_prefix("binlog.")) else {
        return Name::Other;
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Name::Other;
    }
    match digits.parse::<u64>() {
        Ok(n) if n.to_string() == digits => Name::Binlog(n),
        _ => Name::Odd,
    }
}

/// Where the fields of one format version are.
#[derive(Debug, Clone, Copy)]
struct Layout {
    /// Bytes of the tube-name length.
    name_len_size: usize,
    /// Bytes of the job struct.
    job_size: usize,
    /// What one unit of the stored times is, in ns.
    time_unit_ns: i64,
}

const LAYOUT_V7: Layout = Layout {
    name_len_size: 4,
    job_size: 80,
    time_unit_ns: 1,
};

const LAYOUT_V5: Layout = Layout {
    name_len_size: 8,
    job_size: 77,
    time_unit_ns: 1_000,
};

impl Layout {
    fn for_version(version: i32) -> Option<Layout> {
        match version {
            7 => Some(LAYOUT_V7),
            5 => Some(LAYOUT_V5),
            _ => None,
        }
    }

    /// The tube-name length, widened so that every stored value fits.
    fn name_len(&self, b: &[u8]) -> i128 {
        if self.name_len_size == 8 {
            i128::from(u64_at(b, 0))
        } else {
            i128::from(u32_at(b, 0) as i32)
        }
    }

    /// A stored time or duration in ns, if it is representable.
    fn time(&self, b: &[u8], at: usize) -> Option<i64> {
        let raw = u64_at(b, at);
        if self.time_unit_ns == 1 {
            Some(raw as i64)
        } else {
            i64::try_from(raw).ok()?.checked_mul(self.time_unit_ns)
        }
    }
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    if let Some(s) = b.get(at..at.saturating_add(8)) {
        a.copy_from_slice(s);
    }
    u64::from_le_bytes(a)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    if let Some(s) = b.get(at..at.saturating_add(4)) {
        a.copy_from_slice(s);
    }
    u32::from_le_bytes(a)
}

/// A job struct as stored (times already in ns).
#[derive(Debug, Clone, Copy)]
struct RawJob {
    id: u64,
    pri: u32,
    delay_ns: i64,
    ttr_ns: i64,
    size: i32,
    created_at_ns: i64,
    deadline_at_ns: i64,
    reserves: u32,
    timeouts: u32,
    releases: u32,
    buries: u32,
    kicks: u32,
    /// `None`: deleted.
    state: Option<ImportedState>,
}

fn decode_job(b: &[u8], layout: Layout) -> Result<RawJob, String> {
    let id = u64_at(b, 0);
    if id == 0 {
        return Err("job id 0".into());
    }
    let state = match b.get(76).copied().unwrap_or(0) {
        0 => None,
        1 => Some(ImportedState::Ready),
        2 => Some(ImportedState::Reserved),
        3 => Some(ImportedState::Buried),
        4 => Some(ImportedState::Delayed),
        other => return Err(format!("job {id} has state {other}, not 0 to 4")),
    };
    let time = |at: usize, what: &str| {
        layout
            .time(b, at)
            .ok_or_else(|| format!("job {id} has a {what} too large to represent"))
    };
    let delay_ns = time(16, "delay")?;
    let ttr_ns = time(24, "time to run")?;
    let created_at_ns = time(40, "creation time")?;
    let deadline_at_ns = time(48, "deadline")?;
    if delay_ns < 0 || ttr_ns < 0 {
        return Err(format!(
            "job {id} has a negative delay or time to run ({delay_ns} ns, {ttr_ns} ns)"
        ));
    }
    Ok(RawJob {
        id,
        pri: u32_at(b, 8),
        delay_ns,
        ttr_ns,
        size: u32_at(b, 32) as i32,
        created_at_ns,
        deadline_at_ns,
        reserves: u32_at(b, 56),
        timeouts: u32_at(b, 60),
        releases: u32_at(b, 64),
        buries: u32_at(b, 68),
        kicks: u32_at(b, 72),
        state,
    })
}

fn valid_tube_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TUBE_NAME
        && name.first() != Some(&b'-')
        && name.iter().all(|c| TUBE_NAME_CHARS.contains(c))
}

/// A live job during replay.
#[derive(Debug)]
struct Entry {
    job: ImportedJob,
    /// The body size as stored, CRLF included; update records repeat it.
    stored_size: i32,
    /// Position in the output: the sequence number of the record that placed it.
    seq: u64,
}

#[derive(Debug, Default)]
struct Replay {
    jobs: HashMap<u64, Entry>,
    seq: u64,
    max_id: u64,
    /// The version of the first file that had one.
    version: Option<i32>,
    files: Vec<PathBuf>,
    warnings: Vec<String>,
}

/// One file being read.
#[derive(Debug)]
struct FileCtx<'a> {
    path: &'a Path,
    data: &'a [u8],
    /// One past the last non-zero byte: everything from here on is zeros.
    data_end: usize,
    is_last: bool,
}

/// What to do after a problem in a record.
#[derive(Debug)]
enum Flow {
    /// Read on from this offset.
    Continue(usize),
    /// The rest of the file holds nothing (a torn tail was cut).
    Stop,
}

impl FileCtx<'_> {
    fn display(&self) -> std::path::Display<'_> {
        self.path.display()
    }

    /// The part `start..end` of the record at `rec` cannot be right. If nothing but
    /// zeros follows its start (or, in the last file, its end), it is a write that was
    /// cut short: warn and stop. Otherwise the file is corrupt.
    fn bad(
        &self,
        rec: usize,
        start: usize,
        end: usize,
        what: String,
        warnings: &mut Vec<String>,
    ) -> Result<Flow, ImportError> {
        if start >= self.data_end || (self.is_last && end >= self.data_end) {
            let zeros = if start >= self.data_end {
                format!("; zeros from byte {start} on")
            } else {
                String::new()
            };
            warnings.push(format!(
                "{}: byte {rec}: incomplete record at the end of the data ({what}{zeros}), \
                 as a crash in the middle of a write leaves it; cut there",
                self.display()
            ));
            return Ok(Flow::Stop);
        }
        Err(ImportError::Corrupt {
            path: self.path.to_path_buf(),
            offset: start as u64,
            reason: format!("{what} (in the record that starts at byte {rec})"),
        })
    }

    /// The file ends inside the record at `rec`, `need` bytes short.
    fn short(
        &self,
        rec: usize,
        need: usize,
        warnings: &mut Vec<String>,
    ) -> Result<Flow, ImportError> {
        if self.is_last {
            warnings.push(format!(
                "{}: byte {rec}: the file ends {need} bytes short of the end of this record; \
                 cut there",
                self.display()
            ));
            return Ok(Flow::Stop);
        }
        Err(ImportError::Corrupt {
            path: self.path.to_path_buf(),
            offset: rec as u64,
            reason: format!(
                "the file ends {need} bytes short of the end of this record, and it is not \
                 the last file"
            ),
        })
    }

    /// Bytes `at..at + len`, or how many are missing.
    fn take(&self, at: usize, len: usize) -> Result<&[u8], usize> {
        let end = at.saturating_add(len);
        self.data
            .get(at..end)
            .ok_or_else(|| end.saturating_sub(self.data.len()))
    }
}

impl Replay {
    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn file(&mut self, path: &Path, data: &[u8], is_last: bool) -> Result<(), ImportError> {
        self.files.push(path.to_path_buf());
        let data_end = data.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
        if data_end == 0 {
            let what = if data.is_empty() {
                "is empty".to_owned()
            } else {
                format!("holds nothing but {} zero bytes", data.len())
            };
            self.warnings.push(format!(
                "{}: {what} (created, never written); skipped",
                path.display()
            ));
            return Ok(());
        }
        let Some(head) = data.get(..4) else {
            let what = format!(
                "the file is {} bytes long, too short for its version number",
                data.len()
            );
            if is_last {
                self.warnings
                    .push(format!("{}: {what}; skipped", path.display()));
                return Ok(());
            }
            return Err(ImportError::Corrupt {
                path: path.to_path_buf(),
                offset: 0,
                reason: what,
            });
        };
        let version = u32_at(head, 0) as i32;
        let Some(layout) = Layout::for_version(version) else {
            return Err(ImportError::UnsupportedVersion {
                path: path.to_path_buf(),
                version,
            });
        };
        match self.version {
            None => self.version = Some(version),
            Some(first) if first != version => self.warnings.push(format!(
                "{}: format version {version}, while earlier files have version {first}",
                path.display()
            )),
            Some(_) => {}
        }
        let ctx = FileCtx {
            path,
            data,
            data_end,
            is_last,
        };
        let mut pos = 4;
        while pos < data_end {
            match self.record(&ctx, layout, pos)? {
                Flow::Continue(next) => pos = next,
                Flow::Stop => break,
            }
        }
        Ok(())
    }

    /// Reads and applies the record at `rec`.
    fn record(&mut self, ctx: &FileCtx, layout: Layout, rec: usize) -> Result<Flow, ImportError> {
        let warnings = &mut self.warnings;
        let short = |need, w: &mut Vec<String>| ctx.short(rec, need, w);

        // Tube-name length.
        let mut pos = rec;
        let bytes = match ctx.take(pos, layout.name_len_size) {
            Ok(b) => b,
            Err(need) => return short(need, warnings),
        };
        let name_len = layout.name_len(bytes);
        let end = pos + layout.name_len_size;
        let name_len = match usize::try_from(name_len) {
            Ok(n) if n <= MAX_TUBE_NAME => n,
            _ => {
                let what = format!("tube-name length {name_len}, not 0 to {MAX_TUBE_NAME}");
                return ctx.bad(rec, pos, end, what, warnings);
            }
        };
        pos = end;

        // Tube name.
        let name = match ctx.take(pos, name_len) {
            Ok(b) => b,
            Err(need) => return short(need, warnings),
        };
        if name_len > 0 && !valid_tube_name(name) {
            let what = format!(
                "tube name \"{}\" is not one beanstalkd accepts",
                name.escape_ascii()
            );
            return ctx.bad(rec, pos, pos + name_len, what, warnings);
        }
        pos += name_len;

        // Job struct.
        let job_at = pos;
        let bytes = match ctx.take(pos, layout.job_size) {
            Ok(b) => b,
            Err(need) => return short(need, warnings),
        };
        let job_end = job_at + layout.job_size;
        let raw = match decode_job(bytes, layout) {
            Ok(raw) => raw,
            Err(what) => return ctx.bad(rec, job_at, job_end, what, warnings),
        };
        pos = job_end;
        let id = raw.id;
        self.max_id = self.max_id.max(id);

        if name_len == 0 {
            // An update record: only meaningful for a job whose full record we saw.
            // Otherwise that record was in a file beanstalkd has since deleted, because
            // the job was deleted or copied to a later file; beanstalkd ignores it too.
            let Some(entry) = self.jobs.get_mut(&id) else {
                return Ok(Flow::Continue(pos));
            };
            if raw.size != entry.stored_size {
                let what = format!(
                    "update for job {id} gives a body size of {} bytes, its full record {}",
                    raw.size, entry.stored_size
                );
                return ctx.bad(rec, job_at, job_end, what, warnings);
            }
            let Some(state) = raw.state else {
                self.jobs.remove(&id);
                return Ok(Flow::Continue(pos));
            };
            let j = &mut entry.job;
            j.pri = raw.pri;
            j.delay_ns = raw.delay_ns;
            j.ttr_ns = raw.ttr_ns;
            j.created_at_ns = raw.created_at_ns;
            j.deadline_at_ns = raw.deadline_at_ns;
            j.reserves = raw.reserves;
            j.timeouts = raw.timeouts;
            j.releases = raw.releases;
            j.buries = raw.buries;
            j.kicks = raw.kicks;
            j.state = state;
            self.seq += 1;
            entry.seq = self.seq;
            return Ok(Flow::Continue(pos));
        }

        // A full record: a put, or a migration copy of a job seen before.
        let Some(state) = raw.state else {
            let what = format!("full record for job {id} with state 0 (deleted)");
            return ctx.bad(rec, job_at, job_end, what, warnings);
        };
        let size = match usize::try_from(raw.size) {
            Ok(n) if n >= 2 => n,
            _ => {
                let what = format!(
                    "job {id} has a body size of {}, less than its CRLF",
                    raw.size
                );
                return ctx.bad(rec, job_at, job_end, what, warnings);
            }
        };
        let body_at = pos;
        let stored = match ctx.take(pos, size) {
            Ok(b) => b,
            Err(need) => return short(need, warnings),
        };
        let body_end = body_at + size;
        let Some(body) = stored.strip_suffix(b"\r\n") else {
            let what = format!("the body of job {id} does not end in CRLF");
            if body_at < ctx.data_end
                && !(ctx.is_last && body_end >= ctx.data_end)
                && stored.iter().all(|&b| b == 0)
            {
                // The struct reached the file but the body did not (a crash), then
                // beanstalkd restarted, took the zeros as the body and later copied
                // the job forward. It was never acknowledged.
                self.jobs.remove(&id);
                self.warnings.push(format!(
                    "{}: byte {rec}: job {id} has a body of zeros without its CRLF, left by \
                     a crash before the body was written; dropped",
                    ctx.display()
                ));
                return Ok(Flow::Continue(body_end));
            }
            return ctx.bad(rec, body_at, body_end, what, warnings);
        };
        if i64::from(raw.size) > DEFAULT_MAX_JOB_SIZE {
            self.warnings.push(format!(
                "{}: byte {rec}: job {id} has a {}-byte body; beanstalkd's own replay (default \
                 -z 65535, compared with the size including CRLF) refuses it and skips the \
                 rest of this file. Kept here",
                ctx.display(),
                body.len()
            ));
        }
        let job = ImportedJob {
            id,
            tube: name.to_vec(),
            pri: raw.pri,
            delay_ns: raw.delay_ns,
            ttr_ns: raw.ttr_ns,
            body: body.to_vec(),
            created_at_ns: raw.created_at_ns,
            deadline_at_ns: raw.deadline_at_ns,
            reserves: raw.reserves,
            timeouts: raw.timeouts,
            releases: raw.releases,
            buries: raw.buries,
            kicks: raw.kicks,
            state,
        };
        let seq = match self.jobs.get(&id) {
            // A migration copy changes nothing by being written; the job keeps its
            // place (its bury order, say) unless its state changed unjournaled.
            Some(old) if old.job.state == state => old.seq,
            _ => self.next_seq(),
        };
        self.jobs.insert(
            id,
            Entry {
                job,
                stored_size: raw.size,
                seq,
            },
        );
        Ok(Flow::Continue(body_end))
    }

    fn finish(self) -> ImportReport {
        let mut live: Vec<Entry> = self.jobs.into_values().collect();
        live.sort_by_key(|e| e.seq);
        ImportReport {
            version: self.version.unwrap_or(0),
            files: self.files,
            jobs: live.into_iter().map(|e| e.job).collect(),
            max_id: self.max_id,
            warnings: self.warnings,
        }
    }
}
