//! Spare read buffers, kept per thread.
//!
//! A connection that has consumed all its input holds no buffer (10,000 idle
//! connections cost no read buffers), but allocating a fresh read buffer for every
//! request and freeing it after the reply costs a large allocation per request. So
//! a connection going idle hands its buffer back here and the next read on the same
//! thread takes it again: a request-reply client reuses one buffer throughout.

use std::cell::RefCell;

use bytes::BytesMut;

/// Buffers of at least this capacity are worth keeping (the size a read asks for).
pub const SIZE: usize = 16 * 1024;
/// Keep no buffer larger than this: one that grew for a long line of pipelined
/// commands goes back to the allocator.
const MAX_SIZE: usize = 4 * SIZE;
/// Buffers kept per thread. A buffer is taken and handed back within one wakeup of
/// a request-reply connection, so a few serve any number of such connections.
const KEEP: usize = 8;

thread_local! {
    /// A `RefCell`, not a lock: the list belongs to this thread and is borrowed only
    /// inside [`take`] and [`give`], never across an await.
    static SPARE: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
}

/// An empty buffer. Its room may be less than [`SIZE`] when it has been read into
/// and consumed before: `reserve` reclaims that prefix without copying anything.
pub fn take() -> BytesMut {
    SPARE
        .with(|s| s.borrow_mut().pop())
        .unwrap_or_else(|| BytesMut::with_capacity(SIZE))
}

/// Hand back the buffer of a connection that has consumed all its input; `buf` is
/// left empty and unallocated.
pub fn give(buf: &mut BytesMut) {
    let buf = std::mem::take(buf);
    if buf.capacity() == 0 || !buf.is_empty() {
        return;
    }
    // `capacity` counts from the read position, so a large one is large indeed.
    if buf.capacity() > MAX_SIZE {
        return;
    }
    SPARE.with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < KEEP {
            s.push(buf);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{Buf, BufMut};

    #[test]
    fn a_buffer_handed_back_is_taken_again_with_its_room() {
        let mut b = take();
        let ptr = b.as_ptr();
        b.put_slice(b"use x\r\n");
        b.advance(7);
        give(&mut b);
        assert_eq!(b.capacity(), 0);
        let mut again = take();
        assert!(again.is_empty());
        again.reserve(SIZE);
        assert!(again.capacity() >= SIZE);
        assert_eq!(again.as_ptr(), ptr, "the same allocation, from its start");
    }

    #[test]
    fn a_buffer_with_input_left_is_not_kept() {
        let mut b = take();
        b.put_slice(b"partial");
        give(&mut b);
        let again = take();
        assert!(again.is_empty());
    }
}
