//! The memory of small job bodies: 64 KiB pages, each cut into slots of one size.
//!
//! A body below [`SHARED_MIN`](super::body::SHARED_MIN) bytes is copied into a slot
//! whose size is its length rounded up to 16 bytes (what the system allocator would
//! round it to, without the allocator's 8-byte header). Pages are aligned to their
//! size, so a slot finds its page's header from its own address, and a freed slot goes
//! on its page's free list, to be taken again before the page's untouched room.
//!
//! Why not one allocation per body: the store's bodies are allocated by the thread
//! holding the lock, which under glibc is a per-thread arena that grows one page at a
//! time, an `mprotect` system call for every ~36 bodies of 100 bytes. Those calls, and
//! the allocator's per-body work, were a sixth of what a pipelined put cost the
//! server. Here memory comes and goes a page at a time, and the process's allocator
//! settings are left alone (the server may be embedded in someone else's program).
//!
//! An empty page is kept for reuse (up to [`SPARE_PAGES`]) or handed back at once, so
//! the memory held is at most the pages the live bodies touch plus the spares.
//! Nothing here locks: the arena belongs to the job table, which the store lock guards.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;

/// Bytes per page, and its alignment.
const PAGE: usize = 64 * 1024;
/// Slot sizes are multiples of this.
const GRAIN: usize = 16;
/// Bytes at the start of a page for its [`Header`] (slots stay 16-byte aligned).
const HEADER: usize = 64;
/// Slot size classes: 16, 32, ... bytes, up to the largest small body.
const CLASSES: usize = super::body::SHARED_MIN.div_ceil(GRAIN);
/// Empty pages kept for the next bodies instead of handed back.
const SPARE_PAGES: usize = 16;
/// Marks a page that is in no list of pages with room.
const NOWHERE: u32 = u32::MAX;

/// The start of every page.
#[repr(C)]
struct Header {
    /// Slot size class (slot size `(class + 1) * GRAIN`).
    class: u32,
    /// Slots in use.
    live: u32,
    /// Offset of the most recently freed slot (which holds the offset of the one freed
    /// before it), 0 for none.
    free: u32,
    /// Offset of the first slot never used.
    fresh: u32,
    /// Index in its class's list of pages with room, or [`NOWHERE`].
    room_at: u32,
    /// Index in [`BodyArena::pages`].
    page_at: u32,
}

const _: () = assert!(std::mem::size_of::<Header>() <= HEADER);

fn layout() -> Layout {
    // PAGE is a power of two, and a valid size for its own alignment.
    Layout::from_size_align(PAGE, PAGE).unwrap_or_else(|_| unreachable!())
}

fn class_of(len: usize) -> usize {
    len.div_ceil(GRAIN).max(1) - 1
}

fn slot_size(class: usize) -> usize {
    (class + 1) * GRAIN
}

/// The page a slot of this arena lies in.
fn page_of(ptr: NonNull<u8>) -> NonNull<Header> {
    let into = ptr.as_ptr() as usize & (PAGE - 1);
    // SAFETY: a slot lies `into` bytes past the start of its page, which is not null.
    unsafe { NonNull::new_unchecked(ptr.as_ptr().sub(into)) }.cast()
}

/// Slots for small bodies (see the module's documentation).
#[derive(Debug)]
pub struct BodyArena {
    /// Per size class, the pages with a free or never used slot; bodies go to the last.
    room: Vec<Vec<NonNull<Header>>>,
    /// Every page in use (empty ones included until they go to `spare`).
    pages: Vec<NonNull<Header>>,
    /// Empty pages kept for reuse.
    spare: Vec<NonNull<Header>>,
}

// SAFETY: the arena owns its pages outright; moving it to another thread moves them.
unsafe impl Send for BodyArena {}
// SAFETY: `&BodyArena` reads nothing through its pointers.
unsafe impl Sync for BodyArena {}

impl Default for BodyArena {
    fn default() -> BodyArena {
        BodyArena {
            room: (0..CLASSES).map(|_| Vec::new()).collect(),
            pages: Vec::new(),
            spare: Vec::new(),
        }
    }
}

