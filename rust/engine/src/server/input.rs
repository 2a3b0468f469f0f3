//! How a connection waits: for its next input or its signal, whichever comes first,
//! reading the input in the same poll that finds it there.
//!
//! The wait is one `poll_fn` over the signal and the socket's `poll_read`, with no
//! future of its own to keep between polls: tokio keeps the task's waker in the
//! socket's reader slot, so waiting costs neither a readiness future (with its
//! entry in a locked waiter list, added and removed around every wait) nor the
//! bytes to hold one in every idle connection's task.

use std::future::{poll_fn, Future};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::pin;
use std::task::{ready, Context, Poll};

use bytes::{BufMut, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, Interest};

use super::signal::ConnSignal;
use super::spare;

/// Bytes a read asks for when nothing limits it.
pub const READ_CHUNK: usize = spare::SIZE;
/// The most a read asks for: a connection whose reads keep filling what they ask
/// for (a client pipelining a long stream of commands) asks for more each time, up
/// to this, so that one read, one pass under the store lock and one write of the
/// replies cover more commands.
pub const READ_MAX: usize = 4 * READ_CHUNK;
/// A read goes into the room left after the unconsumed input; below this much room
/// the buffer is first made to hold [`READ_CHUNK`] more (which, once the input is
/// consumed, reclaims the room before it instead of allocating).
const MIN_ROOM: usize = READ_CHUNK / 2;

/// Make room in `buf` for a read of `want` bytes: nothing when there is room enough
/// (at least [`MIN_ROOM`], or half of a read larger than [`READ_CHUNK`]).
fn make_room(buf: &mut BytesMut, want: usize) {
    if buf.capacity() == 0 {
        *buf = spare::take();
    }
    let chunk = want.min(READ_MAX);
    let low = if chunk > READ_CHUNK {
        chunk / 2
    } else {
        MIN_ROOM.min(chunk)
    };
    if buf.capacity() - buf.len() < low {
        buf.reserve(chunk);
    }
}

/// The socket operations a connection needs; TCP and Unix streams both have them.
/// Reads go through `AsyncRead` because tokio then treats a short read as "drained"
/// and waits for the next readiness event instead of trying another read that
/// would only say `WouldBlock`: one read system call per request, not two.
pub trait Socket: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    /// Ready once the client has shut down its sending side, found out without
    /// reading the input it sent before (beanstalkd learns it from EPOLLRDHUP while
    /// that input is still queued behind a waiting reserve).
    fn poll_hang_up(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;

    /// Before the socket is dropped after a clean end: anything the transport sends
    /// when closing, best effort and without waiting. Nothing for a plain socket.
    fn poll_goodbye(&mut self, _cx: &mut Context<'_>) -> Poll<()> {
        Poll::Ready(())
    }
    /// Read what is queued now, without asking the socket's readiness first: after
    /// [`Socket::poll_hang_up`] has forgotten a readiness, input queued before it
    /// raises no new event. `WouldBlock` when nothing is queued.
    fn read_queued(&mut self, dst: &mut [MaybeUninit<u8>]) -> io::Result<usize>;

    /// The TCP connection, taken off this runtime, for a cluster leader's client
    /// whose server stopped under it; None for any other kind of socket.
    fn into_tcp(self) -> Option<std::net::TcpStream>
    where
        Self: Sized,
    {
        None
    }
}

macro_rules! socket_impl {
    ($stream:ty, into_tcp) => {
        socket_impl!($stream, {
            fn into_tcp(self) -> Option<std::net::TcpStream> {
                self.into_std().ok()
            }
        });
    };
    ($stream:ty) => {
        socket_impl!($stream, {});
    };
    ($stream:ty, { $($extra:item)* }) => {
        impl Socket for $stream {
            fn poll_hang_up(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                loop {
                    ready!(self.poll_read_ready(cx))?;
                    if peer_shut_down(self.as_raw_fd())? {
                        return Poll::Ready(Ok(()));
                    }
                    // Readable only because input is queued: forget that readiness,
                    // so that the next poll waits for the next event (more input, or
                    // the hang-up). Look again afterwards: a hang-up that came just
                    // before the readiness was forgotten raises no new event.
                    let _ = self.try_io(Interest::READABLE, || {
                        Err::<(), _>(io::ErrorKind::WouldBlock.into())
                    });
                    if peer_shut_down(self.as_raw_fd())? {
                        return Poll::Ready(Ok(()));
                    }
                }
            }

            fn read_queued(&mut self, dst: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
                read_queued(self.as_raw_fd(), dst)
            }

            $($extra)*
        }
    };
}

