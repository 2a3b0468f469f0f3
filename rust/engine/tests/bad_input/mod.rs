//! What the bad-input tests share: a record of the largest single allocation a
//! thread makes (so a length field read from disk cannot size one), the proptest
//! settings, and mutations of on-disk files that know where the records are.

#![allow(dead_code)]

pub mod model;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ops::Range;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::Config;

/// The system allocator, noting the largest request of each thread.
struct Watched;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    // `try_with`: a thread being torn down may still allocate.
    let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
}

// SAFETY: every call is passed to the system allocator unchanged; noting the size
// touches only a thread-local cell (const-initialised, so it never allocates).
unsafe impl GlobalAlloc for Watched {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static WATCHED: Watched = Watched;

/// Run `f` and return its result with the largest single allocation it made on
/// this thread.
pub fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|l| l.set(0));
    let out = f();
    (out, LARGEST.with(Cell::get))
}

/// `cases` proptest cases, or `PROPTEST_CASES` when set (for long runs); failures
/// are not written to files: each bug found is pinned by a plain test instead.
pub fn config(cases: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// One file as a reader sees it, with where its records are.
#[derive(Debug, Clone)]
pub struct Image {
    pub name: String,
    pub bytes: Vec<u8>,
    /// Byte ranges of the records, in order.
    pub records: Vec<Range<usize>>,
}

impl Image {
    /// One past the last non-zero byte.
    pub fn data_end(&self) -> usize {
        self.bytes
            .iter()
            .rposition(|&b| b != 0)
            .map_or(0, |p| p + 1)
    }
}

/// Values that length, id and time fields handle worst.
pub const ODD_U32: [u32; 14] = [
    0,
    1,
    2,
    7,
    8,
    9,
    0xff,
    0xffff,
    0x1_0000,
    0x4000_0000,
    0x4000_1001,
    0x7fff_ffff,
    0x8000_0000,
    u32::MAX,
];
pub const ODD_U64: [u64; 7] = [
    0,
    1,
    0x7fff_ffff_ffff_ffff,
    0x8000_0000_0000_0000,
    u64::MAX - 1,
    u64::MAX,
    1 << 40,
];

/// One change to a set of files. Positions are indexes, scaled to the file (and
/// mostly into its data) when applied; record positions use the original layout.
#[derive(Debug, Clone)]
pub enum Mutation {
    FlipBit {
        file: Index,
        at: Index,
        bit: u8,
    },
    Overwrite {
        file: Index,
        at: Index,
        bytes: Vec<u8>,
    },
    Truncate {
        file: Index,
        at: Index,
    },
    ZeroFrom {
        file: Index,
        at: Index,
    },
    Splice {
        file: Index,
        at: Index,
        bytes: Vec<u8>,
    },
    /// Set a 4- or 8-byte field at some offset of a record; `reseal` makes its
    /// checksum (if the format has one) right again, so the value gets read.
    SetField {
        file: Index,
        record: Index,
        at: Index,
        value: u64,
        wide: bool,
        reseal: bool,
    },
    /// Overwrite bytes inside a record, then perhaps reseal it.
    RecordBytes {
        file: Index,
        record: Index,
        at: Index,
        bytes: Vec<u8>,
        reseal: bool,
    },
    /// Insert a copy of a record before another one (or at the end of the data).
    Duplicate {
        file: Index,
        record: Index,
        before: Index,
    },
    /// Remove a record's bytes.
    DropRecord {
        file: Index,
        record: Index,
    },
    /// Overwrite bytes of the file's first `header` bytes.
    Header {
        file: Index,
        at: Index,
        bytes: Vec<u8>,
    },
    RemoveFile {
        file: Index,
    },
}

/// Any mutation.
pub fn mutation() -> impl Strategy<Value = Mutation> {
    let bytes = proptest::collection::vec(any::<u8>(), 1..24);
    let value = prop_oneof![
        proptest::sample::select(&ODD_U32[..]).prop_map(u64::from),
        proptest::sample::select(&ODD_U64[..]),
        any::<u64>(),
    ];
    prop_oneof![
        4 => (any::<Index>(), any::<Index>(), 0..8u8)
            .prop_map(|(file, at, bit)| Mutation::FlipBit { file, at, bit }),
        2 => (any::<Index>(), any::<Index>(), bytes.clone())
            .prop_map(|(file, at, bytes)| Mutation::Overwrite { file, at, bytes }),
        2 => (any::<Index>(), any::<Index>()).prop_map(|(file, at)| Mutation::Truncate { file, at }),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(file, at)| Mutation::ZeroFrom { file, at }),
        1 => (any::<Index>(), any::<Index>(), bytes.clone())
            .prop_map(|(file, at, bytes)| Mutation::Splice { file, at, bytes }),
        4 => (any::<Index>(), any::<Index>(), any::<Index>(), value, any::<bool>(), any::<bool>())
            .prop_map(|(file, record, at, value, wide, reseal)| Mutation::SetField {
                file, record, at, value, wide, reseal
            }),
        3 => (any::<Index>(), any::<Index>(), any::<Index>(), bytes.clone(), any::<bool>())
            .prop_map(|(file, record, at, bytes, reseal)| Mutation::RecordBytes {
                file, record, at, bytes, reseal
            }),
        2 => (any::<Index>(), any::<Index>(), any::<Index>())
            .prop_map(|(file, record, before)| Mutation::Duplicate { file, record, before }),
        1 => (any::<Index>(), any::<Index>())
            .prop_map(|(file, record)| Mutation::DropRecord { file, record }),
        2 => (any::<Index>(), any::<Index>(), bytes)
            .prop_map(|(file, at, bytes)| Mutation::Header { file, at, bytes }),
        1 => any::<Index>().prop_map(|file| Mutation::RemoveFile { file }),
    ]
}

