//! The memory of small job bodies: 64 KiB pages, each cut into slots of one size.
//!
//! A body shorter than [`SLOT_MAX`] bytes is copied into a slot
//! whose size is its length rounded up to 16 bytes (what the system allocator would
//! round it to, without the allocator's 8-byte header). Pages are aligned to their
//! size, so a slot finds its page's header from its own address, and a freed slot goes
//! on its page's free list, to be taken again before the page's untouched room.
//!
//! Why not one allocation per body: the store's bodies are allocated by the thread
//! holding the lock, which under glibc is a per-thread arena that grows one page at a
//! time, an `mprotect` system call for every ~36 bodies of 100 bytes. Those calls, and
//! the allocator's per-body work, were an eighth of what a pipelined put cost the
//! server. Here memory comes and goes a page at a time, and the process's allocator
//! settings are left alone (the server may be embedded in someone else's program).
//!
//! Pages are cut from 2 MiB regions mapped from the system, aligned to their size:
//! one mapping per 18,000 bodies of 100 bytes, where pages allocated one by one cost
//! a mapping each (a 64 KiB block aligned to 64 KiB is above glibc's threshold for
//! mapping). An empty page is kept for reuse; a region whose pages are all empty is
//! handed back, except one kept idle so that a queue going up and down around a
//! boundary does not map and unmap a region each time. So the memory held is the
//! regions the live bodies touch, plus one.
//!
//! The regions are not advised to use transparent huge pages. Measured here (a VM,
//! huge pages on madvise), the hint halved the page-fault cost of a burst of puts in
//! most runs, but a quarter of the runs took two to three times the CPU, for a worse
//! mean (the Spark writer's server threads per 1,000,000 rows: median 0.128 s, mean
//! 0.170 s with the hint; median 0.155 s, mean 0.155 s without). Where the system
//! backs all anonymous memory with huge pages, the aligned regions get them anyway.
//!
//! Nothing here locks: the arena belongs to the job table, which the store lock guards.

use std::alloc::{handle_alloc_error, Layout};
use std::ptr::NonNull;

/// Bytes per page, and its alignment.
const PAGE: usize = 64 * 1024;
/// Slot sizes are multiples of this.
const GRAIN: usize = 16;
/// Bytes at the start of a page for its [`Header`] (slots stay 16-byte aligned).
const HEADER: usize = 64;
/// Bodies shorter than this go in slots (the job table keeps longer ones otherwise).
pub const SLOT_MAX: usize = 2048;
/// Slot size classes: 16, 32, ... bytes, up to [`SLOT_MAX`].
const CLASSES: usize = SLOT_MAX.div_ceil(GRAIN);
/// Bytes per region, and its alignment (a huge page on x86-64 and arm64 Linux).
const REGION: usize = 2 << 20;
/// Pages per region.
const REGION_PAGES: usize = REGION / PAGE;
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
    /// Index in [`BodyArena::spare`] while the page is empty.
    spare_at: u32,
    /// In a region's first page only: pages of the region holding bodies.
    region_used: u32,
    /// In a region's first page only: index in [`BodyArena::regions`].
    region_at: u32,
}

const _: () = assert!(std::mem::size_of::<Header>() <= HEADER);

fn region_layout() -> Layout {
    // REGION is a power of two, and a valid size for its own alignment.
    Layout::from_size_align(REGION, REGION).unwrap_or_else(|_| unreachable!())
}

/// Map a region of [`REGION`] bytes aligned to its size.
fn map_region() -> NonNull<Header> {
    let fail = || handle_alloc_error(region_layout());
    // Twice the size, then the unaligned ends unmapped.
    // SAFETY: an anonymous private mapping, at an address of the kernel's choice.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            2 * REGION,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        fail();
    }
    let raw = raw.cast::<u8>();
    let lead = (REGION - (raw as usize & (REGION - 1))) & (REGION - 1);
    // SAFETY: both ranges lie within the mapping just made, and nothing uses them.
    unsafe {
        if lead > 0 {
            libc::munmap(raw.cast(), lead);
        }
        libc::munmap(raw.add(lead + REGION).cast(), REGION - lead);
    }
    // SAFETY: `lead` < REGION, within the mapping.
    let region = unsafe { raw.add(lead) };
    NonNull::new(region).unwrap_or_else(fail).cast()
}

