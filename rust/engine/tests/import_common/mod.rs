//! Shared by the beanstalkd binlog reader's tests: a small JSON reader for the
//! committed cases' expected.json, helpers to read directories and files, and
//! temporary directories. Each test crate uses part of it.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use beanpole_engine::wal::import::{
    read_beanstalkd_dir, replay_beanstalkd_files, ImportError, ImportReport, ImportedState,
};

// ---------------------------------------------------------------------------------
// A small JSON reader for expected.json (integers are kept exact).

#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Int(i128),
    Str(String),
    Arr(Vec<Json>),
    Obj(BTreeMap<String, Json>),
}

impl Json {
    pub fn parse(text: &str) -> Json {
        let mut p = JsonParser {
            s: text.as_bytes(),
            i: 0,
        };
        let v = p.value();
        p.ws();
        assert_eq!(p.i, p.s.len(), "trailing data in JSON");
        v
    }

    pub fn get(&self, key: &str) -> &Json {
        match self {
            Json::Obj(m) => m.get(key).unwrap_or(&Json::Null),
            _ => panic!("not an object looking up {key}"),
        }
    }

    pub fn int(&self) -> i128 {
        match self {
            Json::Int(n) => *n,
            other => panic!("not an integer: {other:?}"),
        }
    }

    pub fn str(&self) -> &str {
        match self {
            Json::Str(s) => s,
            other => panic!("not a string: {other:?}"),
        }
    }

    pub fn arr(&self) -> &[Json] {
        match self {
            Json::Arr(a) => a,
            other => panic!("not an array: {other:?}"),
        }
    }

    pub fn is_null(&self) -> bool {
        *self == Json::Null
    }
}

pub struct JsonParser<'a> {
    s: &'a [u8],
    i: usize,
}

impl JsonParser<'_> {
    pub fn peek(&self) -> u8 {
        self.s.get(self.i).copied().unwrap_or(0)
    }

    pub fn ws(&mut self) {
        while matches!(self.peek(), b' ' | b'\n' | b'\r' | b'\t') {
            self.i += 1;
        }
    }

    pub fn lit(&mut self, word: &str, v: Json) -> Json {
        assert!(
            self.s[self.i..].starts_with(word.as_bytes()),
            "bad JSON literal"
        );
        self.i += word.len();
        v
    }

    pub fn value(&mut self) -> Json {
        self.ws();
        match self.peek() {
            b'{' => {
                self.i += 1;
                let mut m = BTreeMap::new();
                loop {
                    self.ws();
                    if self.peek() == b'}' {
                        self.i += 1;
                        break;
                    }
                    let Json::Str(k) = self.value() else {
                        panic!("JSON key is not a string")
                    };
                    self.ws();
                    assert_eq!(self.peek(), b':');
                    self.i += 1;
                    let v = self.value();
                    m.insert(k, v);
                    self.ws();
                    if self.peek() == b',' {
                        self.i += 1;
                    }
                }
                Json::Obj(m)
            }
            b'[' => {
                self.i += 1;
                let mut a = Vec::new();
                loop {
                    self.ws();
                    if self.peek() == b']' {
                        self.i += 1;
                        break;
                    }
                    a.push(self.value());
                    self.ws();
                    if self.peek() == b',' {
                        self.i += 1;
                    }
                }
                Json::Arr(a)
            }
            b'"' => {
                self.i += 1;
                let mut out = String::new();
                loop {
                    let c = self.peek();
                    self.i += 1;
                    match c {
                        b'"' => break,
                        b'\\' => {
                            let e = self.peek();
                            self.i += 1;
                            match e {
                                b'n' => out.push('\n'),
                                b'r' => out.push('\r'),
                                b't' => out.push('\t'),
                                b'b' => out.push('\u{8}'),
                                b'f' => out.push('\u{c}'),
                                b'u' => {
                                    let hex = std::str::from_utf8(&self.s[self.i..self.i + 4])
                                        .expect("hex");
                                    self.i += 4;
                                    let mut cp = u32::from_str_radix(hex, 16).expect("hex");
                                    if (0xD800..0xDC00).contains(&cp) {
                                        let lo =
                                            std::str::from_utf8(&self.s[self.i + 2..self.i + 6])
                                                .expect("hex");
                                        self.i += 6;
                                        let lo = u32::from_str_radix(lo, 16).expect("hex");
                                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                                    }
                                    out.push(char::from_u32(cp).expect("code point"));
                                }
                                other => out.push(other as char),
                            }
                        }
                        0 => panic!("unterminated JSON string"),
                        _ => {
                            // Multi-byte UTF-8 passes through byte by byte.
                            let start = self.i - 1;
                            let mut end = self.i;
                            while end < self.s.len() && (self.s[end] & 0xC0) == 0x80 {
                                end += 1;
                            }
                            out.push_str(std::str::from_utf8(&self.s[start..end]).expect("utf-8"));
                            self.i = end;
                        }
                    }
                }
                Json::Str(out)
            }
            b't' => self.lit("true", Json::Bool(true)),
            b'f' => self.lit("false", Json::Bool(false)),
            b'n' => self.lit("null", Json::Null),
            _ => {
                let start = self.i;
                while matches!(self.peek(), b'-' | b'0'..=b'9') {
                    self.i += 1;
                }
                let text = std::str::from_utf8(&self.s[start..self.i]).expect("number");
                Json::Int(text.parse().expect("JSON integer"))
            }
        }
    }
}

