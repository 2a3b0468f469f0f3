//! The beanstalkd command language: limits, the command-line parser and the
//! fixed reply words.
//!
//! The parser reproduces beanstalkd 1.13 exactly, quirks included, because clients
//! in the wild depend on them:
//!
//! * command names are matched by prefix, in beanstalkd's order, so `reserved` is a
//!   malformed `reserve` (BAD_FORMAT) while `put` alone is an unknown command;
//! * numbers may be preceded by any number of spaces but nothing may follow the last
//!   one (`delete 1 ` is BAD_FORMAT), except where beanstalkd reads them loosely:
//!   `kick` (C `strtoul`: leading white space, a sign, trailing junk) and
//!   `reserve-with-timeout` (trailing junk ignored, at most 2^31-1);
//! * a tube name is 1-200 bytes of `A-Za-z0-9-+/;.$_()` not starting with `-`, and is
//!   everything after the single space that ends the command word.
//!
//! Parsing never allocates and never panics, whatever the bytes.

use thiserror::Error;

/// Longest command line beanstalkd accepts, CRLF included.
pub const MAX_LINE: usize = 224;
/// Longest tube name.
pub const MAX_TUBE_NAME: usize = 200;
/// Default `-z`: the largest job body accepted.
pub const DEFAULT_MAX_JOB_SIZE: u32 = 65_535;
/// `-z` is capped at 1 GiB, as in beanstalkd.
pub const MAX_JOB_SIZE_LIMIT: u32 = 1 << 30;
/// Jobs with a priority below this are "urgent" in the stats.
pub const URGENT_THRESHOLD: u32 = 1024;

/// Every command, as counted in the stats. `ReserveJob` and `KickJob` are counted but,
/// as in beanstalkd, have no `cmd-*` line of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Op {
    Put,
    Peek,
    PeekReady,
    PeekDelayed,
    PeekBuried,
    Reserve,
    ReserveWithTimeout,
    ReserveJob,
    Delete,
    Release,
    Bury,
    Kick,
    KickJob,
    Touch,
    Stats,
    StatsJob,
    StatsTube,
    Use,
    Watch,
    Ignore,
    ListTubes,
    ListTubeUsed,
    ListTubesWatched,
    PauseTube,
    Quit,
}

impl Op {
    /// Number of distinct operations (size of a counter array).
    pub const COUNT: usize = Op::Quit as usize + 1;

