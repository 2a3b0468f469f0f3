//! Many client sessions over one link from a follower to the leader.
//!
//! A follower forwards each of its clients' connections to the leader as a
//! session (`node/forward.rs`). Each session used to have a TCP connection of
//! its own to the leader, so every command crossed two more sockets, each
//! crossing a system call and the loopback's TCP work for the sender and a
//! wake-up for the receiver. Over a link, the commands of every session that
//! has some go out in one write and come in with one read, and the replies
//! likewise.
//!
//! A link opens as a peer connection does, with a hello naming both nodes and
//! the cluster (frame kind [`LINK`] in place of `hello`, answered `welcome` or
//! `refused`); then both directions carry frames of their own:
//!
//! ```text
//! session u32, kind u8, len u32, payload (len bytes, at most MAX_DATA)
//!   1 open     the follower opens a session (no payload)
//!   2 data     bytes of the session's stream
//!   3 fin      the sender will send no more on the session (a half-close)
//!   4 close    the sender closed the session: it reads and sends no more
//!   5 credit   the sender read this many more bytes (u32) of the session
//! ```
//!
//! A session's stream ([`MuxStream`]) is what its TCP connection was: the
//! follower writes the attach request on it first and reads the answer, as
//! before (`attach.rs`), and the leader serves it as the engine serves any
//! socket. Each end may have at most [`WINDOW`] bytes sent and not yet read by
//! the other; a peer that sends more breaks the link. When the link breaks,
//! every session on it ends as its own connection's break ended it, and the
//! follower attaches each again as before.

mod dial;
mod serve;
mod stream;

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::Notify;

pub use self::dial::Links;
pub use self::serve::serve;
pub use self::stream::MuxStream;
use self::stream::Pipe;

/// A link's opening frame: a hello's body under a kind of its own.
pub const LINK: u8 = 17;

/// The most payload a frame carries.
pub(super) const MAX_DATA: usize = 64 << 10;
/// Bytes of a session one end may send before the other has read them: more
/// than a follower sends unanswered (4 MiB, `forward.rs`), so a session's
/// commands never wait for credit while its replies wait to be read.
pub(super) const WINDOW: usize = 8 << 20;
const HEADER: usize = 9;
/// What a link's reader asks the socket for at once.
const READ_BUF: usize = 256 << 10;
/// A batch buffer grown past this is not kept for the next batch.
const KEEP_BATCH: usize = 4 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Open = 1,
    Data = 2,
    Fin = 3,
    Close = 4,
    Credit = 5,
}

impl Kind {
    fn read(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::Open,
            2 => Kind::Data,
            3 => Kind::Fin,
            4 => Kind::Close,
            5 => Kind::Credit,
            _ => return None,
        })
    }
}

/// One link's state, shared by its task and its sessions.
#[derive(Debug)]
pub(super) struct Link {
    /// The address it was dialed at (a follower's; empty on the leader).
    addr: String,
    /// Frames waiting for the writer. A std mutex: every session's task
    /// appends to it and the writer takes it whole, never across an await.
    out: Mutex<Out>,
    /// Wakes the writer. A Notify: a wake-up that carries nothing, kept while
    /// the writer is busy so that what came meanwhile goes in the next write.
    wake_writer: Notify,
    /// The sessions open on it. A std mutex: a lookup per frame, never held
    /// across an await (nor while a session's own lock is taken for long).
    sessions: Mutex<HashMap<u32, Arc<Pipe>>>,
    /// The follower's next session number. An atomic: a counter.
    next_id: AtomicU32,
    /// Set once it broke. An atomic: a flag read before use.
    broken: AtomicBool,
}