/// How a format seals a record after its bytes changed (nothing, for a format
/// without checksums).
pub type Reseal = fn(&mut [u8]);

impl Mutation {
    /// Apply to `files` (whose record lists are not updated); `header` is the
    /// format's header length.
    pub fn apply(&self, files: &mut Vec<Image>, header: usize, reseal: Reseal) {
        if files.is_empty() {
            return;
        }
        let n = files.len();
        let pick = |i: &Index| i.index(n);
        match self {
            Mutation::RemoveFile { file } => {
                let f = pick(file);
                files.remove(f);
            }
            Mutation::FlipBit { file, at, bit } => {
                let img = &mut files[pick(file)];
                if let Some(at) = in_data(img, at) {
                    img.bytes[at] ^= 1 << bit;
                }
            }
            Mutation::Overwrite { file, at, bytes } => {
                let img = &mut files[pick(file)];
                if let Some(at) = in_data(img, at) {
                    overwrite(&mut img.bytes, at, bytes);
                }
            }
            Mutation::Truncate { file, at } => {
                let img = &mut files[pick(file)];
                let at = in_data(img, at).unwrap_or(0);
                img.bytes.truncate(at);
            }
            Mutation::ZeroFrom { file, at } => {
                let img = &mut files[pick(file)];
                if let Some(at) = in_data(img, at) {
                    img.bytes[at..].fill(0);
                }
            }
            Mutation::Splice { file, at, bytes } => {
                let img = &mut files[pick(file)];
                let at = in_data(img, at).unwrap_or(0);
                img.bytes.splice(at..at, bytes.iter().copied());
            }
            Mutation::SetField {
                file,
                record,
                at,
                value,
                wide,
                reseal: seal,
            } => {
                let img = &mut files[pick(file)];
                if let Some(r) = pick_record(img, record) {
                    let width = if *wide { 8 } else { 4 };
                    let span = r.len().saturating_sub(width);
                    let at = r.start + at.index(span + 1);
                    overwrite(&mut img.bytes, at, &value.to_le_bytes()[..width]);
                    if *seal {
                        reseal_at(&mut img.bytes, r.start, reseal);
                    }
                }
            }
            Mutation::RecordBytes {
                file,
                record,
                at,
                bytes,
                reseal: seal,
            } => {
                let img = &mut files[pick(file)];
                if let Some(r) = pick_record(img, record) {
                    let at = r.start + at.index(r.len());
                    overwrite(&mut img.bytes, at, bytes);
                    if *seal {
                        reseal_at(&mut img.bytes, r.start, reseal);
                    }
                }
            }
            Mutation::Duplicate {
                file,
                record,
                before,
            } => {
                let img = &mut files[pick(file)];
                if let Some(r) = pick_record(img, record) {
                    let copy = img.bytes.get(r.clone()).map(<[u8]>::to_vec);
                    let i = before.index(img.records.len() + 1);
                    let to = match img.records.get(i) {
                        Some(r) => r.start,
                        None => img.records.last().map_or(header, |r| r.end),
                    };
                    if let Some(copy) = copy {
                        let to = to.min(img.bytes.len());
                        img.bytes.splice(to..to, copy);
                    }
                }
            }
            Mutation::DropRecord { file, record } => {
                let img = &mut files[pick(file)];
                if let Some(r) = pick_record(img, record) {
                    if r.end <= img.bytes.len() {
                        img.bytes.drain(r);
                    }
                }
            }
            Mutation::Header { file, at, bytes } => {
                let img = &mut files[pick(file)];
                let at = at.index(header.min(img.bytes.len()).max(1));
                overwrite(&mut img.bytes, at, bytes);
            }
        }
    }
}

/// An offset into the file's data (or just past it), if the file has bytes.
fn in_data(img: &Image, at: &Index) -> Option<usize> {
    let len = img.bytes.len();
    (len > 0).then(|| at.index((img.data_end() + 64).min(len)))
}

fn pick_record(img: &Image, record: &Index) -> Option<Range<usize>> {
    if img.records.is_empty() {
        return None;
    }
    let r = img.records[record.index(img.records.len())].clone();
    (r.end <= img.bytes.len()).then_some(r)
}

/// Overwrite from `at`, as far as the file goes.
fn overwrite(bytes: &mut [u8], at: usize, with: &[u8]) {
    let end = (at + with.len()).min(bytes.len());
    if at < end {
        bytes[at..end].copy_from_slice(&with[..end - at]);
    }
}

fn reseal_at(bytes: &mut [u8], start: usize, reseal: Reseal) {
    if let Some(tail) = bytes.get_mut(start..) {
        reseal(tail);
    }
}

/// Write `files` into `dir` (which exists) under their names.
pub fn write_files(dir: &std::path::Path, files: &[Image]) {
    for img in files {
        std::fs::write(dir.join(&img.name), &img.bytes).expect("write file");
    }
}

/// The files of `dir` whose names `keep` accepts, as (name, bytes), by name.
pub fn read_files(dir: &std::path::Path, keep: impl Fn(&str) -> bool) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry"))
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            keep(&name).then(|| (name, std::fs::read(e.path()).expect("read file")))
        })
        .collect();
    out.sort();
    out
}
