//! The framers and the session on hand-made streams: each framing rule, every
//! split of the input, and the pairing of replies with commands. (The framing is
//! checked against the engine's own server in `tests/track_engine.rs`.)

use beanpole_engine::protocol::{
    line_end, Op, BAD_FORMAT, EXPECTED_CRLF, JOB_TOO_BIG, MAX_LINE, UNKNOWN_COMMAND,
};

use super::*;

const MAX_JOB: u32 = 16;

/// Every command of `input` pushed in one piece.
fn frame(input: &[u8]) -> Vec<FramedCommand> {
    frame_split(input, &[])
}

/// Every command of `input` pushed in pieces cut at `cuts` (ascending).
fn frame_split(input: &[u8], cuts: &[usize]) -> Vec<FramedCommand> {
    let mut framer = CommandFramer::new(MAX_JOB);
    let mut out = Vec::new();
    let mut from = 0;
    for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
        framer.push(&input[from..cut]);
        from = cut;
        while let Some(cmd) = framer.next_command() {
            out.push(cmd);
        }
    }
    out
}

fn replies(cmds: &[FramedCommand]) -> Vec<Option<&'static [u8]>> {
    cmds.iter().map(|c| c.fixed_reply).collect()
}

fn tube(name: &str) -> bytes::Bytes {
    bytes::Bytes::copy_from_slice(name.as_bytes())
}

#[test]
fn pipelined_commands_come_out_in_order_with_their_kinds() {
    let cmds = frame(b"use a\r\nwatch b\r\nignore default\r\nstats\r\nquitter\r\nuse c\r\n");
    let kinds: Vec<_> = cmds.iter().map(|c| c.kind.clone()).collect();
    assert_eq!(
        kinds,
        [
            CommandKind::Use(tube("a")),
            CommandKind::Watch(tube("b")),
            CommandKind::Ignore(tube("default")),
            CommandKind::Other,
            // `quit` is matched by prefix, and nothing after it is read.
            CommandKind::Quit,
        ]
    );
    assert_eq!(&cmds[0].bytes[..], b"use a\r\n");
    assert_eq!(cmds[3].op, Some(Op::Stats));
    assert!(!cmds[4].expects_reply());
    assert!(cmds.iter().all(|c| c.fixed_reply.is_none()));
}

#[test]
fn nothing_is_read_after_quit() {
    let mut framer = CommandFramer::new(MAX_JOB);
    framer.push(b"quit\r\nstats\r\n");
    assert_eq!(
        framer.next_command().map(|c| c.kind),
        Some(CommandKind::Quit)
    );
    assert!(framer.is_closed());
    framer.push(b"stats\r\n");
    assert_eq!(framer.next_command(), None);
    assert_eq!(framer.buffered(), 0);
}

#[test]
fn a_put_body_holding_crlf_and_commands_is_one_command() {
    let body = b"use x\r\nquit\r\n\r\n";
    let mut input = format!("put 1 0 60 {}\r\n", body.len()).into_bytes();
    input.extend_from_slice(body);
    input.extend_from_slice(b"\r\nuse y\r\n");
    let cmds = frame(&input);
    assert_eq!(cmds.len(), 2);
    assert_eq!(cmds[0].op, Some(Op::Put));
    assert_eq!(cmds[0].kind, CommandKind::Other);
    assert_eq!(cmds[0].fixed_reply, None);
    assert_eq!(&cmds[0].bytes[..], &input[..input.len() - 7]);
    assert_eq!(cmds[1].kind, CommandKind::Use(tube("y")));
}

#[test]
fn a_body_without_its_crlf_is_expected_crlf_and_takes_exactly_its_size() {
    // Body of 3: "abc" then "de" where CRLF should be; "f\r\n" is a line.
    let cmds = frame(b"put 0 0 60 3\r\nabcdef\r\nstats\r\n");
    assert_eq!(
        replies(&cmds),
        [Some(EXPECTED_CRLF), Some(UNKNOWN_COMMAND), None]
    );
    assert_eq!(&cmds[0].bytes[..], b"put 0 0 60 3\r\nabcde");
    assert_eq!(&cmds[1].bytes[..], b"f\r\n");
    // A body whose CRLF is split across the end: "ab\r" then "\n" is the CRLF.
    let cmds = frame(b"put 0 0 60 2\r\nab\r\nstats\r\n");
    assert_eq!(replies(&cmds), [None, None]);
}

