//! The commands the client sends and the replies each expects.
//!
//! [`Command`] is the protocol crate's command with a put's body in it: the names,
//! the arguments and their encoding ([`beanpole_protocol::Command::encode`]) are the
//! ones the server parses with, defined once there. What is the client's own is here:
//! how long a command may rightly wait ([`server_wait`]) and which reply means it
//! succeeded ([`expect`]). Imports this crate's reply and error types only.

use crate::error::{ClientError, ErrorReply};
use crate::reply::Reply;

/// One command to send. Tube names and a put's body borrow from the caller.
pub type Command<'a> = beanpole_protocol::Command<'a, &'a [u8]>;

/// Put commands for a batch, written the way [`Command::encode`] writes them, with
/// the last command line kept: a batch's puts mostly share their priority, delay,
/// ttr and body length, and then each put costs three copies (the line, the body,
/// its CRLF) instead of the formatting of four numbers.
#[derive(Debug, Default)]
pub struct PutLines {
    /// `(pri, delay, ttr, body length)` of the kept line.
    key: Option<(u32, u32, u32, usize)>,
    /// The kept line, CRLF included.
    line: Vec<u8>,
}

impl PutLines {
    /// Append the put of `body` to `buf`: its line, `body` and CRLF.
    pub fn encode(&mut self, buf: &mut Vec<u8>, pri: u32, delay: u32, ttr: u32, body: &[u8]) {
        let key = (pri, delay, ttr, body.len());
        if self.key == Some(key) {
            buf.extend_from_slice(&self.line);
            buf.extend_from_slice(body);
            buf.extend_from_slice(b"\r\n");
            return;
        }
        let start = buf.len();
        let put = Command::Put {
            pri,
            delay,
            ttr,
            body,
        };
        // A put names no tube, the one thing encoding can refuse.
        if put.encode(buf).is_ok() {
            let line = &buf[start..buf.len() - body.len() - 2];
            self.line.clear();
            self.line.extend_from_slice(line);
            self.key = Some(key);
        }
    }
}

/// The id a put's reply gives: INSERTED's, looked at first; any other reply is the
/// error [`expect`] makes of it (or, for a success word a put never gets, an
/// unexpected reply).
pub fn put_id(reply: Reply) -> Result<u64, ClientError> {
    if let Reply::Inserted(id) = reply {
        return Ok(id);
    }
    let put = Command::Put {
        pri: 0,
        delay: 0,
        ttr: 0,
        body: b"",
    };
    match expect(&put, reply)? {
        Reply::Inserted(id) => Ok(id),
        other => Err(ClientError::Unexpected {
            addr: String::new(),
            line: other.describe(),
        }),
    }
}

/// How long the server may rightly take to answer, beyond the network: the
/// reserve wait. `None` for a reserve that waits for ever.
pub fn server_wait(cmd: &Command<'_>) -> Option<Option<u32>> {
    match cmd {
        Command::Reserve => Some(None),
        Command::ReserveWithTimeout(t) => Some(Some(*t)),
        _ => None,
    }
}

/// Check a reply against what `cmd` expects: the success reply, or the server's
/// error word as [`ClientError::Reply`]. `quit` has no reply, so any is unexpected.
pub fn expect(cmd: &Command<'_>, reply: Reply) -> Result<Reply, ClientError> {
    let ok = match (cmd, &reply) {
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
            return Err(ClientError::Reply(ErrorReply::Buried(Some(*id))))
        }
        (Command::Release { .. }, Reply::Buried(None)) => {
            return Err(ClientError::Reply(ErrorReply::Buried(None)))
        }
        (Command::Quit, _) => false,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The client's commands are the protocol's: encoded here, read by the parser.
    #[test]
    fn kept_put_lines_write_what_encode_writes() {
        let mut lines = PutLines::default();
        let (mut fast, mut plain) = (Vec::new(), Vec::new());
        let puts: [(u32, u32, u32, &[u8]); 6] = [
            (1, 2, 3, b"ab"),
            (1, 2, 3, b"cd"),
            (1, 2, 3, b"efg"),
            (0, 2, 3, b"efg"),
            (0, 2, 3, b""),
            (u32::MAX, 0, 60, b"h\r\ni"),
        ];
        for (pri, delay, ttr, body) in puts {
            lines.encode(&mut fast, pri, delay, ttr, body);
            let put: Command<'_> = Command::Put {
                pri,
                delay,
                ttr,
                body,
            };
            put.encode(&mut plain).expect("encodes");
        }
        assert_eq!(
            String::from_utf8_lossy(&fast),
            String::from_utf8_lossy(&plain)
        );
    }

    #[test]
    fn a_client_command_is_what_the_server_parses() {
        let mut buf = Vec::new();
        let put: Command<'_> = Command::Put {
            pri: 1,
            delay: 2,
            ttr: 3,
            body: b"xy",
        };
        put.encode(&mut buf).expect("encodes");
        assert_eq!(buf, b"put 1 2 3 2\r\nxy\r\n");
        assert_eq!(
            beanpole_protocol::parse(b"put 1 2 3 2", beanpole_protocol::DEFAULT_MAX_JOB_SIZE),
            Ok(beanpole_protocol::Command::Put {
                pri: 1,
                delay: 2,
                ttr: 3,
                body: 2
            })
        );
    }

    #[test]
    fn a_line_break_in_a_name_is_an_invalid_argument() {
        let mut buf = Vec::new();
        let refused = Command::Use(b"a\r\nstats").encode(&mut buf);
        let e = ClientError::from(refused.expect_err("a line break"));
        let message = "a tube name cannot contain CR or LF";
        assert!(matches!(&e, ClientError::Invalid(m) if m == message));
        assert!(!e.is_connection());
        assert!(buf.is_empty());
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
            expect(&put, Reply::Inserted(3)).ok(),
            Some(Reply::Inserted(3))
        );
        assert!(matches!(
            expect(&put, Reply::Buried(Some(4))),
            Err(ClientError::Reply(ErrorReply::Buried(Some(4))))
        ));
        assert!(matches!(
            expect(&Command::Delete(1), Reply::Error(ErrorReply::NotFound)),
            Err(ClientError::Reply(ErrorReply::NotFound))
        ));
        assert!(matches!(
            expect(&Command::Delete(1), Reply::Touched),
            Err(ClientError::Unexpected { .. })
        ));
        assert!(expect(&Command::Bury { id: 1, pri: 1 }, Reply::Buried(None)).is_ok());
        assert!(expect(&Command::KickJob(1), Reply::Kicked(None)).is_ok());
        assert!(expect(&Command::Kick(1), Reply::Kicked(None)).is_err());
        assert!(matches!(
            expect(&Command::Quit, Reply::Deleted),
            Err(ClientError::Unexpected { .. })
        ));
        assert_eq!(server_wait(&Command::Reserve), Some(None));
        assert_eq!(server_wait(&Command::ReserveWithTimeout(5)), Some(Some(5)));
        assert_eq!(server_wait(&Command::Stats), None);
    }
}