    /// Index into a counter array.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// One parsed command line. Names borrow from the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command<'a> {
    /// `put <pri> <delay> <ttr> <bytes>`; the body follows.
    Put {
        pri: u32,
        delay: u32,
        ttr: u32,
        bytes: u32,
    },
    Use(&'a [u8]),
    Reserve,
    ReserveWithTimeout(u32),
    ReserveJob(u64),
    Delete(u64),
    Release {
        id: u64,
        pri: u32,
        delay: u32,
    },
    Bury {
        id: u64,
        pri: u32,
    },
    Touch(u64),
    Watch(&'a [u8]),
    Ignore(&'a [u8]),
    Peek(u64),
    PeekReady,
    PeekDelayed,
    PeekBuried,
    Kick(u32),
    KickJob(u64),
    StatsJob(u64),
    StatsTube(&'a [u8]),
    Stats,
    ListTubes,
    ListTubeUsed,
    ListTubesWatched,
    PauseTube {
        name: &'a [u8],
        delay: u32,
    },
    Quit,
}

impl Command<'_> {
    /// The counter this command increments.
    pub fn op(&self) -> Op {
        match self {
            Command::Put { .. } => Op::Put,
            Command::Use(_) => Op::Use,
            Command::Reserve => Op::Reserve,
            Command::ReserveWithTimeout(_) => Op::ReserveWithTimeout,
            Command::ReserveJob(_) => Op::ReserveJob,
            Command::Delete(_) => Op::Delete,
            Command::Release { .. } => Op::Release,
            Command::Bury { .. } => Op::Bury,
            Command::Touch(_) => Op::Touch,
            Command::Watch(_) => Op::Watch,
            Command::Ignore(_) => Op::Ignore,
            Command::Peek(_) => Op::Peek,
            Command::PeekReady => Op::PeekReady,
            Command::PeekDelayed => Op::PeekDelayed,
            Command::PeekBuried => Op::PeekBuried,
            Command::Kick(_) => Op::Kick,
            Command::KickJob(_) => Op::KickJob,
            Command::StatsJob(_) => Op::StatsJob,
            Command::StatsTube(_) => Op::StatsTube,
            Command::Stats => Op::Stats,
            Command::ListTubes => Op::ListTubes,
            Command::ListTubeUsed => Op::ListTubeUsed,
            Command::ListTubesWatched => Op::ListTubesWatched,
            Command::PauseTube { .. } => Op::PauseTube,
            Command::Quit => Op::Quit,
        }
    }
}

/// A command line the server refuses. Each variant is exactly one wire reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ProtocolError {
    /// Malformed arguments; the command is not counted.
    #[error("BAD_FORMAT")]
    BadFormat,
    /// Malformed, but beanstalkd has already counted the command by the time it
    /// notices (`put` with trailing junk after a valid size, `pause-tube` with an
    /// invalid name). Same reply as [`ProtocolError::BadFormat`].
    #[error("BAD_FORMAT")]
    BadFormatCounted(Op),
    #[error("UNKNOWN_COMMAND")]
    UnknownCommand,
    /// `put` announced a body over the size limit: `discard` bytes (body and CRLF)
    /// are read and thrown away before the reply. The put is counted.
    #[error("JOB_TOO_BIG")]
    JobTooBig { discard: u64 },
    /// The body did not end with CRLF.
    #[error("EXPECTED_CRLF")]
    ExpectedCrlf,
}

impl ProtocolError {
    /// The reply line, CRLF included.
    pub fn reply(&self) -> &'static [u8] {
        match self {
            ProtocolError::BadFormat | ProtocolError::BadFormatCounted(_) => BAD_FORMAT,
            ProtocolError::UnknownCommand => UNKNOWN_COMMAND,
            ProtocolError::JobTooBig { .. } => JOB_TOO_BIG,
            ProtocolError::ExpectedCrlf => EXPECTED_CRLF,
        }
    }
}

pub const BAD_FORMAT: &[u8] = b"BAD_FORMAT\r\n";
pub const UNKNOWN_COMMAND: &[u8] = b"UNKNOWN_COMMAND\r\n";
pub const JOB_TOO_BIG: &[u8] = b"JOB_TOO_BIG\r\n";
pub const EXPECTED_CRLF: &[u8] = b"EXPECTED_CRLF\r\n";
pub const OUT_OF_MEMORY: &[u8] = b"OUT_OF_MEMORY\r\n";
pub const DRAINING: &[u8] = b"DRAINING\r\n";
pub const NOT_FOUND: &[u8] = b"NOT_FOUND\r\n";
pub const DELETED: &[u8] = b"DELETED\r\n";
pub const RELEASED: &[u8] = b"RELEASED\r\n";
pub const BURIED: &[u8] = b"BURIED\r\n";
pub const TOUCHED: &[u8] = b"TOUCHED\r\n";
pub const KICKED: &[u8] = b"KICKED\r\n";
pub const NOT_IGNORED: &[u8] = b"NOT_IGNORED\r\n";
pub const TIMED_OUT: &[u8] = b"TIMED_OUT\r\n";
pub const DEADLINE_SOON: &[u8] = b"DEADLINE_SOON\r\n";
pub const PAUSED: &[u8] = b"PAUSED\r\n";

/// Parse one command line (without its CRLF).
///
/// `max_job_size` decides JOB_TOO_BIG, which beanstalkd checks before it looks for
/// trailing junk after a put's size.
pub fn parse(line: &[u8], max_job_size: u32) -> Result<Command<'_>, ProtocolError> {
    // A NUL inside the line makes beanstalkd's C string shorter than the line.
    if memchr::memchr(0, line).is_some() {
        return Err(ProtocolError::BadFormat);
    }
    // The order of these tests is beanstalkd's: the first matching prefix wins.
    if let Some(rest) = line.strip_prefix(b"put ") {
        return parse_put(rest, max_job_size);
    }
    if let Some(rest) = line.strip_prefix(b"peek ") {
        return id_only(rest).map(Command::Peek);
    }
    if line.starts_with(b"peek-ready") {
        return exact(line, b"peek-ready", Command::PeekReady);
    }
    if line.starts_with(b"peek-delayed") {
        return exact(line, b"peek-delayed", Command::PeekDelayed);
    }
    if line.starts_with(b"peek-buried") {
        return exact(line, b"peek-buried", Command::PeekBuried);
    }
    if let Some(rest) = line.strip_prefix(b"reserve-with-timeout ") {
        let (secs, _junk) = read_u32(rest)?;
        if secs > i32::MAX as u32 {
            return Err(ProtocolError::BadFormat);
        }
        return Ok(Command::ReserveWithTimeout(secs));
    }
    if let Some(rest) = line.strip_prefix(b"reserve-job ") {
        return id_only(rest).map(Command::ReserveJob);
    }
    if line.starts_with(b"reserve") {
        return exact(line, b"reserve", Command::Reserve);
    }
    if let Some(rest) = line.strip_prefix(b"delete ") {
        return id_only(rest).map(Command::Delete);
    }
    if let Some(rest) = line.strip_prefix(b"release ") {
        let (id, rest) = read_u64(rest)?;
        let (pri, rest) = read_u32(rest)?;
        let delay = read_u32_all(rest)?;
        return Ok(Command::Release { id, pri, delay });
    }
    if let Some(rest) = line.strip_prefix(b"bury ") {
        let (id, rest) = read_u64(rest)?;
        let pri = read_u32_all(rest)?;
        return Ok(Command::Bury { id, pri });
    }
    if let Some(rest) = line.strip_prefix(b"kick ") {
        return strtoul(rest).map(Command::Kick);
    }
    if let Some(rest) = line.strip_prefix(b"kick-job ") {
        return id_only(rest).map(Command::KickJob);
    }
    if let Some(rest) = line.strip_prefix(b"touch ") {
        return id_only(rest).map(Command::Touch);
    }
    if let Some(rest) = line.strip_prefix(b"stats-job ") {
        return id_only(rest).map(Command::StatsJob);
    }
    if let Some(rest) = line.strip_prefix(b"stats-tube ") {
        return tube_name(rest).map(Command::StatsTube);
    }
    if line.starts_with(b"stats") {
        return exact(line, b"stats", Command::Stats);
    }
    if let Some(rest) = line.strip_prefix(b"use ") {
        return tube_name(rest).map(Command::Use);
    }
    if let Some(rest) = line.strip_prefix(b"watch ") {
        return tube_name(rest).map(Command::Watch);
    }
    if let Some(rest) = line.strip_prefix(b"ignore ") {
        return tube_name(rest).map(Command::Ignore);
    }
    if line.starts_with(b"list-tubes-watched") {
        return exact(line, b"list-tubes-watched", Command::ListTubesWatched);
    }
    if line.starts_with(b"list-tube-used") {
        return exact(line, b"list-tube-used", Command::ListTubeUsed);
    }
    if line.starts_with(b"list-tubes") {
        return exact(line, b"list-tubes", Command::ListTubes);
    }
    if line.starts_with(b"quit") {
        return Ok(Command::Quit);
    }
    if let Some(rest) = line.strip_prefix(b"pause-tube") {
        return parse_pause_tube(rest);
    }
    Err(ProtocolError::UnknownCommand)
}