#[test]
fn put_lines_that_do_not_parse_have_no_body() {
    let cmds = frame(b"put 0 0 60 5x\r\nhello\r\nput 0 0 60\r\nput\r\nput 0 0 60 -1\r\n");
    assert_eq!(
        replies(&cmds),
        [
            Some(BAD_FORMAT),
            Some(UNKNOWN_COMMAND),
            Some(BAD_FORMAT),
            Some(UNKNOWN_COMMAND),
            Some(BAD_FORMAT),
        ]
    );
    assert!(cmds.iter().all(|c| c.op.is_none() && c.discard == 0));
    assert_eq!(&cmds[0].bytes[..], b"put 0 0 60 5x\r\n");
}

#[test]
fn an_oversized_body_is_thrown_away_and_not_kept() {
    // Over the limit even with trailing junk: beanstalkd checks the size first.
    for line in ["put 0 0 60 20\r\n", "put 0 0 60 20 junk\r\n"] {
        let mut input = line.as_bytes().to_vec();
        // 22 bytes are thrown away, whatever they are: "use a\r\nuse b\r\nuse c\r\ns".
        input.extend_from_slice(b"use a\r\nuse b\r\nuse c\r\nstats\r\nuse d\r\n");
        let cmds = frame(&input);
        assert_eq!(
            replies(&cmds),
            [Some(JOB_TOO_BIG), Some(UNKNOWN_COMMAND), None]
        );
        assert_eq!(&cmds[0].bytes[..], line.as_bytes());
        assert_eq!(cmds[0].discard, 22);
        assert_eq!(cmds[0].wire_len(), (line.len() + 22) as u64);
        assert_eq!(cmds[0].op, Some(Op::Put));
        assert_eq!(&cmds[1].bytes[..], b"tats\r\n");
        assert_eq!(cmds[2].kind, CommandKind::Use(tube("d")));
    }
}

#[test]
fn a_huge_discard_holds_no_memory() {
    let mut framer = CommandFramer::new(MAX_JOB);
    framer.push(b"put 0 0 60 4294967295\r\n");
    assert_eq!(framer.next_command(), None);
    let chunk = vec![b'x'; 1 << 20];
    let total: u64 = 4_294_967_297;
    let mut pushed = 0u64;
    while pushed + chunk.len() as u64 <= total {
        framer.push(&chunk);
        pushed += chunk.len() as u64;
        assert_eq!(framer.buffered(), 0);
    }
    assert_eq!(framer.next_command(), None);
    let mut rest = vec![b'y'; (total - pushed) as usize];
    rest.extend_from_slice(b"stats\r\n");
    framer.push(&rest);
    let cmd = framer
        .next_command()
        .expect("the put, once its body is thrown away");
    assert_eq!((cmd.discard, cmd.fixed_reply), (total, Some(JOB_TOO_BIG)));
    assert_eq!(framer.next_command().and_then(|c| c.op), Some(Op::Stats));
}

#[test]
fn over_long_lines_are_one_bad_format_each() {
    // MAX_LINE bytes with the CRLF: a line (an unknown one).
    let mut fits = vec![b'a'; MAX_LINE - 2];
    fits.extend_from_slice(b"\r\n");
    assert_eq!(replies(&frame(&fits)), [Some(UNKNOWN_COMMAND)]);

    // Far too long: thrown away up to its CRLF.
    let mut input = vec![b'a'; 3 * MAX_LINE + 17];
    input.extend_from_slice(b"\r\nstats\r\n");
    let cmds = frame(&input);
    assert_eq!(replies(&cmds), [Some(BAD_FORMAT), None]);
    assert_eq!(cmds[0].bytes.len(), MAX_LINE + 2);
    // It stands as MAX_LINE bytes with no line end, then CRLF.
    assert_eq!(line_end(&cmds[0].bytes), None);
    assert!(cmds[0].bytes.ends_with(b"\r\n"));

    // One byte too long: the CR is the MAX_LINE-th byte, the LF after the cut, so
    // the next CRLF (the one of `stats`) ends the over-long line.
    let mut input = vec![b'a'; MAX_LINE - 1];
    input.extend_from_slice(b"\r\nstats\r\nuse t\r\n");
    let cmds = frame(&input);
    assert_eq!(replies(&cmds), [Some(BAD_FORMAT), None]);
    assert_eq!(cmds[1].kind, CommandKind::Use(tube("t")));
}

