//! Command encoding: every command the client sends, written into a byte buffer.

use crate::error::ClientError;
use crate::reply::Reply;

/// One command. Names and bodies borrow from the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command<'a> {
    Put {
        pri: u32,
        delay: u32,
        ttr: u32,
        body: &'a [u8],
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
    Stats,
    StatsJob(u64),
    StatsTube(&'a [u8]),
    ListTubes,
    ListTubeUsed,
    ListTubesWatched,
    PauseTube {
        name: &'a [u8],
        delay: u32,
    },
}

/// Append the decimal digits of `n`.
fn push_num(buf: &mut Vec<u8>, n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        // n % 10 < 10, so the cast cannot truncate.
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[i..]);
}

/// Reject names that would split the command into two lines. Everything else is
/// sent as given and judged by the server, so the replies match other clients'.
fn check_name(name: &[u8]) -> Result<(), ClientError> {
    if memchr::memchr2(b'\r', b'\n', name).is_some() {
        return Err(ClientError::Invalid(
            "a tube name cannot contain CR or LF".to_owned(),
        ));
    }
    Ok(())
}

impl Command<'_> {
    /// Append the command (line, and body for put) to `buf`.
    pub fn encode(&self, buf: &mut Vec<u8>) -> Result<(), ClientError> {
        let word = |buf: &mut Vec<u8>, w: &[u8]| buf.extend_from_slice(w);
        match *self {
            Command::Put {
                pri,
                delay,
                ttr,
                body,
            } => {
                word(buf, b"put ");
                push_num(buf, pri.into());
                buf.push(b' ');
                push_num(buf, delay.into());
                buf.push(b' ');
                push_num(buf, ttr.into());
                buf.push(b' ');
                push_num(buf, body.len() as u64);
                buf.extend_from_slice(b"\r\n");
                buf.extend_from_slice(body);
            }
            Command::Use(name) | Command::Watch(name) | Command::Ignore(name) => {
                check_name(name)?;
                word(
                    buf,
                    match self {
                        Command::Use(_) => b"use ",
                        Command::Watch(_) => b"watch ",
                        _ => b"ignore ",
                    },
                );
                buf.extend_from_slice(name);
            }
            Command::StatsTube(name) => {
                check_name(name)?;
                word(buf, b"stats-tube ");
                buf.extend_from_slice(name);
            }
            Command::PauseTube { name, delay } => {
                check_name(name)?;
                word(buf, b"pause-tube ");
                buf.extend_from_slice(name);
                buf.push(b' ');
                push_num(buf, delay.into());
            }
            Command::Reserve => word(buf, b"reserve"),
            Command::ReserveWithTimeout(t) => {
                word(buf, b"reserve-with-timeout ");
                push_num(buf, t.into());
            }
            Command::Release { id, pri, delay } => {
                word(buf, b"release ");
                push_num(buf, id);
                buf.push(b' ');
                push_num(buf, pri.into());
                buf.push(b' ');
                push_num(buf, delay.into());
            }
            Command::Bury { id, pri } => {
                word(buf, b"bury ");
                push_num(buf, id);
                buf.push(b' ');
                push_num(buf, pri.into());
            }
            Command::Kick(n) => {
                word(buf, b"kick ");
                push_num(buf, n.into());
            }
            Command::ReserveJob(id)
            | Command::Delete(id)
            | Command::Touch(id)
            | Command::Peek(id)
            | Command::KickJob(id)
            | Command::StatsJob(id) => {
                word(
                    buf,
                    match self {
                        Command::ReserveJob(_) => b"reserve-job ",
                        Command::Delete(_) => b"delete ",
                        Command::Touch(_) => b"touch ",
                        Command::Peek(_) => b"peek ",
                        Command::KickJob(_) => b"kick-job ",
                        _ => b"stats-job ",
                    },
                );
                push_num(buf, id);
            }
            Command::PeekReady => word(buf, b"peek-ready"),
            Command::PeekDelayed => word(buf, b"peek-delayed"),
            Command::PeekBuried => word(buf, b"peek-buried"),
            Command::Stats => word(buf, b"stats"),
            Command::ListTubes => word(buf, b"list-tubes"),
            Command::ListTubeUsed => word(buf, b"list-tube-used"),
            Command::ListTubesWatched => word(buf, b"list-tubes-watched"),
        }
        buf.extend_from_slice(b"\r\n");
        Ok(())
    }

    /// How long the server may rightly take to answer, beyond the network: the
    /// reserve wait. `None` for a reserve that waits for ever.
    pub fn server_wait(&self) -> Option<Option<u32>> {
        match self {
            Command::Reserve => Some(None),
            Command::ReserveWithTimeout(t) => Some(Some(*t)),
            _ => None,
        }
    }

    /// Check a reply against what this command expects: the success reply, or the
    /// server's error word as [`ClientError::Reply`].
    pub fn expect(&self, reply: Reply) -> Result<Reply, ClientError> {
        let ok = match (self, &reply) {
            (Command::Put { .. }, Reply::Inserted(_))
            | (Command::Use(_) | Command::ListTubeUsed, Reply::Using(_))
            | (
                Command::Reserve | Command::ReserveWithTimeout(_) | Command::ReserveJob(_),
                Reply::Reserved { .. },
            )
            | (
                Command::Peek(_) | Command::PeekReady | Command::PeekDelayed | Command::PeekBuried,
                Reply::Found { .. },
            )
            | (Command::Delete(_), Reply::Deleted)
            | (Command::Release { .. }, Reply::Released)
            | (Command::Bury { .. }, Reply::Buried(None))
            | (Command::Touch(_), Reply::Touched)
            | (Command::Watch(_) | Command::Ignore(_), Reply::Watching(_))
            | (Command::Kick(_), Reply::Kicked(Some(_)))
            | (Command::KickJob(_), Reply::Kicked(None))
            | (
                Command::Stats
                | Command::StatsJob(_)
                | Command::StatsTube(_)
                | Command::ListTubes
                | Command::ListTubesWatched,
                Reply::Ok(_),
            )
            | (Command::PauseTube { .. }, Reply::Paused) => true,
            (Command::Put { .. }, Reply::Buried(Some(id))) => {
                return Err(ClientError::Reply(crate::ErrorReply::Buried(Some(*id))))
            }
            (Command::Release { .. }, Reply::Buried(None)) => {
                return Err(ClientError::Reply(crate::ErrorReply::Buried(None)))
            }
            (_, Reply::Error(e)) => return Err(ClientError::Reply(*e)),
            _ => false,
        };
        if ok {
            Ok(reply)
        } else {
            Err(ClientError::Unexpected {
                addr: String::new(),
                line: reply.describe(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use beanpole_engine::protocol::{parse, Command as Parsed, DEFAULT_MAX_JOB_SIZE};

    fn line(cmd: Command<'_>) -> Vec<u8> {
        let mut buf = Vec::new();
        cmd.encode(&mut buf).expect("encodes");
        buf
    }

    /// Every encoded line is what the engine's own parser reads back.
    #[test]
    fn encoded_lines_parse_back() {
        let cases: Vec<(Command<'_>, Parsed<'_>)> = vec![
            (Command::Use(b"t1"), Parsed::Use(b"t1")),
            (Command::Reserve, Parsed::Reserve),
            (
                Command::ReserveWithTimeout(7),
                Parsed::ReserveWithTimeout(7),
            ),
            (Command::ReserveJob(42), Parsed::ReserveJob(42)),
            (Command::Delete(u64::MAX), Parsed::Delete(u64::MAX)),
            (
                Command::Release {
                    id: 1,
                    pri: 2,
                    delay: 3,
                },
                Parsed::Release {
                    id: 1,
                    pri: 2,
                    delay: 3,
                },
            ),
            (
                Command::Bury { id: 9, pri: 0 },
                Parsed::Bury { id: 9, pri: 0 },
            ),
            (Command::Touch(5), Parsed::Touch(5)),
            (Command::Watch(b"a"), Parsed::Watch(b"a")),
            (Command::Ignore(b"b"), Parsed::Ignore(b"b")),
            (Command::Peek(10), Parsed::Peek(10)),
            (Command::PeekReady, Parsed::PeekReady),
            (Command::PeekDelayed, Parsed::PeekDelayed),
            (Command::PeekBuried, Parsed::PeekBuried),
            (Command::Kick(100), Parsed::Kick(100)),
            (Command::KickJob(3), Parsed::KickJob(3)),
            (Command::Stats, Parsed::Stats),
            (Command::StatsJob(1), Parsed::StatsJob(1)),
            (Command::StatsTube(b"x"), Parsed::StatsTube(b"x")),
            (Command::ListTubes, Parsed::ListTubes),
            (Command::ListTubeUsed, Parsed::ListTubeUsed),
            (Command::ListTubesWatched, Parsed::ListTubesWatched),
            (
                Command::PauseTube {
                    name: b"p",
                    delay: 60,
                },
                Parsed::PauseTube {
                    name: b"p",
                    delay: 60,
                },
            ),
        ];
        for (cmd, want) in cases {
            let buf = line(cmd);
            assert!(buf.ends_with(b"\r\n"));
            let got = parse(&buf[..buf.len() - 2], DEFAULT_MAX_JOB_SIZE);
            assert_eq!(got, Ok(want), "{cmd:?}");
        }
    }

    #[test]
    fn put_carries_its_body() {
        let buf = line(Command::Put {
            pri: u32::MAX,
            delay: 0,
            ttr: 60,
            body: b"a\r\nb",
        });
        assert_eq!(buf, b"put 4294967295 0 60 4\r\na\r\nb\r\n");
        let got = parse(b"put 4294967295 0 60 4", DEFAULT_MAX_JOB_SIZE);
        assert_eq!(
            got,
            Ok(Parsed::Put {
                pri: u32::MAX,
                delay: 0,
                ttr: 60,
                bytes: 4
            })
        );
    }

    #[test]
    fn names_with_line_breaks_are_refused() {
        let mut buf = Vec::new();
        assert!(Command::Use(b"a\r\nstats").encode(&mut buf).is_err());
        assert!(Command::Watch(b"a\n").encode(&mut buf).is_err());
        assert!(buf.is_empty());
    }

    #[test]
    fn numbers_are_decimal() {
        for n in [
            0u64,
            1,
            9,
            10,
            99,
            100,
            12345,
            u64::from(u32::MAX),
            u64::MAX,
        ] {
            let mut buf = Vec::new();
            push_num(&mut buf, n);
            assert_eq!(buf, n.to_string().as_bytes());
        }
    }

    #[test]
    fn replies_are_checked_against_the_command() {
        let put = Command::Put {
            pri: 0,
            delay: 0,
            ttr: 1,
            body: b"",
        };
        assert_eq!(
            put.expect(Reply::Inserted(3)).ok(),
            Some(Reply::Inserted(3))
        );
        assert!(matches!(
            put.expect(Reply::Buried(Some(4))),
            Err(ClientError::Reply(crate::ErrorReply::Buried(Some(4))))
        ));
        assert!(matches!(
            Command::Delete(1).expect(Reply::Error(crate::ErrorReply::NotFound)),
            Err(ClientError::Reply(crate::ErrorReply::NotFound))
        ));
        assert!(matches!(
            Command::Delete(1).expect(Reply::Touched),
            Err(ClientError::Unexpected { .. })
        ));
        assert!(Command::Bury { id: 1, pri: 1 }
            .expect(Reply::Buried(None))
            .is_ok());
        assert!(Command::KickJob(1).expect(Reply::Kicked(None)).is_ok());
        assert!(Command::Kick(1).expect(Reply::Kicked(None)).is_err());
    }
}
