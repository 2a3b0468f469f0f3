//! The encoding: a [`Command`] to the bytes a client writes (its line, CRLF, and for
//! a put the body and CRLF). Each command's word is named once, in
//! [`Command::word`]; the tests below hold every encoded command to the parser, so
//! the words, the argument order and the numbers' form are the parser's. Imports only
//! the crate root.

use thiserror::Error;

use crate::Command;

/// What follows a `put` line, as far as writing the command goes.
pub trait Body: Copy {
    /// The length the line announces.
    fn announced(self) -> u64;
    /// Append what follows the line: the body and its CRLF, or nothing when only its
    /// length is known (a parsed line).
    fn append_to(self, buf: &mut Vec<u8>);
}

/// A parsed put knows its body's length only: the line is all there is to write.
impl Body for u32 {
    fn announced(self) -> u64 {
        u64::from(self)
    }
    fn append_to(self, _buf: &mut Vec<u8>) {}
}

/// A client's put carries its body.
impl Body for &[u8] {
    fn announced(self) -> u64 {
        self.len() as u64
    }
    fn append_to(self, buf: &mut Vec<u8>) {
        buf.extend_from_slice(self);
        buf.extend_from_slice(b"\r\n");
    }
}

/// A command that cannot be written as one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// The tube name holds CR or LF, which would end the line early and send the
    /// rest as another command.
    #[error("a tube name cannot contain CR or LF")]
    LineBreakInName,
}

/// Append a space and the decimal digits of `n`.
fn arg(buf: &mut Vec<u8>, n: u64) {
    buf.push(b' ');
    push_u64(buf, n);
}

/// Append `n` in decimal, without going through `fmt`: the client's command lines
/// and the server's replies (`INSERTED 7`) both write their numbers with it.
#[inline]
pub fn push_u64(buf: &mut Vec<u8>, n: u64) {
    let (digits, at) = u64_digits(n);
    buf.extend_from_slice(&digits[at..]);
}

/// The decimal digits of `n`: they are `digits[at..]` of `(digits, at)`.
#[inline]
pub fn u64_digits(mut n: u64) -> ([u8; 20], usize) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        // n % 10 < 10, so the cast cannot truncate.
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    (digits, i)
}

impl<B> Command<'_, B> {
    /// The word the command's line starts with.
    pub fn word(&self) -> &'static [u8] {
        match self {
            Command::Put { .. } => b"put",
            Command::Use(_) => b"use",
            Command::Reserve => b"reserve",
            Command::ReserveWithTimeout(_) => b"reserve-with-timeout",
            Command::ReserveJob(_) => b"reserve-job",
            Command::Delete(_) => b"delete",
            Command::Release { .. } => b"release",
            Command::Bury { .. } => b"bury",
            Command::Touch(_) => b"touch",
            Command::Watch(_) => b"watch",
            Command::Ignore(_) => b"ignore",
            Command::Peek(_) => b"peek",
            Command::PeekReady => b"peek-ready",
            Command::PeekDelayed => b"peek-delayed",
            Command::PeekBuried => b"peek-buried",
            Command::Kick(_) => b"kick",
            Command::KickJob(_) => b"kick-job",
            Command::StatsJob(_) => b"stats-job",
            Command::StatsTube(_) => b"stats-tube",
            Command::Stats => b"stats",
            Command::ListTubes => b"list-tubes",
            Command::ListTubeUsed => b"list-tube-used",
            Command::ListTubesWatched => b"list-tubes-watched",
            Command::PauseTube { .. } => b"pause-tube",
            Command::Quit => b"quit",
        }
    }

    /// The tube name the command carries, if any.
    pub fn tube(&self) -> Option<&[u8]> {
        match self {
            Command::Use(name)
            | Command::Watch(name)
            | Command::Ignore(name)
            | Command::StatsTube(name)
            | Command::PauseTube { name, .. } => Some(name),
            _ => None,
        }
    }
}

impl<B: Body> Command<'_, B> {
    /// Append the command to `buf`: its line, CRLF, then for a put what
    /// [`Body::append_to`] writes. Tube names are sent as given and judged by the
    /// server (so the replies are what other clients get), except one holding CR or
    /// LF, which is refused before anything is written.
    pub fn encode(&self, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
        if let Some(name) = self.tube() {
            if memchr::memchr2(b'\r', b'\n', name).is_some() {
                return Err(EncodeError::LineBreakInName);
            }
        }
        buf.extend_from_slice(self.word());
        match *self {
            Command::Put {
                pri,
                delay,
                ttr,
                body,
            } => {
                arg(buf, pri.into());
                arg(buf, delay.into());
                arg(buf, ttr.into());
                arg(buf, body.announced());
            }
            Command::Use(name)
            | Command::Watch(name)
            | Command::Ignore(name)
            | Command::StatsTube(name) => {
                buf.push(b' ');
                buf.extend_from_slice(name);
            }
            Command::PauseTube { name, delay } => {
                buf.push(b' ');
                buf.extend_from_slice(name);
                arg(buf, delay.into());
            }
            Command::ReserveWithTimeout(n) | Command::Kick(n) => arg(buf, n.into()),
            Command::Release { id, pri, delay } => {
                arg(buf, id);
                arg(buf, pri.into());
                arg(buf, delay.into());
            }
            Command::Bury { id, pri } => {
                arg(buf, id);
                arg(buf, pri.into());
            }
            Command::ReserveJob(id)
            | Command::Delete(id)
            | Command::Touch(id)
            | Command::Peek(id)
            | Command::KickJob(id)
            | Command::StatsJob(id) => arg(buf, id),
            Command::Reserve
            | Command::PeekReady
            | Command::PeekDelayed
            | Command::PeekBuried
            | Command::Stats
            | Command::ListTubes
            | Command::ListTubeUsed
            | Command::ListTubesWatched
            | Command::Quit => {}
        }
        buf.extend_from_slice(b"\r\n");
        if let Command::Put { body, .. } = *self {
            body.append_to(buf);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
