//! Replaying beanstalkd binlog files: reading each file's records in turn, applying
//! them to the jobs seen so far, and cutting or reporting what does not read.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::record::{decode_job, u32_at, valid_tube_name, Layout, MAX_TUBE_NAME};
use super::{ImportError, ImportReport, ImportedJob};

/// beanstalkd's default `-z`. Its replay refuses a full record whose stored body size
/// (body plus CRLF) is larger.
const DEFAULT_MAX_JOB_SIZE: i64 = 65535;

/// A live job during replay.
#[derive(Debug)]
struct Entry {
    job: ImportedJob,
    /// The body size as stored, CRLF included; update records repeat it.
    stored_size: i32,
    /// Position in the output: the sequence number of the record that placed it.
    seq: u64,
}

#[derive(Debug, Default)]
pub(super) struct Replay {
    jobs: HashMap<u64, Entry>,
    seq: u64,
    max_id: u64,
    /// The version of the first file that had one.
    version: Option<i32>,
    files: Vec<PathBuf>,
    pub(super) warnings: Vec<String>,
}

/// One file being read.
#[derive(Debug)]
struct FileCtx<'a> {
    path: &'a Path,
    data: &'a [u8],
    /// One past the last non-zero byte: everything from here on is zeros.
    data_end: usize,
    is_last: bool,
}

/// What to do after a problem in a record.
#[derive(Debug)]
enum Flow {
    /// Read on from this offset.
    Continue(usize),
    /// The rest of the file holds nothing (a torn tail was cut).
    Stop,
}

impl FileCtx<'_> {
    fn display(&self) -> std::path::Display<'_> {
        self.path.display()
    }

    /// The part `start..end` of the record at `rec` cannot be right. If nothing but
    /// zeros follows its start (or, in the last file, its end), it is a write that was
    /// cut short: warn and stop. Otherwise the file is corrupt.
    fn bad(
        &self,
        rec: usize,
        start: usize,
        end: usize,
        what: String,
        warnings: &mut Vec<String>,
    ) -> Result<Flow, ImportError> {
        if start >= self.data_end || (self.is_last && end >= self.data_end) {
            let zeros = if start >= self.data_end {
                format!("; zeros from byte {start} on")
            } else {
                String::new()
            };
            warnings.push(format!(
                "{}: byte {rec}: incomplete record at the end of the data ({what}{zeros}), \
                 as a crash in the middle of a write leaves it; cut there",
                self.display()
            ));
            return Ok(Flow::Stop);
        }
        Err(ImportError::Corrupt {
            path: self.path.to_path_buf(),
            offset: start as u64,
            reason: format!("{what} (in the record that starts at byte {rec})"),
        })
    }

    /// The file ends inside the record at `rec`, `need` bytes short.
    fn short(
        &self,
        rec: usize,
        need: usize,
        warnings: &mut Vec<String>,
    ) -> Result<Flow, ImportError> {
        if self.is_last {
            warnings.push(format!(
                "{}: byte {rec}: the file ends {need} bytes short of the end of this record; \
                 cut there",
                self.display()
            ));
            return Ok(Flow::Stop);
        }
        Err(ImportError::Corrupt {
            path: self.path.to_path_buf(),
            offset: rec as u64,
            reason: format!(
                "the file ends {need} bytes short of the end of this record, and it is not \
                 the last file"
            ),
        })
    }

    /// Bytes `at..at + len`, or how many are missing.
    fn take(&self, at: usize, len: usize) -> Result<&[u8], usize> {
        let end = at.saturating_add(len);
        self.data
            .get(at..end)
            .ok_or_else(|| end.saturating_sub(self.data.len()))
    }
}

