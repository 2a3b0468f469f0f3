//! The Raft log on disk: segment files of framed entries, and the small files
//! beside them (vote, committed, purged). Owned by the log writer thread only;
//! reading it all back at start is [`LogFiles::open`].
//!
//! ```text
//! raft/NNNNNNNNNNNNNNNNNNNN.rlog   a segment: header, then frames back to back,
//!                                  then (version 2) zeros written ahead of them
//!   header  magic "BPRAFTLG", version u32, header_len u32 (16)
//!   frame   len u32, crc u32 (CRC32C of the len field and the payload), payload (codec.rs entry)
//!   end     8 zero bytes where a frame would start (or the file's end)
//! raft/vote, raft/purged   len u32, crc u32, payload; replaced whole (written
//!                          aside, synced, renamed over)
//! raft/committed           the same frame, overwritten in place, not synced
//! ```
//!
//! `committed` changes with every commit, on every node: replacing it whole
//! each time (a new inode, a rename, the old inode freed) cost the followers
//! about half their CPU under load, so it is overwritten where it is. It is
//! advice (a lost or damaged one only means less is re-applied at start), so
//! one that does not read back is reported and taken as absent.
//!
//! The writer keeps the current segment [`ZEROS_AHEAD`] bytes of written zeros
//! ahead of its frames: a frame then overwrites blocks the file already has,
//! so the fsync that follows writes data only, not the file's new size and
//! blocks (an ext4 journal commit each time, which cost each node about a
//! quarter of its log writer's CPU and a second wait per fsync). A segment's
//! frames end at the first frame header of zeros (a frame's never is: its CRC
//! covers its length).
//!
//! A frame that does not read back at the end of the last segment is a torn
//! write and is cut, and so is anything but zeros after the last segment's
//! frames (it would otherwise lie behind the next frames written); anywhere
//! else it is corruption and opening fails. A version 1 segment (no zeros
//! ahead) reads the same way. Imports the codec and the cluster's types,
//! nothing of the engine.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use thiserror::Error;

use super::frames::{frame, Frames, Placed, FRAME_LEN};
use crate::codec::{self, CodecError, Reader};
use crate::synced::{self, sync_dir};
use crate::types::{Entry, LogId, Vote};

/// A segment is closed once it holds this many bytes.
pub const SEGMENT_BYTES: u64 = 64 << 20;
const MAGIC: &[u8; 8] = b"BPRAFTLG";
/// The version new segments are written with; 2 adds the zeros ahead.
const VERSION: u32 = 2;
/// The versions read back.
const READ_VERSIONS: [u32; 2] = [1, 2];
/// How far ahead of its frames the current segment holds written zeros.
pub const ZEROS_AHEAD: u64 = 1 << 20;
const HEADER_LEN: u64 = 16;
/// The frame buffer kept between appends is given back once an entry larger
/// than this (a big job's) has grown it.
const FRAME_KEPT: usize = 1 << 20;

/// Why the log directory cannot be used.
#[derive(Debug, Error)]
pub enum LogError {
    #[error("raft log {dir}: {source}")]
    Io { dir: String, source: io::Error },
    #[error("raft log {file} is not a beanpole raft log segment")]
    BadSegment { file: String },
    #[error("raft log {file} is corrupt at offset {offset} ({reason}) with segments after it")]
    Corrupt {
        file: String,
        offset: u64,
        reason: String,
    },
    #[error("raft log {dir}: entry {found} follows entry {previous}, leaving a hole")]
    Hole {
        dir: String,
        previous: u64,
        found: u64,
    },
    #[error("raft log {file}: {source}")]
    Meta { file: String, source: CodecError },
}

/// One segment file: where each of its entries starts.
#[derive(Debug)]
struct Segment {
    seq: u64,
    /// Index of its first entry (of the next one to append, while empty).
    first: u64,
    offsets: Vec<u64>,
    /// Where its frames end.
    len: u64,
    /// How many bytes the file holds (its frames and the zeros after them).
    written: u64,
    /// A handle for reading entries back (`frames.rs`).
    read: Arc<File>,
}

impl Segment {
    fn next_index(&self) -> u64 {
        self.first + self.offsets.len() as u64
    }

