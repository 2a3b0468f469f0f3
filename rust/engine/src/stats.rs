//! Counters and the exact YAML of `stats`, `stats-tube`, `stats-job` and the
//! `list-*` commands.
//!
//! Key order and formatting are beanstalkd 1.13's: `hostname`, `os`, `platform`,
//! `version` and tube names are double-quoted (and, as there, not escaped: tube
//! names cannot hold a quote), rusage has six decimals, `draining` is a bool.
//! The same values reach Python as ordered `(key, value)` pairs.

use std::io::Write;

use crate::protocol::Op;

/// The queue's part of `stats`.
#[derive(Debug, Clone)]
pub struct ServerCounts {
    pub urgent: u64,
    pub ready: u64,
    pub reserved: u64,
    pub delayed: u64,
    pub buried: u64,
    pub ops: [u64; Op::COUNT],
    pub job_timeouts: u64,
    pub total_jobs: u64,
    pub max_job_size: u64,
    pub current_tubes: u64,
    pub current_connections: u64,
    pub current_producers: u64,
    pub current_workers: u64,
    pub current_waiting: u64,
    pub total_connections: u64,
    pub draining: bool,
}

/// The process's part of `stats`.
#[derive(Debug, Clone, Default)]
pub struct ProcessInfo {
    pub pid: u32,
    pub version: String,
    /// User and system CPU time, as (seconds, microseconds).
    pub rusage_utime: (i64, i64),
    pub rusage_stime: (i64, i64),
    pub uptime: u64,
    pub binlog_oldest_index: u64,
    pub binlog_current_index: u64,
    pub binlog_records_migrated: u64,
    pub binlog_records_written: u64,
    pub binlog_max_size: u64,
    /// Random per-process id, 16 hex digits.
    pub id: String,
    pub hostname: String,
    pub os: String,
    pub platform: String,
}

#[derive(Debug, Clone)]
pub struct TubeStats {
    pub name: Vec<u8>,
    pub urgent: u64,
    pub ready: u64,
    pub reserved: u64,
    pub delayed: u64,
    pub buried: u64,
    pub total_jobs: u64,
    pub using: u64,
    pub watching: u64,
    pub waiting: u64,
    pub cmd_delete: u64,
    pub cmd_pause_tube: u64,
    /// Seconds.
    pub pause: u64,
    pub pause_time_left: u64,
}

#[derive(Debug, Clone)]
pub struct JobStats {
    pub id: u64,
    pub tube: Vec<u8>,
    pub state: &'static str,
    pub pri: u32,
    pub age: u64,
    pub delay: u64,
    pub ttr: u64,
    pub time_left: i64,
    pub file: u64,
    pub reserves: u32,
    pub timeouts: u32,
    pub releases: u32,
    pub buries: u32,
    pub kicks: u32,
}

/// One stats value, typed for Python and formatted for YAML.
#[derive(Debug, Clone, PartialEq)]
pub enum StatValue {
    Int(u64),
    Signed(i64),
    /// Printed in double quotes.
    Quoted(String),
    /// Printed as is.
    Bare(String),
    Bool(bool),
    /// (seconds, microseconds), printed as `S.UUUUUU`.
    Time(i64, i64),
}

impl StatValue {
    fn write(&self, out: &mut Vec<u8>) {
        // Writing to a Vec cannot fail.
        let _ = match self {
            StatValue::Int(v) => write!(out, "{v}"),
            StatValue::Signed(v) => write!(out, "{v}"),
            StatValue::Quoted(s) => write!(out, "\"{s}\""),
            StatValue::Bare(s) => write!(out, "{s}"),
            StatValue::Bool(b) => write!(out, "{b}"),
            StatValue::Time(s, us) => write!(out, "{s}.{us:06}"),
        };
    }
}