socket_impl!(tokio::net::TcpStream, into_tcp);
socket_impl!(tokio::net::UnixStream);

/// Whether the peer of `fd` has shut down its sending side (or the connection is
/// gone), whatever input is still unread.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn peer_shut_down(fd: RawFd) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: `p` is one valid pollfd for the duration of the call; a zero timeout
    // makes the call return at once.
    if unsafe { libc::poll(&mut p, 1, 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(p.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0)
}

/// One non-blocking read of `fd` into `dst`.
pub(super) fn read_queued(fd: RawFd, dst: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
    // SAFETY: `dst` is valid for writes of its length for the duration of the call;
    // MSG_DONTWAIT makes the call return at once.
    let n = unsafe { libc::recv(fd, dst.as_mut_ptr().cast(), dst.len(), libc::MSG_DONTWAIT) };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// Without POLLRDHUP a hang-up is only seen once the input before it is read.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn peer_shut_down(_fd: RawFd) -> io::Result<bool> {
    Ok(false)
}

/// Where a read goes.
#[derive(Debug)]
pub enum Target<'a> {
    /// The connection's input buffer, taking at most `want` bytes. It is borrowed
    /// from [`spare`] for the read and handed back if it is still empty afterwards,
    /// so a connection waiting with no input pending holds no buffer.
    Input { buf: &'a mut BytesMut, want: usize },
    /// A buffer of its own (a large put body), up to its capacity.
    Own(&'a mut BytesMut),
    /// Read nothing; wait for the signal or the client's hang-up.
    HangUp,
}

/// What ended a wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woken {
    /// The connection's signal was raised (a delivery, or the server stops).
    Signal,
    /// Something was read, or the client closed its side (`eof`).
    Read { eof: bool },
    /// The client closed its side; input it sent before may still be unread.
    HangUp,
}

/// Wait until the signal is raised or the socket has input, and read it into `target`.
/// The signal is looked at first. (A plain function returning the `poll_fn`, not an
/// `async fn`: an async fn would keep a second copy of its arguments in the
/// connection's task.)
pub fn wait<'a, S: Socket>(
    sock: &'a mut S,
    signal: &'a ConnSignal,
    mut target: Target<'a>,
) -> impl Future<Output = io::Result<Woken>> + 'a {
    poll_fn(move |cx| {
        if signal.poll_raised(cx).is_ready() {
            return Poll::Ready(Ok(Woken::Signal));
        }
        let polled = match &mut target {
            Target::HangUp => return sock.poll_hang_up(cx).map_ok(|()| Woken::HangUp),
            Target::Own(buf) => {
                let want = buf.capacity() - buf.len();
                pin!(read_some(sock, buf, want)).poll(cx)
            }
            Target::Input { buf, want } => {
                make_room(buf, *want);
                let polled = pin!(read_some(sock, buf, *want)).poll(cx);
                if polled.is_pending() && buf.is_empty() {
                    spare::give(buf);
                }
                polled
            }
        };
        // A pending read has registered the task's waker with the socket; dropping
        // the read future loses nothing (it takes bytes only when it completes).
        polled.map(|r| r.map(|eof| Woken::Read { eof }))
    })
}

