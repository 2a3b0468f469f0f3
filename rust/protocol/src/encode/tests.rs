//! The encoding held to the parser: every command, written and read back, is itself.

use proptest::prelude::*;

use super::*;
use crate::{parse, Op, MAX_JOB_SIZE_LIMIT, MAX_LINE, MAX_TUBE_NAME};

/// The command of each `Op` (in `Op`'s order), its arguments taken from the numbers
/// and the name, within what the parser accepts back unchanged.
fn command(kind: usize, n: u64, a: u32, b: u32, c: u32, name: &[u8]) -> Command<'_> {
    match kind {
        0 => Command::Put {
            pri: a,
            delay: b,
            // The parser reads a TTR of 0 as 1.
            ttr: c.max(1),
            body: (n % (u64::from(MAX_JOB_SIZE_LIMIT) + 1)) as u32,
        },
        1 => Command::Peek(n),
        2 => Command::PeekReady,
        3 => Command::PeekDelayed,
        4 => Command::PeekBuried,
        5 => Command::Reserve,
        6 => Command::ReserveWithTimeout(a % (i32::MAX as u32 + 1)),
        7 => Command::ReserveJob(n),
        8 => Command::Delete(n),
        9 => Command::Release {
            id: n,
            pri: a,
            delay: b,
        },
        10 => Command::Bury { id: n, pri: a },
        11 => Command::Kick(a),
        12 => Command::KickJob(n),
        13 => Command::Touch(n),
        14 => Command::Stats,
        15 => Command::StatsJob(n),
        16 => Command::StatsTube(name),
        17 => Command::Use(name),
        18 => Command::Watch(name),
        19 => Command::Ignore(name),
        20 => Command::ListTubes,
        21 => Command::ListTubeUsed,
        22 => Command::ListTubesWatched,
        23 => Command::PauseTube { name, delay: a },
        _ => Command::Quit,
    }
}

fn line<B: Body>(cmd: Command<'_, B>) -> Vec<u8> {
    let mut buf = Vec::new();
    cmd.encode(&mut buf).expect("encodes");
    buf
}

#[test]
fn the_builder_covers_every_command() {
    for kind in 0..Op::COUNT {
        assert_eq!(command(kind, 1, 1, 1, 1, b"t").op().index(), kind);
    }
}

#[test]
fn bare_lines_are_canonical() {
    for text in [
        "put 0 0 1 0",
        "put 4294967295 4294967295 4294967295 1073741824",
        "reserve-with-timeout 2147483647",
        "delete 18446744073709551615",
        "release 1 2 3",
        "bury 9 0",
        "kick 100",
        "pause-tube p 60",
        "use a",
        "stats-tube x",
        "list-tubes-watched",
        "quit",
    ] {
        let parsed = parse(text.as_bytes(), MAX_JOB_SIZE_LIMIT).expect(text);
        assert_eq!(line(parsed), format!("{text}\r\n").as_bytes());
    }
}

#[test]
fn put_carries_its_body() {
    let buf = line(Command::Put {
        pri: u32::MAX,
        delay: 0,
        ttr: 60,
        body: &b"a\r\nb"[..],
    });
    assert_eq!(buf, b"put 4294967295 0 60 4\r\na\r\nb\r\n");
    let parsed = parse(b"put 4294967295 0 60 4", MAX_JOB_SIZE_LIMIT);
    assert_eq!(
        parsed,
        Ok(Command::Put {
            pri: u32::MAX,
            delay: 0,
            ttr: 60,
            body: 4
        })
    );
}

#[test]
fn names_with_line_breaks_are_refused() {
    let mut buf = Vec::new();
    for cmd in [
        Command::<u32>::Use(b"a\r\nstats"),
        Command::Watch(b"a\n"),
        Command::Ignore(b"\r"),
        Command::StatsTube(b"x\n"),
        Command::PauseTube {
            name: b"p\r\n",
            delay: 1,
        },
    ] {
        assert_eq!(cmd.encode(&mut buf), Err(EncodeError::LineBreakInName));
    }
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
        arg(&mut buf, n);
        assert_eq!(buf, format!(" {n}").as_bytes());
    }
}

/// Bytes of a valid tube name.
const NAME_BYTES: &[u8] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-+/;.$_()";

fn tube_name() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(proptest::sample::select(NAME_BYTES), 1..=MAX_TUBE_NAME).prop_map(
        |mut name| {
            if name[0] == b'-' {
                name[0] = b'a';
            }
            name
        },
    )
}

proptest! {
    /// Any command, encoded, fits the server's line limit and parses back to itself,
    /// and a put's body follows its line.
    #[test]
    fn encoded_commands_parse_back(
        kind in 0..Op::COUNT,
        n in any::<u64>(),
        a in any::<u32>(),
        b in any::<u32>(),
        c in any::<u32>(),
        name in tube_name(),
        body in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let cmd = command(kind, n, a, b, c, &name);
        let buf = line(cmd);
        prop_assert!(buf.len() <= MAX_LINE, "{} bytes", buf.len());
        prop_assert!(buf.ends_with(b"\r\n"));
        prop_assert_eq!(parse(&buf[..buf.len() - 2], MAX_JOB_SIZE_LIMIT), Ok(cmd));

        if let Command::Put { pri, delay, ttr, .. } = cmd {
            let sent = line(Command::Put { pri, delay, ttr, body: &body[..] });
            let end = memchr::memchr(b'\n', &sent).expect("a line") + 1;
            prop_assert_eq!(
                parse(&sent[..end - 2], MAX_JOB_SIZE_LIMIT),
                Ok(Command::Put { pri, delay, ttr, body: body.len() as u32 })
            );
            prop_assert_eq!(&sent[end..end + body.len()], &body[..]);
            prop_assert_eq!(&sent[end + body.len()..], b"\r\n");
        }
    }
}