    fn placed(&self) -> Placed {
        Placed {
            first: self.first,
            offsets: self.offsets.clone(),
            end: self.len,
            file: Arc::clone(&self.read),
        }
    }
}

/// What a directory held.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Entries after the purged one, consecutive.
    pub entries: Vec<Entry>,
    pub vote: Option<Vote>,
    pub committed: Option<LogId>,
    pub purged: Option<LogId>,
    /// Torn tails cut.
    pub warnings: Vec<String>,
}

/// The open log directory.
#[derive(Debug)]
pub struct LogFiles {
    dir: PathBuf,
    segments: Vec<Segment>,
    /// The last segment, open for writing.
    file: File,
    /// The small file last overwritten in place (`committed`, at every
    /// commit), kept open with its length: each save is then one write.
    in_place: Option<InPlace>,
    /// The last frame written, its buffer kept for the next: a buffer made for
    /// each append was memory the allocator handed out fresh each time (and
    /// encoding into it spares the entry a buffer of its own).
    frame: Vec<u8>,
    /// Where the frames are, for readers of entries no longer in memory.
    frames: Arc<Frames>,
}

#[derive(Debug)]
struct InPlace {
    name: String,
    file: File,
    len: u64,
}

fn seg_name(seq: u64) -> String {
    format!("{seq:020}.rlog")
}

impl LogFiles {
    /// Open (creating) `dir` and read back everything in it.
    pub fn open(dir: &Path) -> Result<(LogFiles, Loaded), LogError> {
        let io_err = |source| LogError::Io {
            dir: dir.display().to_string(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io_err)?;
        let mut seqs = Vec::new();
        for item in std::fs::read_dir(dir).map_err(io_err)? {
            let name = item.map_err(io_err)?.file_name();
            let name = name.to_string_lossy();
            if let Some(seq) = name
                .strip_suffix(".rlog")
                .and_then(|s| s.parse::<u64>().ok())
            {
                seqs.push(seq);
            }
        }
        seqs.sort_unstable();
        let mut loaded = Loaded {
            vote: read_meta(dir, "vote", codec::vote)?,
            purged: read_meta(dir, "purged", codec::log_id)?.flatten(),
            ..Loaded::default()
        };
        match read_meta(dir, "committed", codec::log_id) {
            Ok(committed) => loaded.committed = committed.flatten(),
            Err(e) => loaded.warnings.push(format!("{e}; taken as absent")),
        }
        let mut segments = Vec::new();
        let mut all = Vec::new();
        for (i, &seq) in seqs.iter().enumerate() {
            let path = dir.join(seg_name(seq));
            let (segment, entries) = read_segment(&path, seq, i + 1 == seqs.len(), &mut loaded)?;
            segments.push(segment);
            all.extend(entries);
        }
        let floor = loaded.purged.map_or(0, |p| p.index + 1);
        all.retain(|e: &Entry| e.log_id.index >= floor);
        for pair in all.windows(2) {
            if pair[1].log_id.index != pair[0].log_id.index + 1 {
                return Err(LogError::Hole {
                    dir: dir.display().to_string(),
                    previous: pair[0].log_id.index,
                    found: pair[1].log_id.index,
                });
            }
        }
        loaded.entries = all;
        // An empty segment's first index is where the one before it ends.
        let mut next = floor;
        for seg in &mut segments {
            if seg.offsets.is_empty() {
                seg.first = next.max(seg.first);
            }
            next = seg.next_index();
        }
        if segments.is_empty() {
            segments.push(create_segment(dir, 1, floor).map_err(io_err)?);
        }
        let last = segments.last().map_or(1, |s| s.seq);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(dir.join(seg_name(last)))
            .map_err(io_err)?;
        let files = LogFiles {
            dir: dir.to_path_buf(),
            segments,
            file,
            in_place: None,
            frame: Vec::new(),
            frames: Arc::default(),
        };
        files.publish();
        Ok((files, loaded))
    }

    /// The table of frames readers use (`frames.rs`).
    pub fn frames(&self) -> Arc<Frames> {
        Arc::clone(&self.frames)
    }

    /// Publish the segments as they now are to the frames' readers.
    fn publish(&self) {
        self.frames
            .replace(self.segments.iter().map(Segment::placed).collect());
    }

    fn last(&mut self) -> &mut Segment {
        // `open` always leaves one segment and nothing removes the last one.
        let at = self.segments.len() - 1;
        &mut self.segments[at]
    }

    /// Write the entry `index` framed; starts a new segment when the current one
    /// is full or the index does not follow its last entry (after a purge past
    /// the end of the log).
    #[cfg(test)]
    pub fn append(&mut self, index: u64, payload: &[u8]) -> io::Result<()> {
        self.append_with(index, |out| out.extend_from_slice(payload))
    }

    /// [`LogFiles::append`] of the payload `put` writes, encoded straight into
    /// the frame (no buffer of its own).
    pub fn append_with(&mut self, index: u64, put: impl FnOnce(&mut Vec<u8>)) -> io::Result<()> {
        let mut frame = std::mem::take(&mut self.frame);
        frame.clear();
        frame.extend_from_slice(&[0; FRAME_LEN]);
        put(&mut frame);
        let len = (frame.len() - FRAME_LEN) as u32;
        frame[..4].copy_from_slice(&len.to_le_bytes());
        let crc = crc32c::crc32c_append(crc32c::crc32c(&frame[..4]), &frame[FRAME_LEN..]);
        frame[4..FRAME_LEN].copy_from_slice(&crc.to_le_bytes());
        let written = self.write_frame(index, &frame);
        if frame.capacity() <= FRAME_KEPT {
            self.frame = frame;
        }
        written
    }

    fn write_frame(&mut self, index: u64, frame: &[u8]) -> io::Result<()> {
        let frame_len = frame.len() as u64;
        let seg = self.last();
        if seg.next_index() != index
            || (!seg.offsets.is_empty() && seg.len + frame_len > SEGMENT_BYTES)
        {
            self.roll(index)?;
        }
        let seg = self.last();
        if seg.len + frame_len > seg.written {
            let (from, to) = (seg.written, seg.len + frame_len + ZEROS_AHEAD);
            write_zeros(&self.file, from, to)?;
            self.last().written = to;
        }
        let at = self.last().len;
        self.file.write_all_at(frame, at)?;
        let seg = self.last();
        seg.offsets.push(at);
        seg.len += frame_len;
        let end = seg.len;
        self.frames.push(index, at, end);
        Ok(())
    }

    /// Close the current segment (synced) and start the next, whose first entry
    /// will be `index`.
    fn roll(&mut self, index: u64) -> io::Result<()> {
        self.file.sync_data()?;
        self.note_synced();
        let seq = self.last().seq + 1;
        let segment = create_segment(&self.dir, seq, index)?;
        self.file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(self.dir.join(seg_name(seq)))?;
        self.segments.push(segment);
        self.publish();
        Ok(())
    }

    /// Make everything written so far durable.
    pub fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()?;
        self.note_synced();
        Ok(())
    }

