//! The snapshot file: openraft's metadata for it and the state as a segment
//! image (`wal::replica`), checksummed together, replaced whole.
//!
//! ```text
//! sm/snapshot   magic "BPSNAPSH", version u32, meta_len u32,
//!               crc u32 (CRC32C of meta and image), meta (codec.rs), image
//! ```
//!
//! The image alone is what travels to a follower that needs a snapshot; its
//! metadata travels beside it in openraft's own message.
//!
//! The file is written a chunk at a time, each sent to the disk before the next
//! is written and waited for before the one after ([`WRITE_CHUNK`]): the disk
//! the file shares with the Raft log then never holds much of it unwritten.
//! Written whole and synced at the end, a snapshot of 100 MB made every
//! node's log fsync of that moment wait for all of it (130-200 ms measured,
//! `bench/README.md`), and with it every commit. Imports the codec and the
//! cluster's types only.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;

use thiserror::Error;

use crate::codec::{self, CodecError, Reader};
use crate::types::SnapshotMeta;

const MAGIC: &[u8; 8] = b"BPSNAPSH";
const VERSION: u32 = 1;
const HEAD_LEN: usize = 20;
/// The file's name in the state machine's directory.
pub const FILE: &str = "snapshot";
/// The snapshot file is written and sent to the disk this many bytes at a time.
pub const WRITE_CHUNK: usize = 1 << 20;