/// Hand a region back.
///
/// # Safety
/// `region` came from [`map_region`] and nothing in it is used any more.
unsafe fn unmap_region(region: NonNull<Header>) {
    // SAFETY: the caller's promise.
    unsafe { libc::munmap(region.as_ptr().cast(), REGION) };
}

fn class_of(len: usize) -> usize {
    len.div_ceil(GRAIN).max(1) - 1
}

fn slot_size(class: usize) -> usize {
    (class + 1) * GRAIN
}

/// The region a page lies in (its first page holds the region's counts).
fn region_of(page: NonNull<Header>) -> NonNull<Header> {
    let into = page.as_ptr() as usize & (REGION - 1);
    // SAFETY: a page lies `into` bytes past the start of its region, which is not null.
    unsafe { NonNull::new_unchecked(page.as_ptr().cast::<u8>().sub(into)) }.cast()
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
    /// Every region mapped.
    regions: Vec<NonNull<Header>>,
    /// Empty pages, taken before a region is mapped.
    spare: Vec<NonNull<Header>>,
    /// A region all of whose pages are empty, kept mapped for the next bodies.
    idle: Option<NonNull<Header>>,
    /// Pages holding bodies.
    used: usize,
}

// SAFETY: the arena owns its pages outright; moving it to another thread moves them.
unsafe impl Send for BodyArena {}
// SAFETY: `&BodyArena` reads nothing through its pointers.
unsafe impl Sync for BodyArena {}

impl Default for BodyArena {
    fn default() -> BodyArena {
        BodyArena {
            room: (0..CLASSES).map(|_| Vec::new()).collect(),
            regions: Vec::new(),
            spare: Vec::new(),
            idle: None,
            used: 0,
        }
    }
}

