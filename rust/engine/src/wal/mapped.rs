//! A segment's bytes for replay: the file mapped read-only, so reading a log
//! that is in the page cache costs no copy (a 1M-job log is about 200 MB), or an
//! owned buffer where a mapping is not possible or not wanted.
//!
//! A mapping shows the file as it is on disk. Two things could change it while
//! it is mapped: another process writing or truncating the file, which the
//! directory lock rules out for every beanpole process (the server and the
//! `binlog` tools all take it first), and replay's own torn-tail cut, which
//! drops the mapping before it truncates.

use std::fs::File;
use std::io;
use std::ops::Deref;
use std::os::unix::io::AsRawFd;
use std::ptr::NonNull;

/// The bytes of one segment.
#[derive(Debug)]
pub enum SegmentBytes {
    Owned(Vec<u8>),
    Mapped(Mapping),
}

impl Deref for SegmentBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            SegmentBytes::Owned(v) => v,
            SegmentBytes::Mapped(m) => m,
        }
    }
}

/// A whole file mapped read-only; unmapped when dropped.
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is read-only and owned by this value alone, like a Box<[u8]>.
unsafe impl Send for Mapping {}
// SAFETY: as above; `&Mapping` only reads.
unsafe impl Sync for Mapping {}

impl SegmentBytes {
    /// The whole content of `file`: mapped when it is not empty, else an empty
    /// buffer (a zero-length mapping is not possible).
    pub fn map(file: &File) -> io::Result<SegmentBytes> {
        let len = usize::try_from(file.metadata()?.len())
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
        if len == 0 {
            return Ok(SegmentBytes::Owned(Vec::new()));
        }
        // SAFETY: a new read-only private mapping of `len` bytes of an open file;
        // it aliases no Rust memory. MAP_POPULATE maps every page at once instead
        // of faulting them in one by one as replay goes.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_POPULATE,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr =
            NonNull::new(ptr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave null"))?;
        Ok(SegmentBytes::Mapped(Mapping { ptr, len }))
    }
}

impl Deref for Mapping {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` is a live read-only mapping of `len` bytes (see the module
        // comment for why the file under it does not change).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `map`, once; no slice of it
        // outlives `self` (they borrow it).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}
