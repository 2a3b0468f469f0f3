//! Reply parsing: one reply (line, and body where it has one) from the front of a
//! byte buffer. The fixed words are the protocol crate's constants, the ones the server writes.

use beanpole_protocol::{self as p, MAX_JOB_SIZE_LIMIT, MAX_LINE};

use crate::error::ErrorReply;

/// One reply from the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Inserted(u64),
    /// With the id after a put (an error there), bare after bury or release.
    Buried(Option<u64>),
    Using(Vec<u8>),
    Reserved {
        id: u64,
        body: Vec<u8>,
    },
    Found {
        id: u64,
        body: Vec<u8>,
    },
    Deleted,
    Released,
    Touched,
    Watching(u64),
    /// With the count after kick, bare after kick-job.
    Kicked(Option<u64>),
    /// The YAML body of stats, stats-job, stats-tube, list-tubes, list-tubes-watched.
    Ok(Vec<u8>),
    Paused,
    Error(ErrorReply),
}

impl Reply {
    /// A short text for error messages.
    pub fn describe(&self) -> String {
        match self {
            Reply::Reserved { id, body } => format!("RESERVED {id} {}", body.len()),
            Reply::Found { id, body } => format!("FOUND {id} {}", body.len()),
            Reply::Ok(body) => format!("OK {}", body.len()),
            other => format!("{other:?}"),
        }
    }
}

/// What [`parse`] found at the front of the buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A whole reply and the number of bytes it took.
    Done(Reply, usize),
    /// Not complete yet; at least this many bytes are needed in all.
    Need(usize),
    /// Not a beanstalkd reply; the text is for the error message.
    Bad(String),
}

/// Longest reply line accepted (`USING` and a 200-byte name fit with room to spare).
pub const MAX_REPLY_LINE: usize = MAX_LINE + 32;

fn number(word: &[u8]) -> Option<u64> {
    if word.is_empty() || word.len() > 20 {
        return None;
    }
    word.iter().try_fold(0u64, |n, &b| {
        if !b.is_ascii_digit() {
            return None;
        }
        n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })
}

/// The replies that are one fixed line.
fn fixed(with_crlf: &[u8]) -> Option<Reply> {
    Some(match with_crlf {
        p::DELETED => Reply::Deleted,
        p::RELEASED => Reply::Released,
        p::BURIED => Reply::Buried(None),
        p::TOUCHED => Reply::Touched,
        p::KICKED => Reply::Kicked(None),
        p::PAUSED => Reply::Paused,
        p::NOT_FOUND => Reply::Error(ErrorReply::NotFound),
        p::TIMED_OUT => Reply::Error(ErrorReply::TimedOut),
        p::DEADLINE_SOON => Reply::Error(ErrorReply::DeadlineSoon),
        p::NOT_IGNORED => Reply::Error(ErrorReply::NotIgnored),
        p::DRAINING => Reply::Error(ErrorReply::Draining),
        p::JOB_TOO_BIG => Reply::Error(ErrorReply::JobTooBig),
        p::EXPECTED_CRLF => Reply::Error(ErrorReply::ExpectedCrlf),
        p::OUT_OF_MEMORY => Reply::Error(ErrorReply::OutOfMemory),
        p::BAD_FORMAT => Reply::Error(ErrorReply::BadFormat),
        p::UNKNOWN_COMMAND => Reply::Error(ErrorReply::UnknownCommand),
        b"INTERNAL_ERROR\r\n" => Reply::Error(ErrorReply::InternalError),
        _ => return None,
    })
}

fn bad(line: &[u8]) -> Parsed {
    Parsed::Bad(String::from_utf8_lossy(line).into_owned())
}

