//! `node::track` against the engine's own server: seeded random byte streams of
//! valid and invalid commands (over-long lines, lone CRs, bad put lines, bodies
//! holding CRLF and commands, bodies of the wrong size, oversized bodies) go to
//! a real server on loopback, cut at random points. The command framer must
//! find exactly as many commands as the server answers (and the bytes it reads),
//! the reply framer must cut the server's output into exactly that many
//! replies, each command whose reply is known from its bytes must get that
//! reply, and the session's used tube and watch list must be what
//! `list-tube-used` and `list-tubes-watched` say at the end. The commands'
//! bytes as framed, sent again on a new connection, must be answered alike.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use beanpole_cluster::node::track::{
    CommandFramer, CommandKind, FramedCommand, Reply, ReplyFramer, Session,
};
use beanpole_engine::protocol::MAX_LINE;
use beanpole_engine::server::{BoundAddr, ListenAddr, ServerConfig, ServerHandle};

/// The sizes a run's streams are made with.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    /// The server's job size limit.
    max_job: u32,
    /// Oversized puts announce at most this much: a stream's tail is then sure
    /// to end between two commands (see [`resync`]).
    max_oversized: u32,
}

/// A small job size limit: oversized bodies are cheap, so many streams.
const SMALL: Sizes = Sizes {
    max_job: 64,
    max_oversized: 300,
};
/// Bodies past the size the server reads in place (4 KiB).
const LARGE: Sizes = Sizes {
    max_job: 20_000,
    max_oversized: 30_000,
};
const TUBES: [&str; 6] = ["default", "a", "b", "c", "d", "e"];
/// What every stream ends with (after [`resync`]): the state, then one of
/// these quits (the server matches `quit` as a prefix).
const TAIL: &[u8] = b"list-tube-used\r\nlist-tubes-watched\r\n";
const QUITS: [&[u8]; 3] = [b"quit\r\n", b"quitter\r\n", b"quit 1\r\n"];

/// splitmix64: a small seeded generator, so a failing case names its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.range(0, items.len() as u64 - 1) as usize]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.range(1, 100) <= percent
    }
}

/// Bytes of a body: plain bytes, CRLFs, lone CRs and command-looking text
/// (never a reserve: a blocked reserve would stop the server answering).
fn body(rng: &mut Rng, len: usize) -> Vec<u8> {
    const BITS: [&[u8]; 9] = [
        b"x",
        b"\r\n",
        b"\r",
        b"use a\r\n",
        b"watch b\r\n",
        b"ignore default\r\n",
        b"put 0 0 1 3\r\n",
        b"stats\r\n",
        b" ",
    ];
    let mut b = Vec::with_capacity(len);
    while b.len() < len {
        let bit = *rng.pick(&BITS);
        b.extend_from_slice(bit);
    }
    b.truncate(len);
    b
}

fn line(text: String) -> Vec<u8> {
    let mut l = text.into_bytes();
    l.extend_from_slice(b"\r\n");
    l
}