#[test]
fn a_lone_cr_hides_the_line_end_until_the_line_is_too_long() {
    let mut framer = CommandFramer::new(MAX_JOB);
    framer.push(b"stats\rjunk\r\nuse a\r\n");
    assert_eq!(framer.next_command(), None);
    framer.push(&vec![b'z'; MAX_LINE]);
    framer.push(b"\r\nuse b\r\n");
    let cmd = framer.next_command().expect("the over-long line");
    assert_eq!(cmd.fixed_reply, Some(BAD_FORMAT));
    let cmd = framer.next_command().expect("use b");
    assert_eq!(cmd.kind, CommandKind::Use(tube("b")));
    assert!(framer.at_boundary());
}

#[test]
fn refused_lines_are_other_with_their_reply() {
    let cmds = frame(b"use -a\r\nwatch \r\nignore a b\r\nstats\0\r\nfoo\r\ndelete 1 \r\n");
    assert!(cmds
        .iter()
        .all(|c| c.kind == CommandKind::Other && c.op.is_none()));
    assert_eq!(
        replies(&cmds),
        [
            Some(BAD_FORMAT),
            Some(BAD_FORMAT),
            Some(BAD_FORMAT),
            Some(BAD_FORMAT),
            Some(UNKNOWN_COMMAND),
            Some(BAD_FORMAT),
        ]
    );
}

/// A stream with every framing case in it.
#[test]
fn reserves_that_may_wait_are_marked() {
    let cmds = frame(
        b"reserve\r\nreserve-with-timeout 0\r\nreserve-with-timeout 1\r\nreserve-job 1\r\nreserve-with-timeout abc\r\nreserves\r\n",
    );
    let waits: Vec<bool> = cmds.iter().map(|c| c.waits).collect();
    // `reserve-with-timeout abc` means 0, as beanstalkd reads it.
    assert_eq!(waits, [true, false, true, false, false, false]);
}

#[test]
fn a_put_begun_is_its_line_and_the_body_so_far() {
    let mut framer = CommandFramer::new(MAX_JOB);
    framer.push(b"stats\r\nput 0 0 1 5\r");
    assert!(framer.next_command().is_some());
    assert_eq!(framer.next_command(), None);
    // No line end yet: nothing is begun.
    assert_eq!(framer.begun(), None);
    framer.push(b"\nab");
    assert_eq!(framer.next_command(), None);
    assert_eq!(framer.begun(), Some((&b"put 0 0 1 5\r\nab"[..], 0)));
    framer.push(b"cde\r\nsta");
    assert!(framer.next_command().is_some());
    assert_eq!(framer.begun(), None);
    assert_eq!(framer.pending(), b"sta");
}

#[test]
fn an_oversized_put_begun_is_its_line_and_the_bytes_thrown_away() {
    let mut framer = CommandFramer::new(MAX_JOB);
    framer.push(b"put 0 0 1 20\r\n0123456789");
    assert_eq!(framer.next_command(), None);
    assert_eq!(framer.begun(), Some((&b"put 0 0 1 20\r\n"[..], 10)));
    framer.push(b"0123456789\r\n");
    let cmd = framer.next_command().expect("the put, thrown away");
    assert_eq!(cmd.fixed_reply, Some(JOB_TOO_BIG));
    assert_eq!(framer.begun(), None);
}