    /// Tell the sync record (`synced.rs`) the current segment is synced whole
    /// (its frames and the zeros written after them).
    fn note_synced(&mut self) {
        if !synced::on() {
            return;
        }
        let seg = self.last();
        let (seq, len) = (seg.seq, seg.written);
        synced::file(&self.dir.join(seg_name(seq)), len);
    }

    /// Remove the entries from `index` on (durably).
    pub fn truncate(&mut self, index: u64) -> io::Result<()> {
        while self.segments.len() > 1 && self.last().first >= index {
            let seq = self.last().seq;
            self.segments.pop();
            std::fs::remove_file(self.dir.join(seg_name(seq)))?;
            let last = self.last().seq;
            self.file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(self.dir.join(seg_name(last)))?;
        }
        let seg = self.last();
        if index < seg.next_index() {
            let keep = index.saturating_sub(seg.first) as usize;
            let cut = seg.offsets.get(keep).copied().unwrap_or(HEADER_LEN);
            seg.offsets.truncate(keep);
            if keep == 0 {
                seg.first = index;
            }
            seg.len = cut;
            seg.written = cut;
            self.file.set_len(cut)?;
        }
        self.publish();
        self.file.sync_all()?;
        self.note_synced();
        sync_dir(&self.dir)
    }

    /// Remove whole segments (never the current one) whose entries are all at or
    /// below `index`; the caller has saved the purged id first.
    pub fn purge(&mut self, index: u64) -> io::Result<()> {
        while self.segments.len() > 1 && self.segments[0].next_index() <= index + 1 {
            let seg = self.segments.remove(0);
            self.publish();
            std::fs::remove_file(self.dir.join(seg_name(seg.seq)))?;
        }
        Ok(())
    }