#[derive(Debug, Default)]
struct Out {
    buf: Vec<u8>,
    broken: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn violation(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

impl Link {
    pub(super) fn new(addr: &str) -> Link {
        Link {
            addr: addr.to_owned(),
            out: Mutex::default(),
            wake_writer: Notify::new(),
            sessions: Mutex::default(),
            next_id: AtomicU32::new(1),
            broken: AtomicBool::new(false),
        }
    }

    pub(super) fn is_broken(&self) -> bool {
        self.broken.load(Ordering::Acquire)
    }

    /// Queue a frame for the writer; false if the link broke.
    pub(super) fn push(&self, id: u32, kind: Kind, payload: &[u8]) -> bool {
        {
            let mut out = lock(&self.out);
            if out.broken {
                return false;
            }
            out.buf.extend_from_slice(&id.to_le_bytes());
            out.buf.push(kind as u8);
            out.buf
                .extend_from_slice(&(payload.len() as u32).to_le_bytes());
            out.buf.extend_from_slice(payload);
        }
        self.wake_writer.notify_one();
        true
    }

    /// Forget session `id` (its last handle went); whether it was open.
    pub(super) fn forget(&self, id: u32) -> bool {
        lock(&self.sessions).remove(&id).is_some()
    }

    fn pipe(&self, id: u32) -> Option<Arc<Pipe>> {
        lock(&self.sessions).get(&id).cloned()
    }

    /// Open a session (the follower's side); None if the link broke or ran
    /// out of session numbers.
    pub(super) fn open(self: &Arc<Self>) -> Option<MuxStream> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if id == u32::MAX || self.is_broken() {
            return None;
        }
        let pipe = Arc::new(Pipe::default());
        lock(&self.sessions).insert(id, Arc::clone(&pipe));
        let stream = MuxStream::new(id, pipe, Arc::clone(self));
        // Dropped on failure: it forgets itself.
        self.push(id, Kind::Open, &[]).then_some(stream)
    }

    /// The follower opened session `id` (the leader's side); None if it is
    /// open already.
    fn accept(self: &Arc<Self>, id: u32) -> Option<MuxStream> {
        let pipe = Arc::new(Pipe::default());
        let mut sessions = lock(&self.sessions);
        if sessions.contains_key(&id) {
            return None;
        }
        sessions.insert(id, Arc::clone(&pipe));
        drop(sessions);
        Some(MuxStream::new(id, pipe, Arc::clone(self)))
    }

    /// The link broke: every session on it ends, and the writer stops.
    fn break_all(&self) {
        self.broken.store(true, Ordering::Release);
        lock(&self.out).broken = true;
        let sessions = std::mem::take(&mut *lock(&self.sessions));
        for pipe in sessions.values() {
            pipe.ended(true);
        }
        self.wake_writer.notify_one();
    }
}

/// What the leader does with a session the follower opened.
pub(super) type Accept = dyn Fn(MuxStream) + Send + Sync;

/// Carry `link`'s frames over `stream` until either side breaks it; then
/// every session on it ends. `accept` takes the sessions the other side
/// opens (the leader's side); without it an open breaks the link.
pub(super) async fn run(link: Arc<Link>, stream: TcpStream, accept: Option<&Accept>) {
    /// Breaks the link however `run` ends, dropped with its runtime too.
    struct Breaks(Arc<Link>);
    impl Drop for Breaks {
        fn drop(&mut self) {
            self.0.break_all();
        }
    }
    let link = Breaks(link);
    let (rd, wr) = stream.into_split();
    tokio::select! {
        _ = read_loop(&link.0, rd, accept) => {}
        _ = write_loop(&link.0, wr) => {}
    }
}

async fn read_loop(
    link: &Arc<Link>,
    mut rd: OwnedReadHalf,
    accept: Option<&Accept>,
) -> io::Result<()> {
    let mut buf = BytesMut::with_capacity(READ_BUF);
    loop {
        while buf.len() >= HEADER {
            let id = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
            let kind = buf[4];
            let len = u32::from_le_bytes([buf[5], buf[6], buf[7], buf[8]]) as usize;
            if len > MAX_DATA {
                return Err(violation("a frame longer than allowed"));
            }
            if buf.len() < HEADER + len {
                buf.reserve(HEADER + len - buf.len());
                break;
            }
            buf.advance(HEADER);
            // A copy of its own: a slice of the read buffer would keep the
            // whole buffer alive for as long as the session leaves it unread.
            let payload = Bytes::copy_from_slice(&buf[..len]);
            buf.advance(len);
            dispatch(link, id, kind, payload, accept)?;
        }
        if buf.capacity() - buf.len() < MAX_DATA {
            buf.reserve(READ_BUF);
        }
        if rd.read_buf(&mut buf).await? == 0 {
            return Ok(());
        }
    }
}

fn dispatch(
    link: &Arc<Link>,
    id: u32,
    kind: u8,
    payload: Bytes,
    accept: Option<&Accept>,
) -> io::Result<()> {
    match Kind::read(kind) {
        Some(Kind::Open) => {
            let Some(accept) = accept.filter(|_| payload.is_empty()) else {
                return Err(violation("an open the link does not take"));
            };
            let Some(stream) = link.accept(id) else {
                return Err(violation("an open of a session already open"));
            };
            accept(stream);
        }
        Some(Kind::Data) => {
            if let Some(pipe) = link.pipe(id) {
                if !pipe.data(payload) {
                    return Err(violation("more bytes than the session's window"));
                }
            }
        }
        Some(Kind::Fin) => {
            if let Some(pipe) = link.pipe(id) {
                pipe.ended(false);
            }
        }
        Some(Kind::Close) => {
            if let Some(pipe) = lock(&link.sessions).remove(&id) {
                pipe.ended(true);
            }
        }
        Some(Kind::Credit) => {
            let Ok(n) = <[u8; 4]>::try_from(&payload[..]) else {
                return Err(violation("a credit frame of the wrong length"));
            };
            if let Some(pipe) = link.pipe(id) {
                pipe.credit(u32::from_le_bytes(n) as usize);
            }
        }
        None => return Err(violation("a frame of an unknown kind")),
    }
    Ok(())
}

async fn write_loop(link: &Link, mut wr: OwnedWriteHalf) -> io::Result<()> {
    let mut batch = Vec::new();
    loop {
        link.wake_writer.notified().await;
        // A session's task woke this one, which tokio would run next on the
        // same thread, before the other sessions woken with it have written:
        // let them run first, so that one write carries them all.
        tokio::task::yield_now().await;
        {
            let mut out = lock(&link.out);
            if out.broken {
                return Ok(());
            }
            std::mem::swap(&mut out.buf, &mut batch);
        }
        if batch.is_empty() {
            continue;
        }
        wr.write_all(&batch).await?;
        batch.clear();
        if batch.capacity() > KEEP_BATCH {
            batch = Vec::new();
        }
    }
}

#[cfg(test)]
mod tests;