fn every_case() -> Vec<u8> {
    let mut s = Vec::new();
    s.extend_from_slice(b"use a\r\nwatch b\r\nput 0 0 60 5\r\nx\r\ny\r\n\r\n");
    s.extend_from_slice(b"put 0 0 60 3\r\nabcdef\r\n");
    s.extend_from_slice(b"put 0 0 60 20\r\n0123456789012345678901stats\r\n");
    s.extend_from_slice(&[b'q'; 2 * MAX_LINE]);
    s.extend_from_slice(b"\r\nignore a\rb\r\n");
    s.extend_from_slice(&[b'r'; MAX_LINE]);
    s.extend_from_slice(b"\r\nput 1 2 3 4x\r\nlist-tubes-watched\r\n");
    s.extend_from_slice(&[b's'; MAX_LINE - 1]);
    s.extend_from_slice(b"\r\nuse c\r\nwatch d\r\nquit\r\nuse e\r\n");
    s
}

#[test]
fn every_split_frames_the_same() {
    let input = every_case();
    let whole = frame(&input);
    assert_eq!(whole.last().map(|c| &c.kind), Some(&CommandKind::Quit));
    for cut in 0..=input.len() {
        assert_eq!(frame_split(&input, &[cut]), whole, "cut at {cut}");
    }
    let bytewise: Vec<usize> = (1..input.len()).collect();
    assert_eq!(frame_split(&input, &bytewise), whole);
}

#[test]
fn the_bytes_framed_frame_again_the_same() {
    // What a follower sends again must be framed by a server as the same
    // commands: frame the framed commands' bytes (and discards) once more.
    let whole = frame(&every_case());
    let mut again = Vec::new();
    for cmd in &whole {
        again.extend_from_slice(&cmd.bytes);
        again.extend(std::iter::repeat(b'-').take(cmd.discard as usize));
    }
    let framed_again = frame(&again);
    assert_eq!(framed_again.len(), whole.len());
    for (a, w) in framed_again.iter().zip(&whole) {
        // Only what the stream took differs: an over-long line's stand-in is
        // shorter or longer than the line.
        assert_eq!(a.received, a.wire_len());
        let a = FramedCommand {
            received: w.received,
            ..a.clone()
        };
        assert_eq!(&a, w);
    }
}

/// splitmix64: seeded random cut points.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[test]
fn random_splits_frame_the_same() {
    let input = every_case();
    let whole = frame(&input);
    let mut seed = 7;
    for _ in 0..500 {
        let n = (next(&mut seed) % 12) as usize;
        let mut cuts: Vec<usize> = (0..n)
            .map(|_| (next(&mut seed) % (input.len() as u64 + 1)) as usize)
            .collect();
        cuts.sort_unstable();
        assert_eq!(frame_split(&input, &cuts), whole, "cuts {cuts:?}");
    }
}

// The reply framer.

fn replies_of(input: &[u8], cuts: &[usize]) -> Result<Vec<Reply>, ReplyError> {
    let mut framer = ReplyFramer::new();
    let mut out = Vec::new();
    let mut from = 0;
    for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
        framer.push(&input[from..cut]);
        from = cut;
        while let Some(r) = framer.next_reply()? {
            out.push(r);
        }
    }
    assert_eq!(framer.buffered(), 0, "bytes left over");
    Ok(out)
}

