//! The parser held to beanstalkd 1.13, line by line: each form, each quirk, each
//! error reply.

use super::*;

const MAX: u32 = DEFAULT_MAX_JOB_SIZE;

fn p(line: &str) -> Result<Command<'_>, ProtocolError> {
    parse(line.as_bytes(), MAX)
}

#[test]
fn put_forms() {
    assert_eq!(
        p("put 1 2 3 4"),
        Ok(Command::Put {
            pri: 1,
            delay: 2,
            ttr: 3,
            body: 4
        })
    );
    assert_eq!(
        p("put  0  0  1  1"),
        Ok(Command::Put {
            pri: 0,
            delay: 0,
            ttr: 1,
            body: 1
        })
    );
    assert_eq!(
        p("put 0 0 0 1"),
        Ok(Command::Put {
            pri: 0,
            delay: 0,
            ttr: 1,
            body: 1
        })
    );
    assert_eq!(p("put"), Err(ProtocolError::UnknownCommand));
    assert_eq!(p("put "), Err(ProtocolError::BadFormat));
    assert_eq!(
        p("put 0 0 1 1 "),
        Err(ProtocolError::BadFormatCounted(Op::Put))
    );
    assert_eq!(
        p("put 0 0 1 1 x"),
        Err(ProtocolError::BadFormatCounted(Op::Put))
    );
    assert_eq!(p("put 4294967296 0 1 1"), Err(ProtocolError::BadFormat));
    assert_eq!(p("put 4294967295 0 1 1").map(|c| c.op()), Ok(Op::Put));
    assert_eq!(
        p("put 0 0 1 65536"),
        Err(ProtocolError::JobTooBig { discard: 65538 })
    );
    assert_eq!(
        p("put 0 0 1 65536 junk"),
        Err(ProtocolError::JobTooBig { discard: 65538 })
    );
    assert_eq!(p("put -1 0 1 1"), Err(ProtocolError::BadFormat));
    assert_eq!(p("put 0\t0 1 1"), Err(ProtocolError::BadFormat));
    assert_eq!(
        p("put 99999999999999999999 0 1 1"),
        Err(ProtocolError::BadFormat)
    );
}

#[test]
fn prefix_matching() {
    assert_eq!(p("reserve"), Ok(Command::Reserve));
    assert_eq!(p("reserved"), Err(ProtocolError::BadFormat));
    assert_eq!(p("reserve "), Err(ProtocolError::BadFormat));
    assert_eq!(p("reserve-with-timeout"), Err(ProtocolError::BadFormat));
    assert_eq!(p("stats-job"), Err(ProtocolError::BadFormat));
    assert_eq!(p("statsx"), Err(ProtocolError::BadFormat));
    assert_eq!(p("peek-readyx"), Err(ProtocolError::BadFormat));
    assert_eq!(p("peek"), Err(ProtocolError::UnknownCommand));
    assert_eq!(p("use"), Err(ProtocolError::UnknownCommand));
    assert_eq!(p("kick"), Err(ProtocolError::UnknownCommand));
    assert_eq!(p("list-tubesx"), Err(ProtocolError::BadFormat));
    assert_eq!(p("list-tube-usedx"), Err(ProtocolError::BadFormat));
    assert_eq!(p("quitnow"), Ok(Command::Quit));
    assert_eq!(p(""), Err(ProtocolError::UnknownCommand));
    assert_eq!(p("PUT 0 0 1 1"), Err(ProtocolError::UnknownCommand));
    assert_eq!(p("stats\0"), Err(ProtocolError::BadFormat));
}

#[test]
fn numbers() {
    assert_eq!(p("delete 1"), Ok(Command::Delete(1)));
    assert_eq!(p("delete  01"), Ok(Command::Delete(1)));
    assert_eq!(p("delete 1 "), Err(ProtocolError::BadFormat));
    assert_eq!(p("delete +1"), Err(ProtocolError::BadFormat));
    assert_eq!(
        p("delete 18446744073709551615"),
        Ok(Command::Delete(u64::MAX))
    );
    assert_eq!(
        p("delete 18446744073709551616"),
        Err(ProtocolError::BadFormat)
    );
    assert_eq!(
        p("release 1 2 3"),
        Ok(Command::Release {
            id: 1,
            pri: 2,
            delay: 3
        })
    );
    assert_eq!(p("release 1 2"), Err(ProtocolError::BadFormat));
    assert_eq!(p("bury 1 2"), Ok(Command::Bury { id: 1, pri: 2 }));
    assert_eq!(p("bury 1 2 3"), Err(ProtocolError::BadFormat));
}

