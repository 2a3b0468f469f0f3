//! The on-disk layout of a beanstalkd binlog record: where each format version keeps
//! its fields, the little-endian readers, and the decoding of a job struct and the
//! check of a tube name.

use super::ImportedState;
use crate::wal::format::ID_LIMIT;

/// Longest tube name beanstalkd accepts.
pub(super) const MAX_TUBE_NAME: usize = 200;

/// Bytes a tube name may contain (it may not start with `-`).
const TUBE_NAME_CHARS: &[u8] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-+/;.$_()";

/// Where the fields of one format version are.
#[derive(Debug, Clone, Copy)]
pub(super) struct Layout {
    /// Bytes of the tube-name length.
    pub(super) name_len_size: usize,
    /// Bytes of the job struct.
    pub(super) job_size: usize,
    /// What one unit of the stored times is, in ns.
    time_unit_ns: i64,
}

const LAYOUT_V7: Layout = Layout {
    name_len_size: 4,
    job_size: 80,
    time_unit_ns: 1,
};

const LAYOUT_V5: Layout = Layout {
    name_len_size: 8,
    job_size: 77,
    time_unit_ns: 1_000,
};

impl Layout {
    pub(super) fn for_version(version: i32) -> Option<Layout> {
        match version {
            7 => Some(LAYOUT_V7),
            5 => Some(LAYOUT_V5),
            _ => None,
        }
    }

    /// The tube-name length, widened so that every stored value fits.
    pub(super) fn name_len(&self, b: &[u8]) -> i128 {
        if self.name_len_size == 8 {
            i128::from(u64_at(b, 0))
        } else {
            i128::from(u32_at(b, 0) as i32)
        }
    }

    /// A stored time or duration in ns, if it is representable.
    fn time(&self, b: &[u8], at: usize) -> Option<i64> {
        let raw = u64_at(b, at);
        if self.time_unit_ns == 1 {
            Some(raw as i64)
        } else {
            i64::try_from(raw).ok()?.checked_mul(self.time_unit_ns)
        }
    }
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    if let Some(s) = b.get(at..at.saturating_add(8)) {
        a.copy_from_slice(s);
    }
    u64::from_le_bytes(a)
}

pub(super) fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    if let Some(s) = b.get(at..at.saturating_add(4)) {
        a.copy_from_slice(s);
    }
    u32::from_le_bytes(a)
}

/// A job struct as stored (times already in ns).
#[derive(Debug, Clone, Copy)]
pub(super) struct RawJob {
    pub(super) id: u64,
    pub(super) pri: u32,
    pub(super) delay_ns: i64,
    pub(super) ttr_ns: i64,
    pub(super) size: i32,
    pub(super) created_at_ns: i64,
    pub(super) deadline_at_ns: i64,
    pub(super) reserves: u32,
    pub(super) timeouts: u32,
    pub(super) releases: u32,
    pub(super) buries: u32,
    pub(super) kicks: u32,
    /// `None`: deleted.
    pub(super) state: Option<ImportedState>,
}

pub(super) fn decode_job(b: &[u8], layout: Layout) -> Result<RawJob, String> {
    let id = u64_at(b, 0);
    if id == 0 {
        return Err("job id 0".into());
    }
    if id >= ID_LIMIT {
        // beanstalkd counts ids up from 1: only damage makes one this large, and
        // a beanpole log cannot hold it.
        return Err(format!(
            "job id {id} is out of range (ids are below {ID_LIMIT})"
        ));
    }
    let state = match b.get(76).copied().unwrap_or(0) {
        0 => None,
        1 => Some(ImportedState::Ready),
        2 => Some(ImportedState::Reserved),
        3 => Some(ImportedState::Buried),
        4 => Some(ImportedState::Delayed),
        other => return Err(format!("job {id} has state {other}, not 0 to 4")),
    };
    let time = |at: usize, what: &str| {
        layout
            .time(b, at)
            .ok_or_else(|| format!("job {id} has a {what} too large to represent"))
    };
    let delay_ns = time(16, "delay")?;
    let ttr_ns = time(24, "time to run")?;
    let created_at_ns = time(40, "creation time")?;
    let deadline_at_ns = time(48, "deadline")?;
    if delay_ns < 0 || ttr_ns < 0 {
        return Err(format!(
            "job {id} has a negative delay or time to run ({delay_ns} ns, {ttr_ns} ns)"
        ));
    }
    Ok(RawJob {
        id,
        pri: u32_at(b, 8),
        delay_ns,
        ttr_ns,
        size: u32_at(b, 32) as i32,
        created_at_ns,
        deadline_at_ns,
        reserves: u32_at(b, 56),
        timeouts: u32_at(b, 60),
        releases: u32_at(b, 64),
        buries: u32_at(b, 68),
        kicks: u32_at(b, 72),
        state,
    })
}

pub(super) fn valid_tube_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TUBE_NAME
        && name.first() != Some(&b'-')
        && name.iter().all(|c| TUBE_NAME_CHARS.contains(c))
}