/// One piece of a stream: usually a whole command, sometimes one that leaves
/// the server expecting more (a body too short, a line without its CRLF), so
/// that the next piece is framed differently than it was written.
fn piece(rng: &mut Rng, sizes: Sizes) -> Vec<u8> {
    let tube = *rng.pick(&TUBES);
    let id = rng.range(1, 40);
    match rng.range(0, 23) {
        0 | 1 => line(format!("use {tube}")),
        2 | 3 => line(format!("watch {tube}")),
        4 | 5 => line(format!("ignore {tube}")),
        6 | 7 => {
            let n = rng.range(0, u64::from(sizes.max_job)) as usize;
            let mut p = line(format!(
                "put {} 0 {} {n}",
                rng.range(0, 2000),
                rng.range(0, 3)
            ));
            p.extend_from_slice(&body(rng, n));
            p.extend_from_slice(b"\r\n");
            p
        }
        8 => {
            // A body longer or shorter than announced (EXPECTED_CRLF, or the body
            // runs into what follows).
            let n = rng.range(0, u64::from(sizes.max_job));
            let actual = rng.range(0, u64::from(sizes.max_job)) as usize;
            let mut p = line(format!("put 0 0 60 {n}"));
            p.extend_from_slice(&body(rng, actual));
            p.extend_from_slice(b"\r\n");
            p
        }
        9 => {
            // Oversized: its body is thrown away (usually exactly, sometimes not).
            let n = rng.range(u64::from(sizes.max_job) + 1, u64::from(sizes.max_oversized));
            let junk = if rng.chance(30) { " junk" } else { "" };
            let mut p = line(format!("put 0 0 60 {n}{junk}"));
            let len = if rng.chance(70) {
                n as usize + 2
            } else {
                rng.range(0, n + 10) as usize
            };
            p.extend_from_slice(&body(rng, len));
            p
        }
        10 => {
            let bad = [
                "put 0 0 60 5x",
                "put 0 0 60",
                "put 1 2",
                "put -1 0 0 1",
                "put 0 0 60 99999999999",
                "put",
                "put 0 0 60 3 ",
            ];
            line(rng.pick(&bad).to_string())
        }
        11 => {
            // Around and past the longest line.
            let len = if rng.chance(60) {
                rng.range(MAX_LINE as u64 - 4, MAX_LINE as u64 + 2)
            } else {
                rng.range(MAX_LINE as u64, 3 * MAX_LINE as u64)
            } as usize;
            let mut p = body(rng, len);
            p.retain(|&b| b != b'\r');
            p.resize(len, b'y');
            p.extend_from_slice(b"\r\n");
            p
        }
        12 => {
            // A lone CR hides the line end until the line is too long.
            let mut p = b"stats\rjunk\r\n".to_vec();
            if rng.chance(50) {
                let len = rng.range(0, 300) as usize;
                p.extend_from_slice(&body(rng, len));
                p.extend_from_slice(b"\r\n");
            }
            p
        }
        13 => line(format!("peek {id}")),
        14 => line(
            rng.pick(&[
                "peek-ready",
                "peek-delayed",
                "peek-buried",
                "stats",
                "list-tubes",
                "list-tube-used",
                "list-tubes-watched",
            ])
            .to_string(),
        ),
        15 | 16 => line("reserve-with-timeout 0".into()),
        17 => line(format!("reserve-job {id}")),
        18 => line(match rng.range(0, 4) {
            0 => format!("delete {id}"),
            1 => format!("release {id} {} 0", rng.range(0, 9)),
            2 => format!("bury {id} 1"),
            3 => format!("touch {id}"),
            _ => format!("kick-job {id}"),
        }),
        19 => line(match rng.range(0, 3) {
            0 => format!("kick {}", rng.range(0, 5)),
            1 => format!("stats-job {id}"),
            2 => format!("stats-tube {tube}"),
            _ => format!("pause-tube {tube} 0"),
        }),
        20 => {
            let bad = [
                "",
                "foo",
                "use",
                "watch ",
                "ignore -x",
                "use a b",
                "stats\0",
                "delete 1 ",
                "reservex",
                "peek-readyy",
            ];
            line(rng.pick(&bad).to_string())
        }
        21 => line(format!(
            "watch {}",
            "t".repeat(rng.range(199, 202) as usize)
        )),
        22 => {
            // A line without its CRLF: it joins the next piece.
            let mut p = line(format!("watch {tube}"));
            p.truncate(p.len() - 2);
            p
        }
        _ => line("list-tubes-watched".into()),
    }
}

/// Whatever the stream left the server expecting (a body of at most
/// `max_job` + 2 bytes, a discard of at most `max_oversized` + 2, an over-long
/// line, a line with a lone CR), these bytes end it, ending between two
/// commands: the x's outlast any body or discard and make any line over-long,
/// and of the two CRLFs one at least is a line end (the first may straddle the
/// server's cut of an over-long line into MAX_LINE pieces, where it is no line
/// end).
fn resync(sizes: Sizes) -> Vec<u8> {
    let mut r = vec![b'x'; sizes.max_oversized as usize + 2 + 2 * MAX_LINE];
    r.extend_from_slice(b"\r\n\r\n");
    r
}

