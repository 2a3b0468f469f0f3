//! The file operations the log needs, behind a small trait so tests can inject
//! faults (short writes, failed fsyncs, a full disk) while still using real files.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use super::mapped::SegmentBytes;

/// One open segment file.
///
/// Both operations take `&self`: positioned writes and fsync may run at the same
/// time from different threads (a connection writes while the writer thread syncs).
pub trait SegmentFile: Send + Sync {
    /// Write all of `data` at `offset`.
    fn write_all_at(&self, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Write `parts`, one after the other, starting at `offset`.
    fn write_all_vectored_at(&self, offset: u64, parts: &[&[u8]]) -> io::Result<()> {
        let mut at = offset;
        for part in parts {
            self.write_all_at(at, part)?;
            at += part.len() as u64;
        }
        Ok(())
    }
    /// Make everything written so far durable.
    fn sync(&self) -> io::Result<()>;
}

/// A log directory.
pub trait LogDir: Send + Sync {
    /// Sequence numbers of the segments present, ascending.
    fn segments(&self) -> io::Result<Vec<u64>>;
    /// Create segment `seq` with `size` bytes allocated on disk (zeros), durably.
    fn create(&self, seq: u64, size: u64) -> io::Result<Box<dyn SegmentFile>>;
    /// The whole content of segment `seq`.
    fn read(&self, seq: u64) -> io::Result<Vec<u8>>;
    /// The whole content of segment `seq` for replay, mapped where possible (see
    /// [`SegmentBytes`]).
    fn map(&self, seq: u64) -> io::Result<SegmentBytes> {
        self.read(seq).map(SegmentBytes::Owned)
    }
    /// Cut segment `seq` to `len` bytes (a torn tail), durably.
    fn truncate(&self, seq: u64, len: u64) -> io::Result<()>;
    /// Delete segment `seq`, durably.
    fn remove(&self, seq: u64) -> io::Result<()>;
    /// Where the segments live (for messages).
    fn path(&self) -> &Path;
}

/// File name of segment `seq`.
pub fn segment_name(seq: u64) -> String {
    format!("{seq:010}.log")
}

/// A real directory.
#[derive(Debug, Clone)]
pub struct FsDir {
    path: PathBuf,
}

impl FsDir {
    pub fn new(path: impl Into<PathBuf>) -> FsDir {
        FsDir { path: path.into() }
    }

    fn file(&self, seq: u64) -> PathBuf {
        self.path.join(segment_name(seq))
    }

    /// fsync the directory itself, so creations and removals survive a crash.
    fn sync_dir(&self) -> io::Result<()> {
        File::open(&self.path)?.sync_all()
    }
}

struct FsSegment(File);

impl SegmentFile for FsSegment {
    fn write_all_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.0.write_all_at(data, offset)
    }