/// Read what the socket has queued into `target` without waiting for (or trusting)
/// its readiness; `None` when nothing is queued (or the target reads nothing). Used
/// after a wait for the hang-up, which forgets readiness while input is queued.
pub fn read_unready<S: Socket>(sock: &mut S, target: Target<'_>) -> io::Result<Option<Woken>> {
    let (buf, want) = match target {
        Target::HangUp => return Ok(None),
        Target::Own(buf) => {
            let want = buf.capacity() - buf.len();
            (buf, want)
        }
        Target::Input { buf, want } => {
            make_room(buf, want);
            (buf, want)
        }
    };
    let room = buf.spare_capacity_mut();
    let take = want.min(room.len());
    if take == 0 {
        return Ok(None);
    }
    let result = sock.read_queued(&mut room[..take]);
    let woken = match result {
        Ok(0) => Some(Woken::Read { eof: true }),
        Ok(n) => {
            // SAFETY: the read initialised the first `n` bytes of the spare room.
            unsafe { buf.set_len(buf.len() + n) };
            Some(Woken::Read { eof: false })
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => Some(Woken::Read { eof: true }),
        Err(e) => return Err(e),
    };
    if buf.is_empty() && woken.is_none() {
        spare::give(buf);
    }
    Ok(woken)
}

/// Read once into `buf`'s spare room, taking at most `want` (> 0) bytes. True when
/// the client closed its side.
async fn read_some<S: Socket>(sock: &mut S, buf: &mut BytesMut, want: usize) -> io::Result<bool> {
    let room = buf.capacity() - buf.len();
    let mut limited = (&mut *buf).limit(want.min(room).max(1));
    match sock.read_buf(&mut limited).await {
        Ok(0) => Ok(true),
        Ok(_) => Ok(false),
        // UnexpectedEof: a TLS client that closed without saying so first (plain
        // sockets never return it).
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::ConnectionReset | io::ErrorKind::UnexpectedEof
            ) =>
        {
            Ok(true)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Wakeup;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn input_is_read_and_an_idle_wait_holds_no_buffer() {
        let (mut a, mut b) = tokio::net::UnixStream::pair().expect("pair");
        let signal = ConnSignal::default();
        let mut buf = BytesMut::new();
        b.write_all(b"use x\r\n").await.expect("write");
        let woken = wait(
            &mut a,
            &signal,
            Target::Input {
                buf: &mut buf,
                want: 100,
            },
        )
        .await;
        assert_eq!(woken.expect("read"), Woken::Read { eof: false });
        assert_eq!(&buf[..], b"use x\r\n");
        // Nothing more to read: the wait is pending, and the buffer went back.
        buf.clear();
        let mut target = Some(Target::Input {
            buf: &mut buf,
            want: 100,
        });
        let pending = poll_fn(|cx| {
            let w = pin!(wait(&mut a, &signal, target.take().expect("once")));
            Poll::Ready(w.poll(cx).is_pending())
        })
        .await;
        assert!(pending);
        assert_eq!(buf.capacity(), 0);
    }

    #[tokio::test]
    async fn a_hang_up_is_seen_with_input_still_unread() {
        let (mut a, mut b) = tokio::net::UnixStream::pair().expect("pair");
        b.write_all(b"queued input").await.expect("write");
        let signal = ConnSignal::default();
        // Input alone is no hang-up.
        let pending = poll_fn(|cx| {
            let w = pin!(wait(&mut a, &signal, Target::HangUp));
            Poll::Ready(w.poll(cx).is_pending())
        })
        .await;
        assert!(pending);
        b.shutdown().await.expect("shutdown");
        let limit = std::time::Duration::from_secs(5);
        let woken = tokio::time::timeout(limit, wait(&mut a, &signal, Target::HangUp)).await;
        assert_eq!(
            woken.expect("no hang-up seen").expect("wait"),
            Woken::HangUp
        );
        // What came before the hang-up is still there to read.
        let mut buf = Vec::new();
        a.read_to_end(&mut buf).await.expect("read");
        assert_eq!(buf, b"queued input");
    }

    #[tokio::test]
    async fn the_signal_comes_first_and_eof_is_reported() {
        let (mut a, b) = tokio::net::UnixStream::pair().expect("pair");
        let signal = ConnSignal::default();
        let mut buf = BytesMut::new();
        drop(b);
        signal.wake();
        let target = Target::Input {
            buf: &mut buf,
            want: 100,
        };
        assert_eq!(
            wait(&mut a, &signal, target).await.expect("wait"),
            Woken::Signal
        );
        let target = Target::Input {
            buf: &mut buf,
            want: 100,
        };
        assert_eq!(
            wait(&mut a, &signal, target).await.expect("wait"),
            Woken::Read { eof: true }
        );
    }
}