impl BodyArena {
    /// Copy `bytes` (shorter than `SHARED_MIN`) into a slot; where it went. The slot
    /// is this arena's until [`BodyArena::free`] is called with it.
    pub fn alloc(&mut self, bytes: &[u8]) -> NonNull<u8> {
        let class = class_of(bytes.len());
        debug_assert!(class < CLASSES);
        let size = slot_size(class);
        let page = match self.room[class].last() {
            Some(&page) => page,
            None => self.new_page(class),
        };
        let base = page.cast::<u8>();
        // SAFETY: `page` is a live page of this arena, its header initialised, and no
        // other reference to it exists while `&mut self` is held.
        let h = unsafe { &mut *page.as_ptr() };
        let at = if h.free != 0 {
            let at = h.free;
            // SAFETY: a freed slot's first 4 bytes hold the next freed slot's offset.
            h.free = unsafe { base.add(at as usize).cast::<u32>().read() };
            at
        } else {
            let at = h.fresh;
            h.fresh += size as u32;
            at
        };
        h.live += 1;
        if h.free == 0 && h.fresh as usize + size > PAGE {
            // Full: it was the last of its class's pages with room.
            self.room[class].pop();
            h.room_at = NOWHERE;
        }
        // SAFETY: the slot `at..at + size` lies in the page and is unused; `bytes`
        // fits in it.
        let slot = unsafe { base.add(at as usize) };
        // SAFETY: as above; `bytes` is another allocation, so they do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), slot.as_ptr(), bytes.len()) };
        slot
    }

    /// Give back the slot of a body of `len` bytes that [`BodyArena::alloc`] placed at
    /// `ptr`.
    ///
    /// # Safety
    /// `ptr` must come from `alloc` on this arena for `len` bytes, freed once.
    pub unsafe fn free(&mut self, ptr: NonNull<u8>, len: usize) {
        let page = page_of(ptr);
        // SAFETY: `ptr` lies in a live page of this arena (the caller's promise).
        let h = unsafe { &mut *page.as_ptr() };
        debug_assert_eq!(h.class as usize, class_of(len));
        let at = (ptr.as_ptr() as usize - page.as_ptr() as usize) as u32;
        // SAFETY: the slot is at least 16 bytes and no longer in use.
        unsafe { ptr.cast::<u32>().write(h.free) };
        h.free = at;
        h.live -= 1;
        let class = h.class as usize;
        if h.live == 0 {
            if h.room_at != NOWHERE {
                self.forget_room(class, h.room_at as usize);
            }
            self.release(page);
        } else if h.room_at == NOWHERE {
            h.room_at = self.room[class].len() as u32;
            self.room[class].push(page);
        }
    }

    /// Pages holding bodies (for the memory check and its tests).
    pub fn pages(&self) -> usize {
        self.pages.len()
    }

    fn new_page(&mut self, class: usize) -> NonNull<Header> {
        let page = self.spare.pop().unwrap_or_else(|| {
            // SAFETY: the layout has a non-zero size.
            let raw = unsafe { alloc(layout()) };
            NonNull::new(raw)
                .unwrap_or_else(|| handle_alloc_error(layout()))
                .cast()
        });
        let header = Header {
            class: class as u32,
            live: 0,
            free: 0,
            fresh: HEADER as u32,
            room_at: self.room[class].len() as u32,
            page_at: self.pages.len() as u32,
        };
        // SAFETY: the page is PAGE bytes, aligned, and this arena's alone.
        unsafe { page.as_ptr().write(header) };
        self.pages.push(page);
        self.room[class].push(page);
        page
    }

    /// Take the page at `at` out of its class's list of pages with room.
    fn forget_room(&mut self, class: usize, at: usize) {
        let list = &mut self.room[class];
        list.swap_remove(at);
        if let Some(&moved) = list.get(at) {
            // SAFETY: pages in the lists are live, and not otherwise borrowed here.
            unsafe { (*moved.as_ptr()).room_at = at as u32 };
        }
    }

