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
//! * A job id of 2^63 or more is an error like any other struct that does not read
//!   (beanstalkd would take it): ids count up from 1, so only damage makes one, and
//!   a beanpole log holds only smaller ids
//!   ([`ID_LIMIT`](crate::wal::format::ID_LIMIT)).
//! * An incomplete record at the end of a file's data is cut with a warning: one whose
//!   unwritten parts are zeros to the end of the file (in any file, since the file
//!   being written is often not the newest, and a restart leaves it behind too), and,
//!   in the last file only, one the file ends inside or whose non-zero bytes stop
//!   inside the part that fails to read. Such a record was never acknowledged to a
//!   client. Anything else that does not read as beanstalkd's format is an error
//!   naming the file and byte offset; beanstalkd would print a warning, skip the
//!   rest of that file and carry on. An all-zero or empty file is skipped with a
//!   warning, and so is a last file too short for its version.

mod record;
mod replay;

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use replay::Replay;

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
    /// Index in [`ImportReport::files`] of the file holding the job's latest full
    /// record (its body), so a reader can give each file its own jobs.
    pub file: usize,
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
