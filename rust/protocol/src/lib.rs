//! The beanstalkd command language, the one definition the server and the client
//! share: limits, [`Command`] (every command and its arguments), the [`Op`] counted
//! for each, the fixed reply words, the parser ([`parse()`], the server's per-command
//! path) and the encoding ([`Command::encode`], what the client writes).
//!
//! * [`parse`](mod@parse): a command line to a [`Command`], beanstalkd's quirks
//!   included, and where a line ends in the input ([`line_end`]);
//! * [`encode`](mod@encode): a [`Command`] to its line (and a put's body).
//!
//! This crate imports nothing of beanpole's: not the engine's store or server, not
//! the client, so the client does not link the server to speak its language.

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

/// One command and its arguments. Tube names borrow from the caller.
///
/// `B` is what follows a `put` line: as parsed by the server, the body's announced
/// length (`u32`, the default); as sent by a client, the body itself (`&[u8]`).
/// The two are one type, so a command the client can write is one the server's
/// parser names the same way, field for field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command<'a, B = u32> {
    /// `put <pri> <delay> <ttr> <bytes>`; the body follows the line.
    Put {
        pri: u32,
        delay: u32,
        ttr: u32,
        body: B,
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

impl<B> Command<'_, B> {
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

pub mod encode;
pub mod parse;

pub use encode::{Body, EncodeError};
pub use parse::{line_end, parse, valid_tube_name};

#[cfg(test)]
mod tests;