fn parse_put(rest: &[u8], max_job_size: u32) -> Result<Command<'_>, ProtocolError> {
    let (pri, rest) = read_u32(rest)?;
    let (delay, rest) = read_u32(rest)?;
    let (ttr, rest) = read_u32(rest)?;
    let (bytes, rest) = read_u32(rest)?;
    if bytes > max_job_size {
        return Err(ProtocolError::JobTooBig {
            discard: u64::from(bytes) + 2,
        });
    }
    if !rest.is_empty() {
        return Err(ProtocolError::BadFormatCounted(Op::Put));
    }
    Ok(Command::Put {
        pri,
        delay,
        ttr: ttr.max(1),
        bytes,
    })
}

fn parse_pause_tube(rest: &[u8]) -> Result<Command<'_>, ProtocolError> {
    // beanstalkd reads the longest run of name characters after any spaces, then a
    // number that must end the line; only then does it check the name's rules.
    let start = skip_spaces(rest);
    let name_len = start.iter().take_while(|&&b| is_name_byte(b)).count();
    if name_len == 0 {
        return Err(ProtocolError::BadFormat);
    }
    let (name, after) = start.split_at(name_len);
    let delay = read_u32_all(after)?;
    if !valid_tube_name(name) {
        return Err(ProtocolError::BadFormatCounted(Op::PauseTube));
    }
    Ok(Command::PauseTube { name, delay })
}

