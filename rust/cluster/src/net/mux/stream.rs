//! One session's stream over a shared link: what a TCP connection of its own
//! was to it (bytes each way in order, a half-close, a close, a break), read
//! and written by the forwarder on a follower and by the engine on the leader.
//!
//! Each end keeps a [`Pipe`]: the bytes the link brought for it and not yet
//! read, what the peer said (its half-close, its close), and how many bytes it
//! may still send before the peer has read what it sent (its credit; the peer
//! returns credit as it reads, so neither end holds more than [`WINDOW`]
//! unread bytes of a session however slowly its reader goes).

use std::collections::VecDeque;
use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::{Kind, Link, MAX_DATA, WINDOW};

/// One end's state of a session. A std mutex: held for a copy or a flag,
/// never across an await, by the link's task and the session's task.
#[derive(Debug, Default)]
pub(super) struct Pipe(Mutex<State>);

#[derive(Debug)]
struct State {
    /// Bytes the peer sent, not yet read.
    input: VecDeque<Bytes>,
    /// Their length.
    queued: usize,
    /// The peer half-closed or closed, or the link broke: reads end once
    /// `input` is read.
    eof: bool,
    /// The peer closed, or the link broke: writes fail, and no close is sent.
    closed: bool,
    /// This end half-closed: writes fail.
    fin_sent: bool,
    /// Bytes this end may still send.
    credit: usize,
    /// Bytes read here and not yet returned to the peer as credit.
    unreturned: usize,
    reader: Option<Waker>,
    writer: Option<Waker>,
    hang_up: Option<Waker>,
}

impl Default for State {
    fn default() -> Self {
        State {
            input: VecDeque::new(),
            queued: 0,
            eof: false,
            closed: false,
            fin_sent: false,
            credit: WINDOW,
            unreturned: 0,
            reader: None,
            writer: None,
            hang_up: None,
        }
    }
}

fn wake(w: &mut Option<Waker>) {
    if let Some(w) = w.take() {
        w.wake();
    }
}

impl Pipe {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes from the peer; false if it sent more than its credit allowed.
    pub(super) fn data(&self, bytes: Bytes) -> bool {
        let mut st = self.lock();
        if st.eof {
            // After its half-close: nothing a reader should see.
            return true;
        }
        st.queued += bytes.len();
        if st.queued + st.unreturned > WINDOW {
            return false;
        }
        st.input.push_back(bytes);
        wake(&mut st.reader);
        true
    }

    /// The peer half-closed (`close` false) or closed, or the link broke.
    pub(super) fn ended(&self, close: bool) {
        let mut st = self.lock();
        st.eof = true;
        if close {
            st.closed = true;
            wake(&mut st.writer);
        }
        wake(&mut st.reader);
        wake(&mut st.hang_up);
    }

    /// The peer read `n` more bytes.
    pub(super) fn credit(&self, n: usize) {
        let mut st = self.lock();
        st.credit = st.credit.saturating_add(n).min(WINDOW);
        wake(&mut st.writer);
    }

    fn closed(&self) -> bool {
        self.lock().closed
    }
}

/// A session's stream (both directions; a clone is another handle on the same
/// stream, for a reader and a writer apart). The session closes when its last
/// handle is dropped.
#[derive(Debug, Clone)]
pub struct MuxStream(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    id: u32,
    pipe: Arc<Pipe>,
    link: Arc<Link>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let known = self.link.forget(self.id);
        if known && !self.pipe.closed() {
            self.link.push(self.id, Kind::Close, &[]);
        }
    }
}

impl MuxStream {
    pub(super) fn new(id: u32, pipe: Arc<Pipe>, link: Arc<Link>) -> MuxStream {
        MuxStream(Arc::new(Inner { id, pipe, link }))
    }

    /// Copy what is queued into `dst` (up to its length): the bytes copied, or
    /// None if nothing is queued and the stream has not ended (then `waker`,
    /// if given, is woken when that changes).
    fn take(&self, dst: &mut [MaybeUninit<u8>], waker: Option<&Waker>) -> Option<usize> {
        let inner = &self.0;
        let mut st = inner.pipe.lock();
        if st.input.is_empty() {
            if !st.eof {
                if let Some(w) = waker {
                    st.reader = Some(w.clone());
                }
            }
            return st.eof.then_some(0);
        }
        let mut n = 0;
        while n < dst.len() {
            let Some(front) = st.input.front_mut() else {
                break;
            };
            let k = front.len().min(dst.len() - n);
            for (d, s) in dst[n..n + k].iter_mut().zip(&front[..k]) {
                d.write(*s);
            }
            front.advance(k);
            if front.is_empty() {
                st.input.pop_front();
            }
            n += k;
        }
        st.queued -= n;
        st.unreturned += n;
        // Returned in pieces of a quarter window: the peer never runs out
        // while this end reads.
        if st.unreturned >= WINDOW / 4 && !st.closed {
            let give = std::mem::take(&mut st.unreturned) as u32;
            drop(st);
            inner.link.push(inner.id, Kind::Credit, &give.to_le_bytes());
        }
        Some(n)
    }
}

#[cfg(test)]
impl MuxStream {
    /// Bytes the peer sent that were not read yet.
    pub(super) fn queued(&self) -> usize {
        self.0.pipe.lock().queued
    }
}

impl AsyncRead for MuxStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        // SAFETY: `take` only writes initialized bytes into the slice, and
        // exactly `n` of them at its start.
        let dst = unsafe { buf.unfilled_mut() };
        match self.take(dst, Some(cx.waker())) {
            Some(n) => {
                // SAFETY: `take` initialized the first `n` bytes.
                unsafe { buf.assume_init(n) };
                buf.advance(n);
                Poll::Ready(Ok(()))
            }
            None => Poll::Pending,
        }
    }
}

impl AsyncWrite for MuxStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let inner = &self.0;
        let n = {
            let mut st = inner.pipe.lock();
            if st.closed || st.fin_sent {
                return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
            }
            if buf.is_empty() {
                return Poll::Ready(Ok(0));
            }
            if st.credit == 0 {
                st.writer = Some(cx.waker().clone());
                return Poll::Pending;
            }
            let n = buf.len().min(st.credit).min(MAX_DATA);
            st.credit -= n;
            n
        };
        if inner.link.push(inner.id, Kind::Data, &buf[..n]) {
            Poll::Ready(Ok(n))
        } else {
            Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()))
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // The link's writer sends what was pushed as soon as it can.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let inner = &self.0;
        {
            let mut st = inner.pipe.lock();
            if st.fin_sent {
                return Poll::Ready(Ok(()));
            }
            if st.closed {
                return Poll::Ready(Err(io::ErrorKind::NotConnected.into()));
            }
            st.fin_sent = true;
        }
        if inner.link.push(inner.id, Kind::Fin, &[]) {
            Poll::Ready(Ok(()))
        } else {
            Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()))
        }
    }
}

impl beanpole_engine::server::Socket for MuxStream {
    fn poll_hang_up(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut st = self.0.pipe.lock();
        if st.eof {
            return Poll::Ready(Ok(()));
        }
        st.hang_up = Some(cx.waker().clone());
        Poll::Pending
    }

    fn read_queued(&mut self, dst: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
        self.take(dst, None)
            .ok_or_else(|| io::ErrorKind::WouldBlock.into())
    }
}