    /// Replace the small file `name` with `payload`; with `durable`, it is on
    /// disk when this returns (written aside, synced, renamed over), without
    /// it is overwritten in place (through a handle kept from the last time).
    pub fn save_meta(&mut self, name: &str, payload: &[u8], durable: bool) -> io::Result<()> {
        let mut bytes = Vec::with_capacity(FRAME_LEN + payload.len());
        bytes.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        let crc = crc32c::crc32c_append(crc32c::crc32c(&bytes[..4]), payload);
        bytes.extend_from_slice(&crc.to_le_bytes());
        bytes.extend_from_slice(payload);
        // Taken out: a save that replaces it whole, or a write that fails and
        // leaves it unknown, has it opened again next time.
        let kept = self.in_place.take_if(|kept| kept.name == name);
        if let Some(mut kept) = kept.filter(|_| !durable) {
            kept.file.write_all_at(&bytes, 0)?;
            if kept.len != bytes.len() as u64 {
                kept.file.set_len(bytes.len() as u64)?;
                kept.len = bytes.len() as u64;
            }
            self.in_place = Some(kept);
            return Ok(());
        }
        if !durable {
            let file = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(self.dir.join(name))?;
            file.write_all_at(&bytes, 0)?;
            file.set_len(bytes.len() as u64)?;
            self.in_place = Some(InPlace {
                name: name.to_owned(),
                file,
                len: bytes.len() as u64,
            });
            return Ok(());
        }
        let aside = self.dir.join(format!("{name}.new"));
        let file = File::create(&aside)?;
        file.write_all_at(&bytes, 0)?;
        file.sync_all()?;
        synced::file(&aside, bytes.len() as u64);
        let path = self.dir.join(name);
        std::fs::rename(&aside, &path)?;
        sync_dir(&self.dir)?;
        synced::file(&path, bytes.len() as u64);
        Ok(())
    }
}

fn create_segment(dir: &Path, seq: u64, first: u64) -> io::Result<Segment> {
    let mut header = Vec::with_capacity(HEADER_LEN as usize);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&VERSION.to_le_bytes());
    header.extend_from_slice(&(HEADER_LEN as u32).to_le_bytes());
    let path = dir.join(seg_name(seq));
    let file = File::create(&path)?;
    file.write_all_at(&header, 0)?;
    file.sync_all()?;
    synced::file(&path, HEADER_LEN);
    sync_dir(dir)?;
    Ok(Segment {
        seq,
        first,
        offsets: Vec::new(),
        len: HEADER_LEN,
        written: HEADER_LEN,
        read: Arc::new(File::open(&path)?),
    })
}