// ---------------------------------------------------------------------------------
// Helpers.

pub fn fnv1a64(data: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

pub fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn state_name(s: ImportedState) -> &'static str {
    s.as_str()
}

pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/beanstalkd-binlog")
}

pub fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_nanos() as i64
}

pub fn read_ok(dir: &Path) -> ImportReport {
    match read_beanstalkd_dir(dir) {
        Ok(r) => r,
        Err(e) => panic!("{}: {e}", dir.display()),
    }
}

/// The binlog files of a directory, in replay order, with their bytes.
pub fn load_files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .expect("read_dir")
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let n = name.strip_prefix("binlog.")?.parse().ok()?;
            Some((n, e.path()))
        })
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|(_, p)| {
            let data = std::fs::read(&p).expect("read");
            (p, data)
        })
        .collect()
}

pub fn replay(files: &[(PathBuf, Vec<u8>)]) -> Result<ImportReport, ImportError> {
    let refs: Vec<(&Path, &[u8])> = files
        .iter()
        .map(|(p, d)| (p.as_path(), d.as_slice()))
        .collect();
    replay_beanstalkd_files(&refs)
}

pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let p =
            std::env::temp_dir().join(format!("beanpole-import-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("mkdir");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// The committed cases under tests/data/beanstalkd-binlog.
pub const CASES: &[&str] = &[
    "states",
    "max-size",
    "binary",
    "multi-file",
    "compaction",
    "burst-kill",
    "restart",
    "deleted",
    "fresh",
];

// Hand-built records and files.

#[derive(Debug, Clone)]
pub struct Rec {
    pub id: u64,
    pub pri: u32,
    pub delay: i64,
    pub ttr: i64,
    pub size: i32,
    pub created: i64,
    pub deadline: i64,
    pub counters: [u32; 5],
    pub state: u8,
}

impl Rec {
    pub fn new(id: u64) -> Rec {
        Rec {
            id,
            pri: 1024,
            delay: 0,
            ttr: 60_000_000_000,
            size: 2,
            created: 1_700_000_000_000_000_000,
            deadline: 0,
            counters: [0; 5],
            state: 1,
        }
    }

    /// The 80-byte struct of version 7, padding filled with junk as memory may be.
    pub fn v7(&self) -> Vec<u8> {
        let mut b = vec![0xAAu8; 80];
        b[0..8].copy_from_slice(&self.id.to_le_bytes());
        b[8..12].copy_from_slice(&self.pri.to_le_bytes());
        b[16..24].copy_from_slice(&self.delay.to_le_bytes());
        b[24..32].copy_from_slice(&self.ttr.to_le_bytes());
        b[32..36].copy_from_slice(&self.size.to_le_bytes());
        b[40..48].copy_from_slice(&self.created.to_le_bytes());
        b[48..56].copy_from_slice(&self.deadline.to_le_bytes());
        for (i, c) in self.counters.iter().enumerate() {
            b[56 + 4 * i..60 + 4 * i].copy_from_slice(&c.to_le_bytes());
        }
        b[76] = self.state;
        b
    }

    /// The 77-byte struct of version 5: times in microseconds.
    pub fn v5(&self) -> Vec<u8> {
        let mut b = self.v7();
        for at in [16, 24, 40, 48] {
            let ns = i64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
            b[at..at + 8].copy_from_slice(&(ns / 1000).to_le_bytes());
        }
        b.truncate(77);
        b
    }
}

pub fn full7(tube: &str, rec: &Rec, body: &[u8]) -> Vec<u8> {
    let mut rec = rec.clone();
    rec.size = body.len() as i32 + 2;
    let mut out = (tube.len() as i32).to_le_bytes().to_vec();
    out.extend(tube.as_bytes());
    out.extend(rec.v7());
    out.extend(body);
    out.extend(b"\r\n");
    out
}

pub fn update7(rec: &Rec) -> Vec<u8> {
    let mut out = 0i32.to_le_bytes().to_vec();
    out.extend(rec.v7());
    out
}

pub fn full5(tube: &str, rec: &Rec, body: &[u8]) -> Vec<u8> {
    let mut rec = rec.clone();
    rec.size = body.len() as i32 + 2;
    let mut out = (tube.len() as u64).to_le_bytes().to_vec();
    out.extend(tube.as_bytes());
    out.extend(rec.v5());
    out.extend(body);
    out.extend(b"\r\n");
    out
}

pub fn update5(rec: &Rec) -> Vec<u8> {
    let mut out = 0u64.to_le_bytes().to_vec();
    out.extend(rec.v5());
    out
}

/// A file: version, records, then zeros up to `pad_to` bytes.
pub fn file(version: i32, records: &[Vec<u8>], pad_to: usize) -> Vec<u8> {
    let mut out = version.to_le_bytes().to_vec();
    for r in records {
        out.extend(r);
    }
    if out.len() < pad_to {
        out.resize(pad_to, 0);
    }
    out
}

pub fn one(data: Vec<u8>) -> Result<ImportReport, ImportError> {
    replay(&[(PathBuf::from("binlog.1"), data)])
}

pub fn sized(rec: &Rec, body: &[u8]) -> Rec {
    let mut r = rec.clone();
    r.size = body.len() as i32 + 2;
    r
}