impl Replay {
    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    pub(super) fn file(
        &mut self,
        path: &Path,
        data: &[u8],
        is_last: bool,
    ) -> Result<(), ImportError> {
        self.files.push(path.to_path_buf());
        let data_end = data.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
        if data_end == 0 {
            let what = if data.is_empty() {
                "is empty".to_owned()
            } else {
                format!("holds nothing but {} zero bytes", data.len())
            };
            self.warnings.push(format!(
                "{}: {what} (created, never written); skipped",
                path.display()
            ));
            return Ok(());
        }
        let Some(head) = data.get(..4) else {
            let what = format!(
                "the file is {} bytes long, too short for its version number",
                data.len()
            );
            if is_last {
                self.warnings
                    .push(format!("{}: {what}; skipped", path.display()));
                return Ok(());
            }
            return Err(ImportError::Corrupt {
                path: path.to_path_buf(),
                offset: 0,
                reason: what,
            });
        };
        let version = u32_at(head, 0) as i32;
        let Some(layout) = Layout::for_version(version) else {
            return Err(ImportError::UnsupportedVersion {
                path: path.to_path_buf(),
                version,
            });
        };
        match self.version {
            None => self.version = Some(version),
            Some(first) if first != version => self.warnings.push(format!(
                "{}: format version {version}, while earlier files have version {first}",
                path.display()
            )),
            Some(_) => {}
        }
        let ctx = FileCtx {
            path,
            data,
            data_end,
            is_last,
        };
        let mut pos = 4;
        while pos < data_end {
            match self.record(&ctx, layout, pos)? {
                Flow::Continue(next) => pos = next,
                Flow::Stop => break,
            }
        }
        Ok(())
    }