/// Why a snapshot cannot be read or kept.
#[derive(Debug, Error)]
pub enum SnapshotError {
    #[error("snapshot {path}: {source}")]
    Io { path: String, source: io::Error },
    #[error("snapshot {path} is not a beanpole snapshot of version {VERSION}")]
    Format { path: String },
    #[error("snapshot {path} fails its checksum")]
    Checksum { path: String },
    #[error("snapshot {path}: metadata: {source}")]
    Meta { path: String, source: CodecError },
    #[error("snapshot image: {0}")]
    Image(#[from] beanpole_engine::wal::replica::ReplicaError),
}

/// The head of the file for `meta` and `image`: magic, version, lengths,
/// checksum and metadata; the image follows it.
pub fn head(meta: &SnapshotMeta, image: &[u8]) -> Vec<u8> {
    let mut meta_bytes = Vec::new();
    codec::put_snapshot_meta(&mut meta_bytes, meta);
    let crc = crc32c::crc32c_append(crc32c::crc32c(&meta_bytes), image);
    let mut out = Vec::with_capacity(HEAD_LEN + meta_bytes.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(meta_bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&meta_bytes);
    out
}

/// The metadata and image of a file's bytes.
pub fn decode<'a>(path: &Path, bytes: &'a [u8]) -> Result<(SnapshotMeta, &'a [u8]), SnapshotError> {
    let name = || path.display().to_string();
    let mut r = Reader(bytes);
    let head = r
        .take(HEAD_LEN)
        .map_err(|_| SnapshotError::Format { path: name() })?;
    if &head[..8] != MAGIC || head[8..12] != VERSION.to_le_bytes() {
        return Err(SnapshotError::Format { path: name() });
    }
    let meta_len = u32::from_le_bytes([head[12], head[13], head[14], head[15]]) as usize;
    let crc = u32::from_le_bytes([head[16], head[17], head[18], head[19]]);
    let meta_bytes = r
        .take(meta_len)
        .map_err(|_| SnapshotError::Format { path: name() })?;
    let image = r.0;
    if crc32c::crc32c_append(crc32c::crc32c(meta_bytes), image) != crc {
        return Err(SnapshotError::Checksum { path: name() });
    }
    let mut m = Reader(meta_bytes);
    let meta_err = |source| SnapshotError::Meta {
        path: name(),
        source,
    };
    let meta = codec::snapshot_meta(&mut m).map_err(meta_err)?;
    m.end().map_err(meta_err)?;
    Ok((meta, image))
}

/// Replace the snapshot file in `dir` with `head` and `image` (as
/// [`head`] makes it), durably: written aside, synced, renamed over, the
/// directory synced. The image is written from where it is, not copied.
pub fn save(dir: &Path, head: &[u8], image: &[u8]) -> Result<(), SnapshotError> {
    let aside = dir.join(format!("{FILE}.new"));
    let io_err = |source| SnapshotError::Io {
        path: aside.display().to_string(),
        source,
    };
    let len = (head.len() + image.len()) as u64;
    let file = File::create(&aside).map_err(io_err)?;
    file.write_all_at(head, 0).map_err(io_err)?;
    let mut at = head.len() as u64;
    let mut sent: Option<(u64, u64)> = None;
    for chunk in image.chunks(WRITE_CHUNK) {
        file.write_all_at(chunk, at).map_err(io_err)?;
        if let Some((from, n)) = sent {
            write_back(&file, from, n, true).map_err(io_err)?;
        }
        write_back(&file, at, chunk.len() as u64, false).map_err(io_err)?;
        sent = Some((at, chunk.len() as u64));
        at += chunk.len() as u64;
    }
    file.sync_all().map_err(io_err)?;
    crate::synced::file(&aside, len);
    let path = dir.join(FILE);
    std::fs::rename(&aside, &path).map_err(io_err)?;
    crate::synced::sync_dir(dir).map_err(io_err)?;
    crate::synced::file(&path, len);
    Ok(())
}

/// Start writing `len` bytes of `file` from `from` back to the disk; with
/// `wait`, wait until they are written instead (not a sync: the device's cache
/// and the file's metadata wait for the fsync at the end).
fn write_back(file: &File, from: u64, len: u64, wait: bool) -> io::Result<()> {
    let flags = if wait {
        libc::SYNC_FILE_RANGE_WAIT_BEFORE
            | libc::SYNC_FILE_RANGE_WRITE
            | libc::SYNC_FILE_RANGE_WAIT_AFTER
    } else {
        libc::SYNC_FILE_RANGE_WRITE
    };
    let (Ok(from), Ok(len)) = (libc::off64_t::try_from(from), libc::off64_t::try_from(len)) else {
        return Ok(());
    };
    // SAFETY: a plain system call on a descriptor this function borrows; it
    // reads no memory of ours.
    let done = unsafe { libc::sync_file_range(file.as_raw_fd(), from, len, flags) };
    if done == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The snapshot file in `dir`, if there is one.
pub fn load(dir: &Path) -> Result<Option<(SnapshotMeta, Vec<u8>)>, SnapshotError> {
    let path = dir.join(FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(SnapshotError::Io {
                path: path.display().to_string(),
                source,
            })
        }
    };
    let (meta, image) = decode(&path, &bytes)?;
    let head = bytes.len() - image.len();
    let mut bytes = bytes;
    // The image where it was read, not a copy beside it.
    bytes.drain(..head);
    Ok(Some((meta, bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file's bytes for `meta` and `image`, as `save` writes them.
    fn encode(meta: &SnapshotMeta, image: &[u8]) -> Vec<u8> {
        let mut out = head(meta, image);
        out.extend_from_slice(image);
        out
    }

    #[test]
    fn a_snapshot_file_reads_back_and_a_damaged_one_is_refused() {
        let meta = SnapshotMeta {
            snapshot_id: "1-2-3".into(),
            ..SnapshotMeta::default()
        };
        let bytes = encode(&meta, b"image bytes");
        let path = Path::new("snap");
        let (back, image) = decode(path, &bytes).expect("reads back");
        assert_eq!((back, image), (meta, &b"image bytes"[..]));
        let mut flipped = bytes.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert!(matches!(
            decode(path, &flipped),
            Err(SnapshotError::Checksum { .. })
        ));
        assert!(matches!(
            decode(path, &bytes[..10]),
            Err(SnapshotError::Format { .. })
        ));
    }
}