/// Fill `from..to` of `file` with written zeros.
fn write_zeros(file: &File, from: u64, to: u64) -> io::Result<()> {
    const CHUNK: usize = 64 << 10;
    let zeros = [0u8; CHUNK];
    let mut at = from;
    while at < to {
        let n = (to - at).min(CHUNK as u64) as usize;
        file.write_all_at(&zeros[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

/// Whether a frame would start at the start of `bytes`: not the end of the
/// frames (a header of zeros, or nothing left).
fn frame_follows(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(FRAME_LEN)];
    head.iter().any(|&b| b != 0)
}

fn read_segment(
    path: &Path,
    seq: u64,
    last: bool,
    loaded: &mut Loaded,
) -> Result<(Segment, Vec<Entry>), LogError> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| LogError::Io {
        dir: name.clone(),
        source,
    })?;
    if bytes.len() < HEADER_LEN as usize
        || &bytes[..8] != MAGIC
        || !READ_VERSIONS
            .iter()
            .any(|v| bytes[8..12] == v.to_le_bytes())
    {
        return Err(LogError::BadSegment { file: name });
    }
    let mut at = HEADER_LEN as usize;
    let mut offsets = Vec::new();
    let mut entries = Vec::new();
    let mut written = bytes.len() as u64;
    while at < bytes.len() {
        if !frame_follows(&bytes[at..]) {
            if let Some(stray) = bytes[at..].iter().position(|&b| b != 0) {
                let reason = format!("bytes after the frames' end, at offset {}", at + stray);
                if !last {
                    return Err(LogError::Corrupt {
                        file: name,
                        offset: at as u64,
                        reason,
                    });
                }
                cut_tail(path, at, bytes.len(), &reason, loaded)?;
                written = at as u64;
            }
            break;
        }
        let read = frame(&bytes[at..])
            .and_then(|(payload, n)| Ok((codec::entry(payload).map_err(|e| e.to_string())?, n)));
        match read {
            Ok((entry, n)) => {
                offsets.push(at as u64);
                entries.push(entry);
                at += n;
            }
            Err(reason) if last => {
                cut_tail(path, at, bytes.len(), &reason, loaded)?;
                written = at as u64;
                break;
            }
            Err(reason) => {
                return Err(LogError::Corrupt {
                    file: name,
                    offset: at as u64,
                    reason,
                })
            }
        }
    }
    let first = entries.first().map_or(0, |e: &Entry| e.log_id.index);
    let read = File::open(path).map_err(|source| LogError::Io {
        dir: name.clone(),
        source,
    })?;
    let segment = Segment {
        seq,
        first,
        offsets,
        len: at as u64,
        written,
        read: Arc::new(read),
    };
    Ok((segment, entries))
}

/// Cut the last segment at `path`, `len` bytes long, back to `at` (durably).
fn cut_tail(
    path: &Path,
    at: usize,
    len: usize,
    reason: &str,
    loaded: &mut Loaded,
) -> Result<(), LogError> {
    let name = path.display().to_string();
    loaded.warnings.push(format!(
        "{name}: torn tail cut at offset {at} ({reason}; {} bytes dropped)",
        len - at
    ));
    let file = OpenOptions::new().write(true).open(path);
    file.and_then(|f| {
        f.set_len(at as u64)?;
        f.sync_all()?;
        synced::file(path, at as u64);
        Ok(())
    })
    .map_err(|source| LogError::Io { dir: name, source })
}

/// Read the small file `name`, if there is one.
fn read_meta<T>(
    dir: &Path,
    name: &str,
    decode: impl Fn(&mut Reader<'_>) -> Result<T, CodecError>,
) -> Result<Option<T>, LogError> {
    let path = dir.join(name);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(LogError::Io {
                dir: path.display().to_string(),
                source,
            })
        }
    };
    let meta_err = |source| LogError::Meta {
        file: path.display().to_string(),
        source,
    };
    let (payload, n) = frame(&bytes).map_err(|_| meta_err(CodecError::Truncated))?;
    if n != bytes.len() {
        return Err(meta_err(CodecError::Trailing(bytes.len() - n)));
    }
    let mut r = Reader(payload);
    let value = decode(&mut r).map_err(meta_err)?;
    r.end().map_err(meta_err)?;
    Ok(Some(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::Reader;

    fn text(r: &mut Reader<'_>) -> Result<String, CodecError> {
        r.string()
    }

    fn payload(s: &str) -> Vec<u8> {
        let mut out = Vec::new();
        crate::codec::put_str(&mut out, s);
        out
    }

    #[test]
    fn a_file_overwritten_in_place_reads_back_as_last_saved() {
        let tmp = tempfile::tempdir().expect("a directory");
        let dir = tmp.path().join("raft");
        let (mut files, _) = LogFiles::open(&dir).expect("opened");
        // In order: a first save; through the kept handle shorter (cut to its
        // length), then longer; replaced whole (the kept handle's inode is no
        // longer the file's), then in place again; another file in place
        // taking the handle over, then this one again.
        let steps: [(&str, &str, bool); 7] = [
            ("committed", "a longer first one", false),
            ("committed", "short", false),
            ("committed", "longer again, longer", false),
            ("committed", "durable", true),
            ("committed", "in place", false),
            ("other", "x", false),
            ("committed", "last", false),
        ];
        for (name, text_saved, durable) in steps {
            files
                .save_meta(name, &payload(text_saved), durable)
                .expect("saved");
            let read = read_meta(&dir, name, text).expect("it reads back");
            assert_eq!(
                read.as_deref(),
                Some(text_saved),
                "{name} after {text_saved:?}"
            );
        }
        let other = read_meta(&dir, "other", text).expect("it reads back");
        assert_eq!(other.as_deref(), Some("x"));
    }
}
