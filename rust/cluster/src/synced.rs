//! What a node has made durable, told to the fault harness so that it can
//! simulate a power loss (`bench/cluster_chaos.py`'s `power` fault: a node's
//! files cut back to what was last fsynced before it restarts).
//!
//! Off unless the environment variable [`ENV`] names a file when the node's
//! storage first syncs something (read once per process); off, each call below
//! is one check of an initialized `OnceLock`. On, every fsync of the Raft log,
//! the vote and purged files, the snapshot and the directory marker is followed
//! by a line appended to that file, written before the fsync's outcome is
//! reported to anyone:
//!
//! ```text
//! F <TAB> len <TAB> path              the first len bytes of path are on disk
//! D <TAB> dir <TAB> name <TAB> ...    dir's entries, listed before its fsync, are on disk
//! ```
//!
//! A file's last `F` line is its durable length (a file with none was never
//! synced); a directory's last `D` line lists the entries a power loss keeps.
//! A node killed between an fsync and its line only makes the harness cut
//! more than the disk would have lost, never less: nothing was reported
//! durable on the strength of that fsync yet.
//!
//! A second knob, [`STALL_ENV`], holds the log's fsyncs back (a slow disk), so
//! that a power loss more often finds appends written and not yet synced.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::sync::{Mutex, OnceLock};

/// The environment variable naming the file the lines go to.
pub const ENV: &str = "BEANPOLE_SYNC_RECORD";

/// The environment variable that holds each of the Raft log's group-commit
/// fsyncs back this many milliseconds from the log's opening on (the
/// `LogStore::sync_stall` knob, set from outside the process): written and
/// not yet synced appends stay so for longer, where a simulated power loss
/// finds them. Unset or not a number: 0.
pub const STALL_ENV: &str = "BEANPOLE_SYNC_STALL_MS";

/// The stall [`STALL_ENV`] asks for, read when a log is opened.
pub fn stall_at_open() -> u64 {
    std::env::var(STALL_ENV)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The record file, if any. A std mutex: every syncing thread (the log
/// writer, the snapshot task, the marker's writer) appends whole lines, held
/// only for one `write` and never across an await.
static RECORD: OnceLock<Option<Mutex<File>>> = OnceLock::new();

fn record() -> Option<&'static Mutex<File>> {
    RECORD
        .get_or_init(|| {
            let path = std::env::var_os(ENV).filter(|p| !p.is_empty())?;
            let file = OpenOptions::new().create(true).append(true).open(path);
            file.ok().map(Mutex::new)
        })
        .as_ref()
}

fn append(record: &Mutex<File>, line: &str) {
    let mut file = record.lock().unwrap_or_else(|e| e.into_inner());
    // One write of the whole line (O_APPEND); a failure only loses a record,
    // which makes the harness cut more, never less.
    let _ = file.write_all(line.as_bytes());
}

/// Whether the lines are being written (callers skip building them if not).
pub fn on() -> bool {
    record().is_some()
}

/// Note that the first `len` bytes of `path` have just been synced.
pub fn file(path: &Path, len: u64) {
    if let Some(record) = record() {
        append(record, &format!("F\t{len}\t{}\n", path.display()));
    }
}

/// Fsync the directory `dir` (its entries: files created, renamed or removed
/// in it), noting the entries it held just before.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    let Some(record) = record() else {
        return File::open(dir)?.sync_all();
    };
    let mut line = format!("D\t{}", dir.display());
    for entry in std::fs::read_dir(dir)? {
        line.push('\t');
        line.push_str(&entry?.file_name().to_string_lossy());
    }
    line.push('\n');
    File::open(dir)?.sync_all()?;
    append(record, &line);
    Ok(())
}
