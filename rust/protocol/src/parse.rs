//! The command-line parser: one line (without its CRLF) to a [`Command`] or the
//! [`ProtocolError`] beanstalkd answers it with, and [`line_end`], where that line
//! ends in the input. This is the server's per-command path. It imports only the
//! types of the crate root.
//!
//! It reproduces beanstalkd 1.13 exactly, quirks included, because clients in the
//! wild depend on them:
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

use crate::{Command, Op, ProtocolError, MAX_LINE, MAX_TUBE_NAME};

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

/// Where the command line at the start of `input` ends (the index of its CR), as
/// beanstalkd finds it: only the first CR within the first [`MAX_LINE`] buffered
/// bytes counts, and only if an LF follows it. A line with a lone CR therefore has
/// no end until [`MAX_LINE`] bytes have arrived and are thrown away as over-long.
///
/// The server frames its input with this, and so does anything that must cut a
/// client's byte stream into commands exactly where the server will.
pub fn line_end(input: &[u8]) -> Option<usize> {
    let window = &input[..input.len().min(MAX_LINE)];
    let searchable = window.len().checked_sub(1)?;
    let cr = memchr::memchr(b'\r', &window[..searchable])?;
    (window[cr + 1] == b'\n').then_some(cr)
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
        body: bytes,
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
