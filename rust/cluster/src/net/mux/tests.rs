//! Sessions over a real loopback link: what each end reads and writes, the
//! half-close, the close, the window, and the link's break.

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::*;
use beanpole_engine::server::Socket;

/// A link over loopback: the follower's end, the sessions the leader's end
/// accepts, and the leader's task (aborting it breaks the link).
struct Pair {
    follower: Arc<Link>,
    accepted: mpsc::UnboundedReceiver<MuxStream>,
    leader_task: tokio::task::JoinHandle<()>,
}

async fn pair() -> Pair {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    // Unbounded: the test reads every session it opens.
    let (tx, accepted) = mpsc::unbounded_channel();
    let leader_task = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.expect("accept");
        let accept = move |s: MuxStream| {
            let _ = tx.send(s);
        };
        run(Arc::new(Link::new("")), tcp, Some(&accept)).await;
    });
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let follower = Arc::new(Link::new(&addr.to_string()));
    tokio::spawn(run(Arc::clone(&follower), tcp, None));
    Pair {
        follower,
        accepted,
        leader_task,
    }
}

impl Pair {
    async fn open(&mut self) -> (MuxStream, MuxStream) {
        let mine = self.follower.open().expect("open");
        let theirs = self.accepted.recv().await.expect("accepted");
        (mine, theirs)
    }
}

async fn read_all(s: &mut MuxStream) -> Vec<u8> {
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.expect("read to the end");
    out
}

/// Whether writing `bytes` again and again is refused within a thousand
/// tries (the peer's close or the break is on its way meanwhile).
async fn refused_soon(s: &mut MuxStream, bytes: &[u8]) -> bool {
    for _ in 0..1000 {
        if s.write_all(bytes).await.is_err() {
            return true;
        }
        tokio::task::yield_now().await;
    }
    false
}

#[tokio::test]
async fn sessions_carry_their_own_bytes_in_order_both_ways() {
    let mut p = pair().await;
    let mut ends = Vec::new();
    for _ in 0..20 {
        ends.push(p.open().await);
    }
    // Interleaved writes: each session's bytes are its own, computed per row.
    for round in 0..50 {
        for (i, (mine, theirs)) in ends.iter_mut().enumerate() {
            let line = format!("put {i} {round}\r\n");
            mine.write_all(line.as_bytes()).await.expect("write");
            let reply = format!("INSERTED {}\r\n", i * 1000 + round);
            theirs
                .write_all(reply.as_bytes())
                .await
                .expect("write back");
        }
    }
    for (i, (mine, theirs)) in ends.iter_mut().enumerate() {
        mine.shutdown().await.expect("fin");
        theirs.shutdown().await.expect("fin back");
        let want: String = (0..50).map(|r| format!("put {i} {r}\r\n")).collect();
        assert_eq!(read_all(theirs).await, want.as_bytes());
        let back: String = (0..50)
            .map(|r| format!("INSERTED {}\r\n", i * 1000 + r))
            .collect();
        assert_eq!(read_all(mine).await, back.as_bytes());
    }
}

#[tokio::test]
async fn a_half_close_is_a_hang_up_and_the_other_way_still_carries() {
    let mut p = pair().await;
    let (mut mine, mut theirs) = p.open().await;
    mine.write_all(b"reserve\r\n").await.expect("write");
    mine.shutdown().await.expect("fin");
    // The hang-up shows before the input before it is read, as POLLRDHUP does.
    std::future::poll_fn(|cx| theirs.poll_hang_up(cx))
        .await
        .expect("hang-up");
    assert_eq!(read_all(&mut theirs).await, b"reserve\r\n");
    theirs
        .write_all(b"TIMED_OUT\r\n")
        .await
        .expect("still writes");
    drop(theirs);
    assert_eq!(read_all(&mut mine).await, b"TIMED_OUT\r\n");
    assert!(mine.write_all(b"x").await.is_err(), "written after a fin");
}

#[tokio::test]
async fn a_closed_session_reads_its_end_and_refuses_writes() {
    let mut p = pair().await;
    let (mut mine, theirs) = p.open().await;
    let (other_mine, mut other_theirs) = p.open().await;
    drop(theirs);
    assert_eq!(read_all(&mut mine).await, b"");
    // Written until the close arrives, then refused; never a hang.
    assert!(
        refused_soon(&mut mine, b"use t\r\n").await,
        "writes to a closed session kept succeeding"
    );
    // The other session on the link goes on.
    let mut other_mine = other_mine;
    other_mine.write_all(b"stats\r\n").await.expect("write");
    let mut got = [0u8; 7];
    other_theirs.read_exact(&mut got).await.expect("read");
    assert_eq!(&got, b"stats\r\n");
}