    /// Reads and applies the record at `rec`.
    fn record(&mut self, ctx: &FileCtx, layout: Layout, rec: usize) -> Result<Flow, ImportError> {
        let warnings = &mut self.warnings;
        let short = |need, w: &mut Vec<String>| ctx.short(rec, need, w);

        // Tube-name length.
        let mut pos = rec;
        let bytes = match ctx.take(pos, layout.name_len_size) {
            Ok(b) => b,
            Err(need) => return short(need, warnings),
        };
        let name_len = layout.name_len(bytes);
        let end = pos + layout.name_len_size;
        let name_len = match usize::try_from(name_len) {
            Ok(n) if n <= MAX_TUBE_NAME => n,
            _ => {
                let what = format!("tube-name length {name_len}, not 0 to {MAX_TUBE_NAME}");
                return ctx.bad(rec, pos, end, what, warnings);
            }
        };
        pos = end;

        // Tube name.
        let name = match ctx.take(pos, name_len) {
            Ok(b) => b,
            Err(need) => return short(need, warnings),
        };
        if name_len > 0 && !valid_tube_name(name) {
            let what = format!(
                "tube name \"{}\" is not one beanstalkd accepts",
                name.escape_ascii()
            );
            return ctx.bad(rec, pos, pos + name_len, what, warnings);
        }
        pos += name_len;

        // Job struct.
        let job_at = pos;
        let bytes = match ctx.take(pos, layout.job_size) {
            Ok(b) => b,
            Err(need) => return short(need, warnings),
        };
        let job_end = job_at + layout.job_size;
        let raw = match decode_job(bytes, layout) {
            Ok(raw) => raw,
            Err(what) => return ctx.bad(rec, job_at, job_end, what, warnings),
        };
        pos = job_end;
        let id = raw.id;
        self.max_id = self.max_id.max(id);

        if name_len == 0 {
            // An update record: only meaningful for a job whose full record we saw.
            // Otherwise that record was in a file beanstalkd has since deleted, because
            // the job was deleted or copied to a later file; beanstalkd ignores it too.
            let Some(entry) = self.jobs.get_mut(&id) else {
                return Ok(Flow::Continue(pos));
            };
            if raw.size != entry.stored_size {
                let what = format!(
                    "update for job {id} gives a body size of {} bytes, its full record {}",
                    raw.size, entry.stored_size
                );
                return ctx.bad(rec, job_at, job_end, what, warnings);
            }
            let Some(state) = raw.state else {
                self.jobs.remove(&id);
                return Ok(Flow::Continue(pos));
            };
            let j = &mut entry.job;
            j.pri = raw.pri;
            j.delay_ns = raw.delay_ns;
            j.ttr_ns = raw.ttr_ns;
            j.created_at_ns = raw.created_at_ns;
            j.deadline_at_ns = raw.deadline_at_ns;
            j.reserves = raw.reserves;
            j.timeouts = raw.timeouts;
            j.releases = raw.releases;
            j.buries = raw.buries;
            j.kicks = raw.kicks;
            j.state = state;
            self.seq += 1;
            entry.seq = self.seq;
            return Ok(Flow::Continue(pos));
        }

        // A full record: a put, or a migration copy of a job seen before.
        let Some(state) = raw.state else {
            let what = format!("full record for job {id} with state 0 (deleted)");
            return ctx.bad(rec, job_at, job_end, what, warnings);
        };
        let size = match usize::try_from(raw.size) {
            Ok(n) if n >= 2 => n,
            _ => {
                let what = format!(
                    "job {id} has a body size of {}, less than its CRLF",
                    raw.size
                );
                return ctx.bad(rec, job_at, job_end, what, warnings);
            }
        };
        let body_at = pos;
        let stored = match ctx.take(pos, size) {
            Ok(b) => b,
            Err(need) => return short(need, warnings),
        };
        let body_end = body_at + size;
        let Some(body) = stored.strip_suffix(b"\r\n") else {
            let what = format!("the body of job {id} does not end in CRLF");
            if body_at < ctx.data_end
                && !(ctx.is_last && body_end >= ctx.data_end)
                && stored.iter().all(|&b| b == 0)
            {
                // The struct reached the file but the body did not (a crash), then
                // beanstalkd restarted, took the zeros as the body and later copied
                // the job forward. It was never acknowledged.
                self.jobs.remove(&id);
                self.warnings.push(format!(
                    "{}: byte {rec}: job {id} has a body of zeros without its CRLF, left by \
                     a crash before the body was written; dropped",
                    ctx.display()
                ));
                return Ok(Flow::Continue(body_end));
            }
            return ctx.bad(rec, body_at, body_end, what, warnings);
        };
        if i64::from(raw.size) > DEFAULT_MAX_JOB_SIZE {
            self.warnings.push(format!(
                "{}: byte {rec}: job {id} has a {}-byte body; beanstalkd's own replay (default \
                 -z 65535, compared with the size including CRLF) refuses it and skips the \
                 rest of this file. Kept here",
                ctx.display(),
                body.len()
            ));
        }
        let job = ImportedJob {
            id,
            tube: name.to_vec(),
            pri: raw.pri,
            delay_ns: raw.delay_ns,
            ttr_ns: raw.ttr_ns,
            body: body.to_vec(),
            created_at_ns: raw.created_at_ns,
            deadline_at_ns: raw.deadline_at_ns,
            reserves: raw.reserves,
            timeouts: raw.timeouts,
            releases: raw.releases,
            buries: raw.buries,
            kicks: raw.kicks,
            state,
            file: self.files.len().saturating_sub(1),
        };
        let seq = match self.jobs.get(&id) {
            // A migration copy changes nothing by being written; the job keeps its
            // place (its bury order, say) unless its state changed unjournaled.
            Some(old) if old.job.state == state => old.seq,
            _ => self.next_seq(),
        };
        self.jobs.insert(
            id,
            Entry {
                job,
                stored_size: raw.size,
                seq,
            },
        );
        Ok(Flow::Continue(body_end))
    }

    pub(super) fn finish(self) -> ImportReport {
        let mut live: Vec<Entry> = self.jobs.into_values().collect();
        live.sort_by_key(|e| e.seq);
        ImportReport {
            version: self.version.unwrap_or(0),
            files: self.files,
            jobs: live.into_iter().map(|e| e.job).collect(),
            max_id: self.max_id,
            warnings: self.warnings,
        }
    }
}