#[test]
fn replies_with_bodies_are_cut_after_their_bodies() {
    let input: &[u8] = b"INSERTED 1\r\nRESERVED 1 14\r\nRESERVED 2 3\r\n\r\nFOUND 7 0\r\n\r\n\
        OK 8\r\n---\n- a\n\r\nUSING x\r\nWATCHING 2\r\nTIMED_OUT\r\n";
    let whole = replies_of(input, &[]).expect("replies");
    let lines: Vec<&[u8]> = whole.iter().map(Reply::line).collect();
    assert_eq!(
        lines,
        [
            &b"INSERTED 1"[..],
            b"RESERVED 1 14",
            b"FOUND 7 0",
            b"OK 8",
            b"USING x",
            b"WATCHING 2",
            b"TIMED_OUT"
        ]
    );
    assert_eq!(whole[1].body(), Some(&b"RESERVED 2 3\r\n"[..]));
    assert_eq!(whole[2].body(), Some(&b""[..]));
    assert_eq!(whole[3].body(), Some(&b"---\n- a\n"[..]));
    assert_eq!(whole[0].body(), None);
    assert_eq!(
        &whole[1].bytes()[..],
        b"RESERVED 1 14\r\nRESERVED 2 3\r\n\r\n"
    );
    let joined: Vec<u8> = whole.iter().flat_map(|r| r.bytes().to_vec()).collect();
    assert_eq!(joined, input);
    for cut in 0..=input.len() {
        assert_eq!(
            replies_of(input, &[cut]).as_ref(),
            Ok(&whole),
            "cut at {cut}"
        );
    }
    let bytewise: Vec<usize> = (1..input.len()).collect();
    assert_eq!(replies_of(input, &bytewise), Ok(whole));
}

#[test]
fn a_stream_that_is_no_replies_is_an_error_for_good() {
    for (input, error) in [
        (&b"RESERVED 1\r\n"[..], ReplyError::BadLength),
        (b"OK x\r\n", ReplyError::BadLength),
        (b"OK 1 2\r\n", ReplyError::BadLength),
        (
            b"FOUND 1 99999999999999999999999\r\n",
            ReplyError::BadLength,
        ),
        (b"OK 2\r\nabcd", ReplyError::MissingCrlf),
    ] {
        let mut framer = ReplyFramer::new();
        framer.push(input);
        assert_eq!(framer.next_reply(), Err(error), "{input:?}");
        framer.push(b"INSERTED 1\r\n");
        assert_eq!(framer.next_reply(), Err(error));
    }
    let mut framer = ReplyFramer::new();
    framer.push(&vec![b'A'; MAX_REPLY_LINE - 1]);
    assert_eq!(framer.next_reply(), Ok(None));
    framer.push(b"A");
    assert_eq!(framer.next_reply(), Err(ReplyError::LineTooLong));
}

// The session.

fn reply(bytes: &[u8]) -> Reply {
    let mut framer = ReplyFramer::new();
    framer.push(bytes);
    framer.next_reply().expect("valid").expect("complete")
}

fn watched(s: &Session) -> Vec<&[u8]> {
    s.watched().iter().map(|t| &t[..]).collect()
}

#[test]
fn use_watch_and_ignore_change_the_state_once_answered() {
    let mut s = Session::new(1 << 20);
    assert_eq!(&s.used()[..], b"default");
    assert_eq!(watched(&s), [b"default"]);
    let cmds = frame(
        b"use a\r\nwatch a\r\nwatch b\r\nwatch c\r\nwatch a\r\nignore default\r\nignore zz\r\n",
    );
    for cmd in cmds {
        s.send(cmd).expect("send");
    }
    assert_eq!(s.sent(), 7);
    assert_eq!(s.unanswered().len(), 7);
    // Nothing changes before the replies.
    assert_eq!(&s.used()[..], b"default");
    let answered = s.receive(&reply(b"USING a\r\n")).expect("use");
    assert_eq!(answered.kind, CommandKind::Use(tube("a")));
    assert_eq!(&s.used()[..], b"a");
    for r in ["WATCHING 2", "WATCHING 3", "WATCHING 4", "WATCHING 4"] {
        s.receive(&reply(format!("{r}\r\n").as_bytes()))
            .expect("watch");
    }
    assert_eq!(watched(&s), [&b"default"[..], b"a", b"b", b"c"]);
    // Ignore swaps the last tube into the place of the one it removes.
    s.receive(&reply(b"WATCHING 3\r\n")).expect("ignore");
    assert_eq!(watched(&s), [&b"c"[..], b"a", b"b"]);
    // Ignoring a tube not watched leaves the list.
    s.receive(&reply(b"WATCHING 3\r\n")).expect("ignore");
    assert_eq!(watched(&s), [&b"c"[..], b"a", b"b"]);
    assert_eq!((s.acked(), s.unanswered().len(), s.held()), (7, 0, 0));
    assert_eq!(
        s.receive(&reply(b"INSERTED 1\r\n")),
        Err(TrackError::UnexpectedReply)
    );
}