#[tokio::test]
async fn a_writer_waits_at_the_window_until_its_reader_reads() {
    let mut p = pair().await;
    let (mut mine, mut theirs) = p.open().await;
    let body: Vec<u8> = (0..WINDOW + 100_000).map(|i| (i % 251) as u8).collect();
    let expected = body.clone();
    let writer = tokio::spawn(async move {
        mine.write_all(&body).await.expect("write");
        mine
    });
    // A window's worth arrives, and no more while nothing is read.
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while theirs.queued() < WINDOW {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("a window's worth arrives");
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert_eq!(theirs.queued(), WINDOW);
    assert!(!writer.is_finished(), "the writer went past its window");
    let mut got = vec![0u8; expected.len()];
    theirs.read_exact(&mut got).await.expect("read");
    assert!(got == expected, "the bytes came changed");
    let mine = writer.await.expect("writer");
    drop(mine);
    assert_eq!(read_all(&mut theirs).await, b"");
}

#[tokio::test]
async fn a_broken_link_ends_every_session_on_it() {
    let mut p = pair().await;
    let (mut a, _a_theirs) = p.open().await;
    let (mut b, _b_theirs) = p.open().await;
    p.leader_task.abort();
    assert_eq!(read_all(&mut a).await, b"");
    assert_eq!(read_all(&mut b).await, b"");
    assert!(
        refused_soon(&mut a, b"put 0 0 1 1\r\nx\r\n").await,
        "writes to a broken link kept succeeding"
    );
    assert!(p.follower.is_broken());
    assert!(
        p.follower.open().is_none(),
        "a session opened on a broken link"
    );
}

#[tokio::test]
async fn a_peer_past_its_window_or_speaking_nonsense_breaks_the_link() {
    for bad in [
        Bad::PastWindow,
        Bad::UnknownKind,
        Bad::TooLong,
        Bad::OpenTwice,
    ] {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (tx, mut accepted) = mpsc::unbounded_channel();
        let leader = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.expect("accept");
            let accept = move |s: MuxStream| {
                let _ = tx.send(s);
            };
            run(Arc::new(Link::new("")), tcp, Some(&accept)).await;
        });
        let mut raw = TcpStream::connect(addr).await.expect("connect");
        let frame = |id: u32, kind: u8, payload: &[u8]| {
            let mut f = id.to_le_bytes().to_vec();
            f.push(kind);
            f.extend_from_slice(&(payload.len() as u32).to_le_bytes());
            f.extend_from_slice(payload);
            f
        };
        raw.write_all(&frame(7, 1, &[])).await.expect("open");
        let mut session = accepted.recv().await.expect("accepted");
        let chunk = vec![b'x'; MAX_DATA];
        match bad {
            Bad::PastWindow => {
                for _ in 0..=WINDOW / MAX_DATA {
                    if raw.write_all(&frame(7, 2, &chunk)).await.is_err() {
                        break;
                    }
                }
            }
            Bad::UnknownKind => raw.write_all(&frame(7, 9, &[])).await.expect("write"),
            Bad::TooLong => {
                let mut f = frame(7, 2, &[]);
                f[5..9].copy_from_slice(&((MAX_DATA + 1) as u32).to_le_bytes());
                raw.write_all(&f).await.expect("write");
            }
            Bad::OpenTwice => raw.write_all(&frame(7, 1, &[])).await.expect("write"),
        }
        // The leader's end of the link is gone, and with it the session.
        tokio::time::timeout(std::time::Duration::from_secs(10), leader)
            .await
            .unwrap_or_else(|_| panic!("{bad:?}: the link was kept"))
            .expect("link task");
        let mut sink = Vec::new();
        let _ = session.read_to_end(&mut sink).await;
        assert!(
            session.write_all(b"x").await.is_err(),
            "{bad:?}: the session still took writes"
        );
    }
}

#[derive(Debug, Clone, Copy)]
enum Bad {
    PastWindow,
    UnknownKind,
    TooLong,
    OpenTwice,
}

#[tokio::test]
async fn read_queued_takes_what_came_without_waiting() {
    let mut p = pair().await;
    let (mut mine, mut theirs) = p.open().await;
    let mut room = [std::mem::MaybeUninit::<u8>::uninit(); 16];
    assert_eq!(
        theirs
            .read_queued(&mut room)
            .expect_err("nothing yet")
            .kind(),
        io::ErrorKind::WouldBlock
    );
    mine.write_all(b"peek 1\r\n").await.expect("write");
    mine.shutdown().await.expect("fin");
    std::future::poll_fn(|cx| theirs.poll_hang_up(cx))
        .await
        .expect("hang-up");
    let n = theirs.read_queued(&mut room).expect("queued");
    // SAFETY: read_queued initialized the first n bytes.
    let got: Vec<u8> = room[..n]
        .iter()
        .map(|b| unsafe { b.assume_init() })
        .collect();
    assert_eq!(got, b"peek 1\r\n");
    assert_eq!(theirs.read_queued(&mut room).expect("the end"), 0);
}
