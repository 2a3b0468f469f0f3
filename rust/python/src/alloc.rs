//! The module's allocator: small blocks from mimalloc, large ones from the system.
//!
//! Each put makes and frees a few small blocks on more than one thread (a pass's
//! records, a session's reply freed a thousand commands later, a replicated entry's
//! decoded records), and glibc's malloc spent about a fifth of a cluster node's Raft
//! thread on them. mimalloc keeps free lists per thread and backs its small blocks
//! with transparent huge pages where the kernel allows them (fewer TLB misses).
//!
//! A block of [`LARGE`] bytes or more goes to the system allocator instead, which
//! maps it on its own and makes a page resident only once it is written. Such
//! blocks are few (a large job body's buffer, sized as its `put` announced before
//! the bytes arrive; a snapshot image; a big batch of records), and one written only
//! in part must cost only what was written: inside a huge page its first byte
//! would make 2 MiB resident, and connections announcing large bodies and sending
//! them slowly would hold that much each (tests/test_limits.py).

use std::alloc::{GlobalAlloc, Layout, System};

use mimalloc::MiMalloc;

/// Blocks at least this large come from the system allocator.
pub const LARGE: usize = 256 << 10;

/// Small blocks from mimalloc, large ones from the system (see the module's doc).
#[derive(Debug)]
pub struct Allocator;

fn large(size: usize) -> bool {
    size >= LARGE
}

// SAFETY: every call goes to one of two allocators that uphold `GlobalAlloc`'s
// contract, chosen by the block's size; a block is always given back (dealloc,
// realloc) with the layout it was made with, so to the allocator that made it.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's layout contract, passed on.
        unsafe {
            if large(layout.size()) {
                System.alloc(layout)
            } else {
                MiMalloc.alloc(layout)
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for alloc.
        unsafe {
            if large(layout.size()) {
                System.alloc_zeroed(layout)
            } else {
                MiMalloc.alloc_zeroed(layout)
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was made with `layout`, so by the allocator its size picks.
        unsafe {
            if large(layout.size()) {
                System.dealloc(ptr, layout)
            } else {
                MiMalloc.dealloc(ptr, layout)
            }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let (was, will) = (large(layout.size()), large(new_size));
        // SAFETY: the caller's contract (ptr made with layout, new_size valid for
        // its alignment); within one allocator its realloc; across the two a new
        // block, the bytes both hold copied, the old block given back.
        unsafe {
            match (was, will) {
                (true, true) => System.realloc(ptr, layout, new_size),
                (false, false) => MiMalloc.realloc(ptr, layout, new_size),
                _ => {
                    let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
                    let new = self.alloc(new_layout);
                    if !new.is_null() {
                        std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                    new
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_keeps_its_bytes_as_it_grows_and_shrinks_across_the_threshold() {
        let a = Allocator;
        let small = Layout::from_size_align(1000, 16).expect("layout");
        // SAFETY: layouts of non-zero size; each block given back with its layout.
        unsafe {
            let p = a.alloc(small);
            assert!(!p.is_null());
            for i in 0..1000 {
                *p.add(i) = (i % 251) as u8;
            }
            let p = a.realloc(p, small, LARGE + 1);
            assert!(!p.is_null());
            assert_eq!(p as usize % 16, 0, "alignment kept");
            for i in 0..1000 {
                assert_eq!(*p.add(i), (i % 251) as u8);
            }
            let big = Layout::from_size_align(LARGE + 1, 16).expect("layout");
            let p = a.realloc(p, big, 500);
            assert!(!p.is_null());
            for i in 0..500 {
                assert_eq!(*p.add(i), (i % 251) as u8);
            }
            a.dealloc(p, Layout::from_size_align(500, 16).expect("layout"));
            let z = a.alloc_zeroed(big);
            assert!((0..LARGE + 1).all(|i| *z.add(i) == 0));
            a.dealloc(z, big);
        }
    }
}