/// `stats`, as ordered pairs.
pub fn server_pairs(c: &ServerCounts, p: &ProcessInfo) -> Vec<(&'static str, StatValue)> {
    use StatValue::{Bare, Bool, Int, Quoted, Time};
    let op = |o: Op| Int(c.ops[o.index()]);
    vec![
        ("current-jobs-urgent", Int(c.urgent)),
        ("current-jobs-ready", Int(c.ready)),
        ("current-jobs-reserved", Int(c.reserved)),
        ("current-jobs-delayed", Int(c.delayed)),
        ("current-jobs-buried", Int(c.buried)),
        ("cmd-put", op(Op::Put)),
        ("cmd-peek", op(Op::Peek)),
        ("cmd-peek-ready", op(Op::PeekReady)),
        ("cmd-peek-delayed", op(Op::PeekDelayed)),
        ("cmd-peek-buried", op(Op::PeekBuried)),
        ("cmd-reserve", op(Op::Reserve)),
        ("cmd-reserve-with-timeout", op(Op::ReserveWithTimeout)),
        ("cmd-delete", op(Op::Delete)),
        ("cmd-release", op(Op::Release)),
        ("cmd-use", op(Op::Use)),
        ("cmd-watch", op(Op::Watch)),
        ("cmd-ignore", op(Op::Ignore)),
        ("cmd-bury", op(Op::Bury)),
        ("cmd-kick", op(Op::Kick)),
        ("cmd-touch", op(Op::Touch)),
        ("cmd-stats", op(Op::Stats)),
        ("cmd-stats-job", op(Op::StatsJob)),
        ("cmd-stats-tube", op(Op::StatsTube)),
        ("cmd-list-tubes", op(Op::ListTubes)),
        ("cmd-list-tube-used", op(Op::ListTubeUsed)),
        ("cmd-list-tubes-watched", op(Op::ListTubesWatched)),
        ("cmd-pause-tube", op(Op::PauseTube)),
        ("job-timeouts", Int(c.job_timeouts)),
        ("total-jobs", Int(c.total_jobs)),
        ("max-job-size", Int(c.max_job_size)),
        ("current-tubes", Int(c.current_tubes)),
        ("current-connections", Int(c.current_connections)),
        ("current-producers", Int(c.current_producers)),
        ("current-workers", Int(c.current_workers)),
        ("current-waiting", Int(c.current_waiting)),
        ("total-connections", Int(c.total_connections)),
        ("pid", Int(u64::from(p.pid))),
        ("version", Quoted(p.version.clone())),
        ("rusage-utime", Time(p.rusage_utime.0, p.rusage_utime.1)),
        ("rusage-stime", Time(p.rusage_stime.0, p.rusage_stime.1)),
        ("uptime", Int(p.uptime)),
        ("binlog-oldest-index", Int(p.binlog_oldest_index)),
        ("binlog-current-index", Int(p.binlog_current_index)),
        ("binlog-records-migrated", Int(p.binlog_records_migrated)),
        ("binlog-records-written", Int(p.binlog_records_written)),
        ("binlog-max-size", Int(p.binlog_max_size)),
        ("draining", Bool(c.draining)),
        ("id", Bare(p.id.clone())),
        ("hostname", Quoted(p.hostname.clone())),
        ("os", Quoted(p.os.clone())),
        ("platform", Quoted(p.platform.clone())),
    ]
}

/// `stats-tube`, as ordered pairs.
pub fn tube_pairs(t: &TubeStats) -> Vec<(&'static str, StatValue)> {
    use StatValue::{Int, Quoted};
    vec![
        (
            "name",
            Quoted(String::from_utf8_lossy(&t.name).into_owned()),
        ),
        ("current-jobs-urgent", Int(t.urgent)),
        ("current-jobs-ready", Int(t.ready)),
        ("current-jobs-reserved", Int(t.reserved)),
        ("current-jobs-delayed", Int(t.delayed)),
        ("current-jobs-buried", Int(t.buried)),
        ("total-jobs", Int(t.total_jobs)),
        ("current-using", Int(t.using)),
        ("current-watching", Int(t.watching)),
        ("current-waiting", Int(t.waiting)),
        ("cmd-delete", Int(t.cmd_delete)),
        ("cmd-pause-tube", Int(t.cmd_pause_tube)),
        ("pause", Int(t.pause)),
        ("pause-time-left", Int(t.pause_time_left)),
    ]
}