impl BodyArena {
    /// Copy `bytes` (shorter than [`SLOT_MAX`]) into a slot; where it went. The slot
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
        self.used
    }

    /// Regions mapped.
    #[cfg(test)]
    fn regions(&self) -> usize {
        self.regions.len()
    }

    fn new_page(&mut self, class: usize) -> NonNull<Header> {
        if self.spare.is_empty() {
            self.add_region();
        }
        let page = self.spare.pop().unwrap_or_else(|| unreachable!());
        let region = region_of(page);
        if self.idle == Some(region) {
            self.idle = None;
        }
        // SAFETY: `page` is an empty page of a live region, and nothing refers to it;
        // only its own fields are written (the region's counts stay).
        unsafe {
            let h = page.as_ptr();
            (*h).class = class as u32;
            (*h).live = 0;
            (*h).free = 0;
            (*h).fresh = HEADER as u32;
            (*h).room_at = self.room[class].len() as u32;
            (*h).spare_at = NOWHERE;
            (*region.as_ptr()).region_used += 1;
        }
        self.used += 1;
        self.room[class].push(page);
        page
    }

    /// Map a region; its pages become spares (the lowest taken first).
    fn add_region(&mut self) {
        let region = map_region();
        // SAFETY: the region is fresh; its first page's header holds its counts.
        unsafe {
            (*region.as_ptr()).region_used = 0;
            (*region.as_ptr()).region_at = self.regions.len() as u32;
        }
        self.regions.push(region);
        for k in (0..REGION_PAGES).rev() {
            // SAFETY: page `k` lies within the region.
            let page: NonNull<Header> = unsafe { region.cast::<u8>().add(k * PAGE) }.cast();
            // SAFETY: as above; the page is not otherwise used.
            unsafe { (*page.as_ptr()).spare_at = self.spare.len() as u32 };
            self.spare.push(page);
        }
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

    /// An empty page leaves use: kept as a spare; its region handed back if it is now
    /// all empty and another such is kept already.
    fn release(&mut self, page: NonNull<Header>) {
        let region = region_of(page);
        self.used -= 1;
        // SAFETY: `page` and its region are live and not otherwise borrowed here.
        let now_used = unsafe {
            (*page.as_ptr()).spare_at = self.spare.len() as u32;
            (*region.as_ptr()).region_used -= 1;
            (*region.as_ptr()).region_used
        };
        self.spare.push(page);
        if now_used > 0 {
            return;
        }
        match self.idle {
            None => self.idle = Some(region),
            Some(_) => self.drop_region(region),
        }
    }

    /// Hand back a region all of whose pages are spares.
    fn drop_region(&mut self, region: NonNull<Header>) {
        for k in 0..REGION_PAGES {
            // SAFETY: page `k` lies within the live region, a spare (its index valid).
            let page: NonNull<Header> = unsafe { region.cast::<u8>().add(k * PAGE) }.cast();
            // SAFETY: as above.
            let at = unsafe { (*page.as_ptr()).spare_at } as usize;
            self.spare.swap_remove(at);
            if let Some(&moved) = self.spare.get(at) {
                // SAFETY: spares are pages of live regions.
                unsafe { (*moved.as_ptr()).spare_at = at as u32 };
            }
        }
        // SAFETY: the region is live; its first page holds its index.
        let at = unsafe { (*region.as_ptr()).region_at } as usize;
        self.regions.swap_remove(at);
        if let Some(&moved) = self.regions.get(at) {
            // SAFETY: as above.
            unsafe { (*moved.as_ptr()).region_at = at as u32 };
        }
        // SAFETY: none of its pages is in use or listed any more.
        unsafe { unmap_region(region) };
    }
}

impl Drop for BodyArena {
    fn drop(&mut self) {
        for region in self.regions.drain(..) {
            // SAFETY: the bodies in it are gone with the job table owning this arena.
            unsafe { unmap_region(region) };
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
        assert_eq!(arena.regions(), 1, "one empty region is kept");
        assert!(arena.room.iter().all(Vec::is_empty));
    }

    #[test]
    fn a_page_holds_one_size_and_empty_regions_go_back() {
        let mut arena = BodyArena::default();
        let per_page = (PAGE - HEADER) / 112;
        let body = [b'x'; 102];
        let pages = 3 * REGION_PAGES + 5;
        let slots: Vec<_> = (0..per_page * pages).map(|_| arena.alloc(&body)).collect();
        assert_eq!(arena.pages(), pages);
        assert_eq!(arena.regions(), 4);
        assert_eq!(page_of(slots[0]), page_of(slots[per_page - 1]));
        assert_ne!(page_of(slots[0]), page_of(slots[per_page]));
        // A body of another size class goes to a page of its own.
        let small = arena.alloc(b"ab\r\n");
        assert_eq!(arena.pages(), pages + 1);
        for s in &slots {
            // SAFETY: allocated above, freed once.
            unsafe { arena.free(*s, body.len()) };
        }
        // The small body's region stays, and one empty region is kept.
        assert_eq!(arena.pages(), 1);
        assert_eq!(arena.regions(), 2);
        assert_eq!(arena.spare.len(), 2 * REGION_PAGES - 1);
        assert_eq!(read(small, 4), b"ab\r\n");
        // SAFETY: allocated above, freed once.
        unsafe { arena.free(small, 4) };
        assert_eq!(arena.regions(), 1);
        // Bodies go on filling the region kept.
        let again = arena.alloc(&body);
        assert_eq!(arena.regions(), 1);
        assert_eq!(read(again, 102), body);
        // SAFETY: allocated above, freed once.
        unsafe { arena.free(again, 102) };
    }
}