/// `INSERTED <id>\r\n` at the front of `buf`, the reply a batch of puts reads once
/// per job, parsed without splitting the line into words: the id and the bytes
/// taken. None for anything else (the general parser then decides).
#[inline]
pub(crate) fn inserted(buf: &[u8]) -> Option<(u64, usize)> {
    let rest = buf.strip_prefix(b"INSERTED ")?;
    let digits = rest
        .iter()
        .take(21)
        .take_while(|b| b.is_ascii_digit())
        .count();
    if rest.get(digits..digits + 2)? != b"\r\n" {
        return None;
    }
    let id = number(&rest[..digits])?;
    Some((id, b"INSERTED ".len() + digits + 2))
}

/// Parse one reply from the front of `buf`.
pub fn parse(buf: &[u8]) -> Parsed {
    if let Some((id, used)) = inserted(buf) {
        return Parsed::Done(Reply::Inserted(id), used);
    }
    let Some(nl) = memchr::memchr(b'\n', &buf[..buf.len().min(MAX_REPLY_LINE)]) else {
        if buf.len() >= MAX_REPLY_LINE {
            return bad(&buf[..MAX_REPLY_LINE]);
        }
        return Parsed::Need(buf.len() + 1);
    };
    let with_crlf = &buf[..=nl];
    if nl == 0 || buf[nl - 1] != b'\r' {
        return bad(with_crlf);
    }
    let line = &buf[..nl - 1];
    let used = nl + 1;
    if let Some(reply) = fixed(with_crlf) {
        return Parsed::Done(reply, used);
    }
    // At most two arguments: a third makes every reply bad, so it is only noticed.
    let mut words = line.split(|&b| b == b' ');
    let head = words.next().unwrap_or_default();
    let (first, second, third) = (words.next(), words.next(), words.next());
    let one = |f: fn(u64) -> Reply| match (first, second) {
        (Some(n), None) => number(n).map_or_else(|| bad(line), |n| Parsed::Done(f(n), used)),
        _ => bad(line),
    };
    match head {
        b"INSERTED" => one(Reply::Inserted),
        b"BURIED" => one(|n| Reply::Buried(Some(n))),
        b"WATCHING" => one(Reply::Watching),
        b"KICKED" => one(|n| Reply::Kicked(Some(n))),
        b"USING" => match (first, second) {
            (Some(name), None) if !name.is_empty() => {
                Parsed::Done(Reply::Using(name.to_vec()), used)
            }
            _ => bad(line),
        },
        b"RESERVED" | b"FOUND" | b"OK" => {
            let (id, size) = match (head, first, second, third) {
                (b"OK", Some(size), None, _) => (Some(0), number(size)),
                (b"RESERVED" | b"FOUND", Some(id), Some(size), None) => (number(id), number(size)),
                _ => (None, None),
            };
            let (Some(id), Some(size)) = (id, size) else {
                return bad(line);
            };
            if size > u64::from(MAX_JOB_SIZE_LIMIT) * 2 {
                return bad(line);
            }
            // size is at most 2 GiB, so it fits a usize on the 64-bit targets built.
            let end = used + size as usize;
            if buf.len() < end + 2 {
                return Parsed::Need(end + 2);
            }
            if &buf[end..end + 2] != b"\r\n" {
                return bad(line);
            }
            let body = buf[used..end].to_vec();
            let reply = match head {
                b"OK" => Reply::Ok(body),
                b"FOUND" => Reply::Found { id, body },
                _ => Reply::Reserved { id, body },
            };
            Parsed::Done(reply, end + 2)
        }
        _ => bad(line),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_replies() {
        assert_eq!(
            parse(b"INSERTED 12\r\n"),
            Parsed::Done(Reply::Inserted(12), 13)
        );
        assert_eq!(parse(b"DELETED\r\nX"), Parsed::Done(Reply::Deleted, 9));
        assert_eq!(parse(b"BURIED\r\n"), Parsed::Done(Reply::Buried(None), 8));
        assert_eq!(
            parse(b"BURIED 3\r\n"),
            Parsed::Done(Reply::Buried(Some(3)), 10)
        );
        assert_eq!(
            parse(b"KICKED 0\r\n"),
            Parsed::Done(Reply::Kicked(Some(0)), 10)
        );
        assert_eq!(
            parse(b"USING a-b\r\n"),
            Parsed::Done(Reply::Using(b"a-b".to_vec()), 11)
        );
        assert_eq!(
            parse(b"TIMED_OUT\r\n"),
            Parsed::Done(Reply::Error(ErrorReply::TimedOut), 11)
        );
    }

    #[test]
    fn numbers_take_the_whole_range_and_leading_zeros() {
        assert_eq!(
            parse(b"INSERTED 18446744073709551615\r\n"),
            Parsed::Done(Reply::Inserted(u64::MAX), 31)
        );
        assert_eq!(
            parse(b"WATCHING 007\r\n"),
            Parsed::Done(Reply::Watching(7), 14)
        );
    }

    #[test]
    fn inserted_replies_are_read_whole_or_not_at_all() {
        assert_eq!(
            parse(b"INSERTED 012\r\nINSERTED 3\r\n"),
            Parsed::Done(Reply::Inserted(12), 14)
        );
        for bad_line in [
            &b"INSERTED \r\n"[..],
            b"INSERTED 12 3\r\n",
            b"INSERTED 1x\r\n",
            b"INSERTED 12\n",
            b"INSERTED 18446744073709551616\r\n",
            b"INSERTED 000000000000000000001\r\n",
        ] {
            assert!(
                matches!(parse(bad_line), Parsed::Bad(_)),
                "{:?}",
                String::from_utf8_lossy(bad_line)
            );
        }
        assert!(matches!(parse(b"INSERTED 12"), Parsed::Need(_)));
        assert!(matches!(parse(b"INSERTED 12\r"), Parsed::Need(_)));
    }

    #[test]
    fn bodies_may_hold_anything() {
        let buf = b"RESERVED 7 5\r\na\r\nbc\r\nINSERTED 1\r\n";
        let want = Reply::Reserved {
            id: 7,
            body: b"a\r\nbc".to_vec(),
        };
        assert_eq!(parse(buf), Parsed::Done(want, 21));
        assert_eq!(
            parse(b"OK 0\r\n\r\n"),
            Parsed::Done(Reply::Ok(Vec::new()), 8)
        );
    }

    #[test]
    fn partial_replies_ask_for_more() {
        let full = b"FOUND 1 4\r\nbody\r\n";
        for cut in 0..full.len() {
            match parse(&full[..cut]) {
                Parsed::Need(n) => assert!(n > cut, "{cut}"),
                other => panic!("{cut}: {other:?}"),
            }
        }
    }

    #[test]
    fn garbage_is_refused_without_panicking() {
        for bad_reply in [
            &b"HELLO\r\n"[..],
            b"INSERTED\r\n",
            b"INSERTED x\r\n",
            b"INSERTED 99999999999999999999999\r\n",
            b"RESERVED 1 2\r\nabcd\r\n",
            b"RESERVED 1\r\n",
            b"DELETED\n",
            b"\r\n",
            b"INSERTED 1 2\r\n",
            b"INSERTED 18446744073709551616\r\n",
            b"RESERVED 1 2 3\r\nab\r\n",
            b"OK 1 2\r\nx\r\n",
            b"USING a b\r\n",
            b"USING\r\n",
            b"INSERTED -1\r\n",
        ] {
            assert!(matches!(parse(bad_reply), Parsed::Bad(_)), "{bad_reply:?}");
        }
        assert!(matches!(parse(&[b'x'; 1000]), Parsed::Bad(_)));
    }

    #[test]
    fn every_byte_string_parses_or_fails_cleanly() {
        // A cheap sweep: every prefix of a mix of replies, and every single-byte change.
        let sample = b"RESERVED 1 3\r\nabc\r\nOK 2\r\nxy\r\nWATCHING 2\r\n".to_vec();
        for i in 0..sample.len() {
            for b in [0u8, b' ', b'\r', b'\n', b'9', 0xff] {
                let mut s = sample.clone();
                s[i] = b;
                let _ = parse(&s);
                let _ = parse(&s[..i]);
            }
        }
    }
}