/// Random cut points of `len` bytes (ascending).
fn cuts(rng: &mut Rng, len: usize) -> Vec<usize> {
    let n = rng.range(0, 16);
    let mut c: Vec<usize> = (0..n).map(|_| rng.range(0, len as u64) as usize).collect();
    c.sort_unstable();
    c
}

fn pieces(input: &[u8], cuts: &[usize]) -> Vec<std::ops::Range<usize>> {
    let mut from = 0;
    let mut out = Vec::new();
    for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
        out.push(from..cut);
        from = cut;
    }
    out
}

fn frame_commands(input: &[u8], cuts: &[usize], max_job: u32) -> Vec<FramedCommand> {
    let mut framer = CommandFramer::new(max_job);
    let mut out = Vec::new();
    for range in pieces(input, cuts) {
        framer.push(&input[range]);
        while let Some(cmd) = framer.next_command() {
            out.push(cmd);
        }
    }
    out
}

fn frame_replies(output: &[u8], cuts: &[usize], seed: u64) -> Vec<Reply> {
    let mut framer = ReplyFramer::new();
    let mut out = Vec::new();
    for range in pieces(output, cuts) {
        framer.push(&output[range]);
        loop {
            match framer.next_reply() {
                Ok(Some(r)) => out.push(r),
                Ok(None) => break,
                Err(e) => panic!("seed {seed}: the server's output is no replies: {e}"),
            }
        }
    }
    assert_eq!(framer.buffered(), 0, "seed {seed}: output left unframed");
    out
}

/// Send `input` in pieces cut at `cuts` on a new connection, and everything the
/// server sends back until it closes.
fn exchange(addr: SocketAddr, input: &[u8], cuts: &[usize], seed: u64) -> Vec<u8> {
    let mut conn = TcpStream::connect(addr).expect("connect");
    conn.set_nodelay(true).expect("nodelay");
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut reader = conn.try_clone().expect("clone");
    // The replies are read meanwhile, so that neither side's buffers can fill.
    let read = std::thread::spawn(move || {
        let mut out = Vec::new();
        reader.read_to_end(&mut out).map(|_| out)
    });
    for range in pieces(input, cuts) {
        // The server closes at a quit: what is written after may be refused.
        if conn.write_all(&input[range]).is_err() {
            break;
        }
    }
    let _ = conn.shutdown(std::net::Shutdown::Write);
    match read.join().expect("reader") {
        Ok(out) => out,
        Err(e) => panic!("seed {seed}: the server's replies did not end: {e}"),
    }
}

/// The tubes of a `list-tubes-watched` YAML body, in order.
fn yaml_list(body: &[u8]) -> Vec<Vec<u8>> {
    body.split(|&b| b == b'\n')
        .filter_map(|l| l.strip_prefix(b"- "))
        .map(<[u8]>::to_vec)
        .collect()
}