    fn write_all_vectored_at(&self, offset: u64, parts: &[&[u8]]) -> io::Result<()> {
        let mut iov: Vec<libc::iovec> = parts
            .iter()
            .filter(|p| !p.is_empty())
            .map(|p| libc::iovec {
                iov_base: p.as_ptr() as *mut libc::c_void,
                iov_len: p.len(),
            })
            .collect();
        let mut at = offset;
        let mut first = 0;
        while first < iov.len() {
            let count = (iov.len() - first).min(IOV_MAX);
            let pos = libc::off_t::try_from(at)
                .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
            // SAFETY: `iov[first..first + count]` describes live slices of `parts`
            // (borrowed for the whole call), which pwritev only reads.
            let n = unsafe {
                libc::pwritev(
                    self.0.as_raw_fd(),
                    iov[first..].as_ptr(),
                    count as libc::c_int,
                    pos,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if n == 0 {
                return Err(io::Error::from(io::ErrorKind::WriteZero));
            }
            // A short write: skip what went out, and the written front of a part.
            let mut n = n as usize;
            at += n as u64;
            while n > 0 && first < iov.len() {
                let part = &mut iov[first];
                if n >= part.iov_len {
                    n -= part.iov_len;
                    first += 1;
                } else {
                    // SAFETY: advancing within the same slice, by less than its length.
                    part.iov_base = unsafe { part.iov_base.cast::<u8>().add(n).cast() };
                    part.iov_len -= n;
                    n = 0;
                }
            }
        }
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        self.0.sync_data()
    }
}

/// Most parts one `pwritev` takes (Linux's IOV_MAX).
const IOV_MAX: usize = 1024;

impl LogDir for FsDir {
    fn segments(&self) -> io::Result<Vec<u64>> {
        let mut seqs = Vec::new();
        for entry in std::fs::read_dir(&self.path)? {
            let name = entry?.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(stem) = name.strip_suffix(".log") {
                if stem.len() == 10 && stem.bytes().all(|b| b.is_ascii_digit()) {
                    if let Ok(seq) = stem.parse() {
                        seqs.push(seq);
                    }
                }
            }
        }
        seqs.sort_unstable();
        Ok(seqs)
    }

    fn create(&self, seq: u64, size: u64) -> io::Result<Box<dyn SegmentFile>> {
        let path = self.file(seq);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        // Any failure removes the file again, so a retry can create it afresh.
        let ready = allocate(&file, size)
            .and_then(|()| file.sync_all())
            .and_then(|()| self.sync_dir());
        if let Err(e) = ready {
            drop(file);
            let _ = std::fs::remove_file(&path);
            return Err(e);
        }
        Ok(Box::new(FsSegment(file)))
    }

    fn read(&self, seq: u64) -> io::Result<Vec<u8>> {
        std::fs::read(self.file(seq))
    }

    fn map(&self, seq: u64) -> io::Result<SegmentBytes> {
        SegmentBytes::map(&File::open(self.file(seq))?)
    }

    fn truncate(&self, seq: u64, len: u64) -> io::Result<()> {
        let file = OpenOptions::new().write(true).open(self.file(seq))?;
        file.set_len(len)?;
        file.sync_all()
    }

    fn remove(&self, seq: u64) -> io::Result<()> {
        std::fs::remove_file(self.file(seq))?;
        self.sync_dir()
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

/// Reserve `size` bytes of disk for the file, so later writes cannot hit a full disk.
fn allocate(file: &File, size: u64) -> io::Result<()> {
    let len =
        libc::off_t::try_from(size).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: posix_fallocate only reads the descriptor and the two integers.
    let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) };
    match rc {
        0 => Ok(()),
        // Filesystems without fallocate support: fall back to extending the file.
        libc::EOPNOTSUPP | libc::EINVAL => file.set_len(size),
        err => Err(io::Error::from_raw_os_error(err)),
    }
}

/// Faults to inject into a [`FaultyDir`]; shared with the test that steers them.
#[derive(Debug, Default)]
pub struct Faults {
    /// The next N writes fail with EIO.
    pub fail_writes: AtomicU32,
    /// The next N writes write only half their bytes and then fail with EIO.
    pub short_writes: AtomicU32,
    /// The next N syncs fail with EIO.
    pub fail_syncs: AtomicU32,
    /// Creating a segment fails with ENOSPC while set.
    pub disk_full: AtomicBool,
}

fn take_one(counter: &AtomicU32) -> bool {
    counter
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

/// Real files in a real directory, with faults injected on demand.
#[derive(Debug, Clone)]
pub struct FaultyDir {
    inner: FsDir,
    faults: Arc<Faults>,
}

impl FaultyDir {
    pub fn new(path: impl Into<PathBuf>, faults: Arc<Faults>) -> FaultyDir {
        FaultyDir {
            inner: FsDir::new(path),
            faults,
        }
    }
}

struct FaultySegment {
    inner: Box<dyn SegmentFile>,
    faults: Arc<Faults>,
}

impl SegmentFile for FaultySegment {
    fn write_all_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        if take_one(&self.faults.fail_writes) {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        if take_one(&self.faults.short_writes) {
            self.inner.write_all_at(offset, &data[..data.len() / 2])?;
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        self.inner.write_all_at(offset, data)
    }

    fn sync(&self) -> io::Result<()> {
        if take_one(&self.faults.fail_syncs) {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        self.inner.sync()
    }
}

impl LogDir for FaultyDir {
    fn segments(&self) -> io::Result<Vec<u64>> {
        self.inner.segments()
    }

    fn create(&self, seq: u64, size: u64) -> io::Result<Box<dyn SegmentFile>> {
        if self.faults.disk_full.load(Ordering::SeqCst) {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        let inner = self.inner.create(seq, size)?;
        Ok(Box::new(FaultySegment {
            inner,
            faults: Arc::clone(&self.faults),
        }))
    }

    fn read(&self, seq: u64) -> io::Result<Vec<u8>> {
        self.inner.read(seq)
    }

    fn map(&self, seq: u64) -> io::Result<SegmentBytes> {
        self.inner.map(seq)
    }

    fn truncate(&self, seq: u64, len: u64) -> io::Result<()> {
        self.inner.truncate(seq, len)
    }

    fn remove(&self, seq: u64) -> io::Result<()> {
        self.inner.remove(seq)
    }

    fn path(&self) -> &Path {
        self.inner.path()
    }
}

/// An exclusive lock on a log directory, held for the life of the server.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

impl DirLock {
    /// Take the lock, or fail at once if another process holds it.
    pub fn acquire(dir: &Path) -> io::Result<DirLock> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join("lock"))?;
        // SAFETY: flock only reads the descriptor and the flags.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!(
                        "{} is in use by another server (its lock file is held)",
                        dir.display()
                    ),
                ));
            }
            return Err(e);
        }
        Ok(DirLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vectored_write_puts_every_part_in_place() {
        let path =
            std::env::temp_dir().join(format!("beanpole-fs-vectored-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("temp dir");
        let dir = FsDir::new(&path);
        let seg = dir.create(1, 1 << 20).expect("segment");
        // More parts than one pwritev takes, some of them empty.
        let parts: Vec<Vec<u8>> = (0..2500u32)
            .map(|i| vec![(i % 251) as u8; (i % 7) as usize])
            .collect();
        let slices: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        seg.write_all_vectored_at(100, &slices).expect("write");
        let expected: Vec<u8> = parts.concat();
        let bytes = dir.read(1).expect("read");
        assert_eq!(&bytes[100..100 + expected.len()], expected.as_slice());
        assert!(bytes[100 + expected.len()..].iter().all(|&b| b == 0));
        let _ = std::fs::remove_dir_all(&path);
    }
}