/// `stats-job`, as ordered pairs.
pub fn job_pairs(j: &JobStats) -> Vec<(&'static str, StatValue)> {
    use StatValue::{Bare, Int, Quoted, Signed};
    vec![
        ("id", Int(j.id)),
        (
            "tube",
            Quoted(String::from_utf8_lossy(&j.tube).into_owned()),
        ),
        ("state", Bare(j.state.to_owned())),
        ("pri", Int(u64::from(j.pri))),
        ("age", Int(j.age)),
        ("delay", Int(j.delay)),
        ("ttr", Int(j.ttr)),
        ("time-left", Signed(j.time_left)),
        ("file", Int(j.file)),
        ("reserves", Int(u64::from(j.reserves))),
        ("timeouts", Int(u64::from(j.timeouts))),
        ("releases", Int(u64::from(j.releases))),
        ("buries", Int(u64::from(j.buries))),
        ("kicks", Int(u64::from(j.kicks))),
    ]
}

/// Append `OK <n>\r\n---\n<key: value\n>...\r\n` for a stats body.
pub fn write_yaml(out: &mut Vec<u8>, pairs: &[(&'static str, StatValue)]) {
    let mut body = Vec::with_capacity(1024);
    body.extend_from_slice(b"---\n");
    for (key, value) in pairs {
        body.extend_from_slice(key.as_bytes());
        body.extend_from_slice(b": ");
        value.write(&mut body);
        body.push(b'\n');
    }
    write_ok(out, &body);
}

/// Append `OK <n>\r\n---\n- name\n...\r\n` for list-tubes and list-tubes-watched.
pub fn write_list(out: &mut Vec<u8>, names: &[&[u8]]) {
    let mut body = Vec::with_capacity(8 + names.iter().map(|n| n.len() + 3).sum::<usize>());
    body.extend_from_slice(b"---\n");
    for name in names {
        body.extend_from_slice(b"- ");
        body.extend_from_slice(name);
        body.push(b'\n');
    }
    write_ok(out, &body);
}

fn write_ok(out: &mut Vec<u8>, body: &[u8]) {
    let _ = write!(out, "OK {}\r\n", body.len());
    out.extend_from_slice(body);
    out.extend_from_slice(b"\r\n");
}

/// The process-wide facts of `stats` that do not come from the queue.
pub mod process {
    use std::ffi::CStr;

    /// This process's user and system CPU time.
    pub fn rusage() -> ((i64, i64), (i64, i64)) {
        // SAFETY: getrusage only writes into the struct we pass; all-zero bytes are
        // a valid `rusage`.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `ru` is a valid, writable rusage for the duration of the call.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
        if rc != 0 {
            return ((0, 0), (0, 0));
        }
        (
            (ru.ru_utime.tv_sec, ru.ru_utime.tv_usec),
            (ru.ru_stime.tv_sec, ru.ru_stime.tv_usec),
        )
    }

    /// (hostname, os version string, machine), as `uname` gives them.
    pub fn uname() -> (String, String, String) {
        // SAFETY: uname fills the struct we pass; zeroed bytes are a valid utsname.
        let mut u: libc::utsname = unsafe { std::mem::zeroed() };
        // SAFETY: `u` is a valid, writable utsname for the duration of the call.
        if unsafe { libc::uname(&mut u) } != 0 {
            return (String::new(), String::new(), String::new());
        }
        let field = |f: &[libc::c_char]| {
            // SAFETY: uname NUL-terminates every field within its array.
            unsafe { CStr::from_ptr(f.as_ptr()) }
                .to_string_lossy()
                .into_owned()
        };
        (field(&u.nodename), field(&u.version), field(&u.machine))
    }

    /// 8 random bytes as 16 hex digits, from the kernel's random source.
    pub fn instance_id() -> String {
        let mut bytes = [0u8; 8];
        let filled = std::fs::File::open("/dev/urandom")
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes));
        if filled.is_err() {
            // Fall back to something that still differs between processes.
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
            bytes = (t ^ u64::from(std::process::id()).rotate_left(32)).to_le_bytes();
        }
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}