/// One stream; the number of tubes watched at its end.
fn one_case(addr: SocketAddr, sizes: Sizes, seed: u64) -> usize {
    let mut rng = Rng(seed);
    let mut input = Vec::new();
    for _ in 0..rng.range(1, 40) {
        input.extend_from_slice(&piece(&mut rng, sizes));
    }
    input.extend_from_slice(&resync(sizes));
    input.extend_from_slice(TAIL);
    let quit = *rng.pick(&QUITS);
    input.extend_from_slice(quit);

    let cmds = frame_commands(&input, &cuts(&mut rng, input.len()), sizes.max_job);
    let whole = frame_commands(&input, &[], sizes.max_job);
    assert_eq!(cmds, whole, "seed {seed}: framing depends on the cuts");
    let output = exchange(addr, &input, &cuts(&mut rng, input.len()), seed);
    let replies = frame_replies(&output, &cuts(&mut rng, output.len()), seed);

    // The stream ends at its tail's quit, between two commands (no piece has a
    // quit of its own): every command before it is answered once.
    let [.., used_cmd, watched_cmd, quit] = &cmds[..] else {
        panic!("seed {seed}: fewer than three commands framed")
    };
    assert_eq!(quit.kind, CommandKind::Quit, "seed {seed}: no quit framed");
    assert_eq!(&used_cmd.bytes[..], b"list-tube-used\r\n", "seed {seed}");
    assert_eq!(
        &watched_cmd.bytes[..],
        b"list-tubes-watched\r\n",
        "seed {seed}"
    );
    let read: u64 = cmds.iter().map(|c| c.received).sum();
    assert_eq!(read, input.len() as u64, "seed {seed}: bytes read");
    let answered: Vec<&FramedCommand> = cmds.iter().filter(|c| c.expects_reply()).collect();
    assert_eq!(
        replies.len(),
        answered.len(),
        "seed {seed}: {} commands framed, {} replies; output {:?}",
        answered.len(),
        replies.len(),
        String::from_utf8_lossy(&output)
    );
    for (i, (cmd, reply)) in answered.iter().zip(&replies).enumerate() {
        if let Some(fixed) = cmd.fixed_reply {
            assert_eq!(
                &reply.bytes()[..],
                fixed,
                "seed {seed}: command {i} {:?}",
                String::from_utf8_lossy(&cmd.bytes)
            );
        }
    }

    let mut session = Session::new(usize::MAX);
    for cmd in &cmds {
        session.send(cmd.clone()).expect("send");
    }
    for (i, reply) in replies.iter().enumerate() {
        if let Err(e) = session.receive(reply) {
            panic!("seed {seed}: reply {i}: {e}");
        }
    }
    assert_eq!(session.acked(), replies.len() as u64);
    assert_eq!(session.unanswered().len(), 0);

    // The state the server reports at the end is the session's.
    let used = &replies[replies.len() - 2];
    assert_eq!(
        used.line().strip_prefix(b"USING "),
        Some(&session.used()[..]),
        "seed {seed}"
    );
    let watched = replies[replies.len() - 1].body().expect("a list");
    let mine: Vec<Vec<u8>> = session.watched().iter().map(|t| t.to_vec()).collect();
    assert_eq!(yaml_list(watched), mine, "seed {seed}: watch list");

    // Sent again as framed (the stand-in of an over-long line, filler for a
    // thrown-away body), as a follower resends them to a new leader, the
    // commands are answered alike: as many replies, the same fixed ones, the
    // same state at the end.
    let mut again = Vec::new();
    for cmd in &cmds {
        again.extend_from_slice(&cmd.bytes);
        again.resize(again.len() + cmd.discard as usize, b'-');
    }
    let output = exchange(addr, &again, &cuts(&mut rng, again.len()), seed);
    let replies_again = frame_replies(&output, &[], seed);
    assert_eq!(replies_again.len(), replies.len(), "seed {seed}: resent");
    for (i, cmd) in answered.iter().enumerate() {
        if cmd.fixed_reply.is_some() {
            assert_eq!(replies_again[i], replies[i], "seed {seed}: resent {i}");
        }
    }
    let n = replies.len();
    assert_eq!(
        replies_again[n - 2..],
        replies[n - 2..],
        "seed {seed}: resent"
    );
    mine.len()
}

/// `cases` streams made with `sizes` through a server whose job size limit is
/// `sizes.max_job`.
fn run(sizes: Sizes, cases: u64) {
    let config = ServerConfig {
        listen: vec![ListenAddr::Tcp(([127, 0, 0, 1], 0).into())],
        threads: 1,
        max_job_size: sizes.max_job,
        ..ServerConfig::default()
    };
    let server = ServerHandle::start(config).expect("server");
    let BoundAddr::Tcp(addr) = *server.local_addr() else {
        panic!("expected TCP")
    };
    let mut most_watched = 0;
    for seed in 0..cases {
        most_watched = most_watched.max(one_case(addr, sizes, seed));
    }
    // The streams did build watch lists worth comparing.
    assert!(most_watched >= 4, "at most {most_watched} tubes watched");
}

#[test]
fn framing_and_state_agree_with_the_engine_server() {
    run(SMALL, 3000);
}

#[test]
fn framing_agrees_with_the_engine_server_on_large_bodies() {
    run(LARGE, 150);
}