#[test]
fn not_ignored_and_other_replies_leave_the_state() {
    let mut s = Session::new(1 << 20);
    for cmd in frame(b"ignore default\r\nuse a\r\nwatch b\r\n") {
        s.send(cmd).expect("send");
    }
    s.receive(&reply(b"NOT_IGNORED\r\n")).expect("ignore");
    s.receive(&reply(b"OUT_OF_MEMORY\r\n")).expect("use");
    s.receive(&reply(b"INTERNAL_ERROR\r\n")).expect("watch");
    assert_eq!(&s.used()[..], b"default");
    assert_eq!(watched(&s), [b"default"]);
}

#[test]
fn replies_contradicting_the_state_are_errors() {
    let mut s = Session::new(1 << 20);
    for cmd in frame(b"use a\r\nwatch b\r\n") {
        s.send(cmd).expect("send");
    }
    assert_eq!(s.receive(&reply(b"USING b\r\n")), Err(TrackError::UsedTube));
    assert_eq!(
        s.receive(&reply(b"WATCHING 3\r\n")),
        Err(TrackError::WatchCount {
            server: 3,
            session: 2
        })
    );
    assert_eq!(s.acked(), 2);
}

#[test]
fn unanswered_commands_are_kept_in_order_within_a_bound() {
    let input = b"put 0 0 60 5\r\nhello\r\nstats\r\nput 0 0 60 30\r\n";
    let mut input = input.to_vec();
    input.extend_from_slice(&[b'z'; 32]);
    input.extend_from_slice(b"peek 1\r\nquit\r\n");
    let cmds = frame(&input);
    assert_eq!(cmds.len(), 5);
    let first_len = cmds[0].bytes.len();
    let mut s = Session::new(first_len + 7);
    s.send(cmds[0].clone()).expect("put");
    assert!(!s.is_full());
    s.send(cmds[1].clone()).expect("stats");
    assert!(!s.is_full());
    // The oversized put holds its line only.
    s.send(cmds[2].clone()).expect("big put");
    assert!(s.is_full());
    assert_eq!(s.held(), first_len + 7 + cmds[2].bytes.len());
    s.send(cmds[3].clone()).expect("peek");
    s.send(cmds[4].clone()).expect("quit");
    assert!(s.quit_sent());
    assert_eq!(s.send(cmds[0].clone()), Err(TrackError::AfterQuit));
    assert_eq!((s.sent(), s.unanswered().len()), (5, 4));
    let pending: Vec<_> = s.unanswered().cloned().collect();
    assert_eq!(pending, cmds[..4]);
    s.receive(&reply(b"INSERTED 1\r\n")).expect("put");
    assert!(s.is_full());
    s.receive(&reply(b"OK 3\r\nabc\r\n")).expect("stats");
    assert!(!s.is_full());
    let pending: Vec<_> = s.unanswered().cloned().collect();
    assert_eq!(pending, cmds[2..4]);
    assert_eq!(s.acked(), 2);
}

#[test]
fn the_input_buffers_have_room_for_a_whole_read() {
    // A read into a buffer with little room takes a command in pieces, a
    // system call each.
    let mut framer = CommandFramer::new(MAX_JOB);
    let put = b"put 0 0 120 5\r\nhello\r\nput 0 0 120 3\r\nab";
    framer.input_mut().extend_from_slice(put);
    assert_eq!(framer.next_command().map(|c| c.bytes.len()), Some(22));
    let input = framer.input_mut();
    assert!(input.capacity() - input.len() >= READ_SPARE);
    let mut replies = ReplyFramer::new();
    replies.input_mut().extend_from_slice(b"INSERTED 1\r\nINSE");
    assert!(replies.next_reply().expect("a reply").is_some());
    let input = replies.input_mut();
    assert!(input.capacity() - input.len() >= READ_SPARE);
}