    /// An empty page leaves use: kept as a spare, or handed back.
    fn release(&mut self, page: NonNull<Header>) {
        // SAFETY: `page` is live; only its header is read.
        let at = unsafe { (*page.as_ptr()).page_at } as usize;
        self.pages.swap_remove(at);
        if let Some(&moved) = self.pages.get(at) {
            // SAFETY: as above.
            unsafe { (*moved.as_ptr()).page_at = at as u32 };
        }
        if self.spare.len() < SPARE_PAGES {
            self.spare.push(page);
        } else {
            // SAFETY: allocated with this layout, and no longer referenced.
            unsafe { dealloc(page.as_ptr().cast(), layout()) };
        }
    }
}

impl Drop for BodyArena {
    fn drop(&mut self) {
        for page in self.pages.drain(..).chain(self.spare.drain(..)) {
            // SAFETY: every page was allocated with this layout; the bodies in them
            // are gone with the job table that owns this arena.
            unsafe { dealloc(page.as_ptr().cast(), layout()) };
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn read(ptr: NonNull<u8>, len: usize) -> Vec<u8> {
        // SAFETY: the test reads slots it allocated and has not freed.
        unsafe { std::slice::from_raw_parts(ptr.as_ptr(), len) }.to_vec()
    }

    #[test]
    fn bodies_keep_their_bytes_and_freed_slots_are_reused() {
        let mut arena = BodyArena::default();
        let bodies: Vec<Vec<u8>> = (0..5000)
            .map(|i| (0..(i % 2047) + 1).map(|b| (b * 7 + i) as u8).collect())
            .collect();
        let mut slots: Vec<_> = bodies.iter().map(|b| arena.alloc(b)).collect();
        for (slot, body) in slots.iter().zip(&bodies) {
            assert_eq!(read(*slot, body.len()), *body);
        }
        let held = arena.pages();
        // Free every other body, then put as many again: they fit in the freed slots.
        for (i, (slot, body)) in slots.iter().zip(&bodies).enumerate() {
            if i % 2 == 0 {
                // SAFETY: allocated above, freed once.
                unsafe { arena.free(*slot, body.len()) };
            }
        }
        for (i, body) in bodies.iter().enumerate() {
            if i % 2 == 0 {
                slots[i] = arena.alloc(body);
            }
        }
        assert_eq!(arena.pages(), held);
        for (slot, body) in slots.iter().zip(&bodies) {
            assert_eq!(read(*slot, body.len()), *body);
        }
        for (slot, body) in slots.iter().zip(&bodies) {
            // SAFETY: each live slot freed once.
            unsafe { arena.free(*slot, body.len()) };
        }
        assert_eq!(arena.pages(), 0);
        assert!(arena.spare.len() <= SPARE_PAGES);
        assert!(arena.room.iter().all(Vec::is_empty));
    }

    #[test]
    fn a_page_holds_one_size_and_empty_pages_go_back() {
        let mut arena = BodyArena::default();
        let per_page = (PAGE - HEADER) / 112;
        let body = [b'x'; 102];
        let slots: Vec<_> = (0..per_page * 40).map(|_| arena.alloc(&body)).collect();
        assert_eq!(arena.pages(), 40);
        assert_eq!(page_of(slots[0]), page_of(slots[per_page - 1]));
        assert_ne!(page_of(slots[0]), page_of(slots[per_page]));
        // A body of another size class goes to a page of its own.
        let small = arena.alloc(b"ab\r\n");
        assert_eq!(arena.pages(), 41);
        for s in &slots {
            // SAFETY: allocated above, freed once.
            unsafe { arena.free(*s, body.len()) };
        }
        assert_eq!(arena.pages(), 1);
        assert_eq!(arena.spare.len(), SPARE_PAGES);
        assert_eq!(read(small, 4), b"ab\r\n");
        // SAFETY: allocated above, freed once.
        unsafe { arena.free(small, 4) };
    }
}
