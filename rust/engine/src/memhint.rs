//! Hints to the kernel about large buffers filled at once (a restart's job table
//! and replay's list of jobs): back them with transparent huge pages, so filling
//! a few hundred megabytes costs one page fault per 2 MiB instead of one per
//! 4 KiB. Only a hint: where huge pages are off, nothing changes.

/// Below this, a buffer is not worth a system call.
const MIN_BYTES: usize = 4 << 20;

/// Hint that the allocation of `v` (its whole capacity) be backed by huge pages.
pub(crate) fn huge_pages<T>(v: &Vec<T>) {
    let bytes = v.capacity().saturating_mul(std::mem::size_of::<T>());
    if bytes < MIN_BYTES {
        return;
    }
    const PAGE: usize = 4096;
    let start = (v.as_ptr() as usize).next_multiple_of(PAGE);
    let end = (v.as_ptr() as usize + bytes) / PAGE * PAGE;
    if end <= start {
        return;
    }
    // SAFETY: the range lies within the Vec's own allocation, page-aligned; this
    // advice changes how the kernel backs the pages, never their contents. A
    // failure (huge pages not supported) is harmless and ignored.
    unsafe {
        libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
    }
}