#[test]
fn loose_numbers() {
    assert_eq!(p("kick 5 junk"), Ok(Command::Kick(5)));
    assert_eq!(p("kick \t7"), Ok(Command::Kick(7)));
    assert_eq!(p("kick -1"), Ok(Command::Kick(u32::MAX)));
    assert_eq!(p("kick 4294967297"), Ok(Command::Kick(1)));
    assert_eq!(p("kick x"), Err(ProtocolError::BadFormat));
    assert_eq!(
        p("kick 99999999999999999999"),
        Err(ProtocolError::BadFormat)
    );
    assert_eq!(
        p("reserve-with-timeout 5x"),
        Ok(Command::ReserveWithTimeout(5))
    );
    assert_eq!(
        p("reserve-with-timeout  0"),
        Ok(Command::ReserveWithTimeout(0))
    );
    assert_eq!(
        p("reserve-with-timeout 2147483647"),
        Ok(Command::ReserveWithTimeout(i32::MAX as u32))
    );
    assert_eq!(
        p("reserve-with-timeout 2147483648"),
        Err(ProtocolError::BadFormat)
    );
    assert_eq!(p("reserve-with-timeout abc"), Err(ProtocolError::BadFormat));
    assert_eq!(p("reserve-with-timeout -1"), Err(ProtocolError::BadFormat));
}

#[test]
fn tube_names() {
    let max = "a".repeat(200);
    assert_eq!(
        parse(format!("use {max}").as_bytes(), MAX),
        Ok(Command::Use(max.as_bytes()))
    );
    assert_eq!(
        parse(format!("use {max}a").as_bytes(), MAX),
        Err(ProtocolError::BadFormat)
    );
    assert_eq!(p("use -foo"), Err(ProtocolError::BadFormat));
    assert_eq!(p("use foo "), Err(ProtocolError::BadFormat));
    assert_eq!(p("use  foo"), Err(ProtocolError::BadFormat));
    assert_eq!(
        p("watch a+b/c;d.e$f_g(h)-i"),
        Ok(Command::Watch(b"a+b/c;d.e$f_g(h)-i"))
    );
    assert_eq!(p("ignore a*b"), Err(ProtocolError::BadFormat));
    assert_eq!(p("stats-tube "), Err(ProtocolError::BadFormat));
}

#[test]
fn pause_tube() {
    assert_eq!(
        p("pause-tube foo 10"),
        Ok(Command::PauseTube {
            name: b"foo",
            delay: 10
        })
    );
    assert_eq!(
        p("pause-tubedefault 0"),
        Ok(Command::PauseTube {
            name: b"default",
            delay: 0
        })
    );
    assert_eq!(p("pause-tube foo"), Err(ProtocolError::BadFormat));
    assert_eq!(p("pause-tube foo 1 "), Err(ProtocolError::BadFormat));
    assert_eq!(
        p("pause-tube -foo 1"),
        Err(ProtocolError::BadFormatCounted(Op::PauseTube))
    );
    assert_eq!(p("pause-tube"), Err(ProtocolError::BadFormat));
}

#[test]
fn never_panics_on_any_short_input() {
    let alphabet = b" 0129-apqrstuvw\r\n\0\xff";
    for a in alphabet {
        for b in alphabet {
            for c in alphabet {
                let line = [b'p', b'u', b't', b' ', *a, *b, *c];
                let _ = parse(&line, MAX);
                let line = [b'k', b'i', b'c', b'k', b' ', *a, *b, *c];
                let _ = parse(&line, MAX);
            }
        }
    }
}

#[test]
fn a_line_ends_at_the_first_cr_only_if_an_lf_follows_it() {
    assert_eq!(line_end(b"use a\r\nstats\r\n"), Some(5));
    assert_eq!(line_end(b"\r\n"), Some(0));
    // The CR's successor has not arrived yet: no end so far.
    assert_eq!(line_end(b"use a\r"), None);
    assert_eq!(line_end(b""), None);
    // A lone CR hides every CRLF after it.
    assert_eq!(line_end(b"use\ra\r\n"), None);
    // Only the first MAX_LINE bytes are looked at.
    let mut long = vec![b'x'; MAX_LINE - 2];
    long.extend_from_slice(b"\r\n");
    assert_eq!(line_end(&long), Some(MAX_LINE - 2));
    let mut longer = vec![b'x'; MAX_LINE - 1];
    longer.extend_from_slice(b"\r\n");
    assert_eq!(line_end(&longer), None);
}