/// The line must be exactly `word`: any trailing byte is BAD_FORMAT.
fn exact<'a>(line: &[u8], word: &[u8], cmd: Command<'a>) -> Result<Command<'a>, ProtocolError> {
    if line.len() == word.len() {
        Ok(cmd)
    } else {
        Err(ProtocolError::BadFormat)
    }
}

fn tube_name(name: &[u8]) -> Result<&[u8], ProtocolError> {
    if valid_tube_name(name) {
        Ok(name)
    } else {
        Err(ProtocolError::BadFormat)
    }
}

/// The tube-name rules of `use`, `watch`, `ignore`, `stats-tube` and `pause-tube`.
pub fn valid_tube_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TUBE_NAME
        && name[0] != b'-'
        && name.iter().all(|&b| is_name_byte(b))
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'-' | b'+' | b'/' | b';' | b'.' | b'$' | b'_' | b'(' | b')'
        )
}

fn skip_spaces(s: &[u8]) -> &[u8] {
    let n = s.iter().take_while(|&&b| b == b' ').count();
    &s[n..]
}

/// Spaces, then at least one digit; returns the value and the rest (which starts at
/// the first non-digit). Overflow of u64 is BAD_FORMAT.
fn read_u64(s: &[u8]) -> Result<(u64, &[u8]), ProtocolError> {
    let s = skip_spaces(s);
    let digits = s.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return Err(ProtocolError::BadFormat);
    }
    let mut value: u64 = 0;
    for &b in &s[..digits] {
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(b - b'0')))
            .ok_or(ProtocolError::BadFormat)?;
    }
    Ok((value, &s[digits..]))
}

fn read_u32(s: &[u8]) -> Result<(u32, &[u8]), ProtocolError> {
    let (v, rest) = read_u64(s)?;
    let v = u32::try_from(v).map_err(|_| ProtocolError::BadFormat)?;
    Ok((v, rest))
}

/// A u64 that must end the line.
fn id_only(s: &[u8]) -> Result<u64, ProtocolError> {
    match read_u64(s)? {
        (v, []) => Ok(v),
        _ => Err(ProtocolError::BadFormat),
    }
}

/// A u32 that must end the line.
fn read_u32_all(s: &[u8]) -> Result<u32, ProtocolError> {
    match read_u32(s)? {
        (v, []) => Ok(v),
        _ => Err(ProtocolError::BadFormat),
    }
}

/// `kick`'s bound, read the way C's `strtoul` reads it and then truncated to 32
/// bits: leading white space, an optional sign (a minus negates modulo 2^64),
/// digits, and anything after them ignored. No digits, or a value past 2^64-1, is
/// BAD_FORMAT.
fn strtoul(s: &[u8]) -> Result<u32, ProtocolError> {
    let ws = s
        .iter()
        .take_while(|&&b| matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r'))
        .count();
    let mut s = &s[ws..];
    let mut negative = false;
    if let Some((&sign, rest)) = s.split_first() {
        if sign == b'+' || sign == b'-' {
            negative = sign == b'-';
            s = rest;
        }
    }
    let (value, _junk) = match s.first() {
        Some(b) if b.is_ascii_digit() => read_u64(s)?,
        _ => return Err(ProtocolError::BadFormat),
    };
    let value = if negative {
        value.wrapping_neg()
    } else {
        value
    };
    // Truncation to the C `unsigned int` beanstalkd stores the count in.
    Ok(value as u32)
}

#[cfg(test)]
mod tests;
