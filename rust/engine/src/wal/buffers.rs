//! Record buffers used again once their records are durable.
//!
//! The store encodes each batch of records into a buffer of its own, which the
//! log keeps until an fsync covers it (to write it again should that fsync fail).
//! At high put rates that is megabytes a second going through the allocator, and a
//! fresh buffer of that size comes from pages the kernel has to fault in and zero
//! (measured at 5-9% of the server's CPU under a pipelined put load). Buffers whose
//! records are synced (or, with `-F`, written) come back here instead, up to a
//! bounded total, and the store's next batches take them.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// The most capacity kept for use again, in all.
pub const POOL_BYTES: usize = 8 << 20;
/// The most buffers kept. Small ones are kept too: with one connection's put per
/// batch, each batch is a buffer of a few hundred bytes, allocated on a runtime
/// thread and, once synced, freed on the writer thread, which costs the allocator
/// more than the pool's lock does.
pub const POOL_BUFFERS: usize = 8192;

#[derive(Debug, Default)]
pub struct BufferPool {
    /// A std mutex: held only to push or pop buffers, never across I/O.
    free: Mutex<Free>,
}

#[derive(Debug, Default)]
struct Free {
    bufs: Vec<Vec<u8>>,
    bytes: usize,
}

impl BufferPool {
    /// An empty buffer with room for at least `capacity` bytes.
    pub fn take(&self, capacity: usize) -> Vec<u8> {
        let popped = {
            let mut free = self.lock();
            let buf = free.bufs.pop();
            if let Some(b) = &buf {
                free.bytes -= b.capacity();
            }
            buf
        };
        match popped {
            Some(buf) if buf.capacity() >= capacity => buf,
            _ => Vec::with_capacity(capacity),
        }
    }

    /// Keep `bufs` for use again, as far as the pool has room; drop the rest.
    pub fn give(&self, bufs: impl IntoIterator<Item = Vec<u8>>) {
        let mut rejected = Vec::new();
        {
            let mut free = self.lock();
            for mut buf in bufs {
                let cap = buf.capacity();
                if cap == 0 || free.bufs.len() >= POOL_BUFFERS || free.bytes + cap > POOL_BYTES {
                    rejected.push(buf);
                    continue;
                }
                buf.clear();
                free.bytes += cap;
                free.bufs.push(buf);
            }
        }
        // Freed outside the lock.
        drop(rejected);
    }

    /// Capacity kept now (for tests).
    pub fn kept_bytes(&self) -> usize {
        self.lock().bytes
    }

    fn lock(&self) -> MutexGuard<'_, Free> {
        self.free.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_empty_and_the_total_is_bounded() {
        let pool = BufferPool::default();
        let mut a = Vec::with_capacity(64 << 10);
        a.extend_from_slice(b"records");
        let a_ptr = a.as_ptr();
        pool.give([Vec::new(), a]);
        assert_eq!(
            pool.kept_bytes(),
            64 << 10,
            "an unallocated one is not kept"
        );
        let b = pool.take(1000);
        assert_eq!(b.as_ptr(), a_ptr, "the same allocation");
        assert!(b.is_empty());
        assert_eq!(pool.kept_bytes(), 0);
        // Too small for what is asked: a new one.
        pool.give([b]);
        assert!(pool.take(1 << 20).capacity() >= 1 << 20);
        // Never more than POOL_BYTES in all.
        pool.give((0..20).map(|_| Vec::with_capacity(1 << 20)));
        assert!(pool.kept_bytes() <= POOL_BYTES);
        assert!(pool.kept_bytes() >= POOL_BYTES - (1 << 20));
    }

    #[test]
    fn small_buffers_are_kept_up_to_a_count() {
        let pool = BufferPool::default();
        let small: Vec<Vec<u8>> = (0..POOL_BUFFERS + 10)
            .map(|_| Vec::with_capacity(200))
            .collect();
        let kept_ptrs: std::collections::HashSet<*const u8> =
            small[..POOL_BUFFERS].iter().map(|b| b.as_ptr()).collect();
        let kept_bytes: usize = small[..POOL_BUFFERS].iter().map(Vec::capacity).sum();
        pool.give(small);
        assert_eq!(pool.kept_bytes(), kept_bytes);
        for _ in 0..POOL_BUFFERS {
            let b = pool.take(150);
            assert!(kept_ptrs.contains(&b.as_ptr()), "a kept buffer comes back");
        }
        assert_eq!(pool.kept_bytes(), 0);
    }
}
