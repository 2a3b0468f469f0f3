//! Jobs and the table that owns them.
//!
//! Jobs live in a slab (`Vec` of slots with a free list) so heaps and lists refer to
//! them by a 4-byte slot; an [`IdIndex`] finds a slot from a job id. Job ids come
//! from a counter and are never reused.
//!
//! Memory per job is what bounds the queue, so the record is 64 bytes: the body is
//! a 12-byte [`Body`] (small ones in the table's [`BodyArena`]), and the fields most jobs never need (the reserver and the
//! five counters, all zero until a job is first reserved, buried or kicked) live in
//! a side table keyed by slot.

use crate::idindex::{IdIndex, SlotMap};

use super::arena::BodyArena;
pub use super::body::{Body, BodyIn};

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum JobState {
    Ready,
    Reserved,
    Buried,
    Delayed,
}

impl JobState {
    /// The name stats-job prints.
    pub fn name(self) -> &'static str {
        match self {
            JobState::Ready => "ready",
            JobState::Reserved => "reserved",
            JobState::Buried => "buried",
            JobState::Delayed => "delayed",
        }
    }
}

/// One job. Times are nanoseconds on the server's monotonic clock. Its body is made
/// by [`JobTable::body`], for that table only (so a job is never cloned).
#[derive(Debug)]
pub struct Job {
    pub id: u64,
    /// The body followed by its CRLF, exactly as received.
    pub body: Body,
    pub created: u64,
    /// Delayed: when it becomes ready. Reserved: when its TTR runs out.
    /// Buried: its place in the tube's buried list (a sequence number).
    pub deadline: u64,
    pub pri: u32,
    /// Seconds, as last given by put or release.
    pub delay: u32,
    /// Seconds, at least 1.
    pub ttr: u32,
    /// Slot of the tube the job belongs to.
    pub tube: u32,
    /// Index in the ready or delay heap, or in the reserver's reserved list.
    pub pos: u32,
    /// The log segment holding the job's latest snapshot (0 without a log).
    pub home: u32,
    pub state: JobState,
}

// The record stays at 64 bytes (a slab slot, `Option` included).
const _: () = assert!(std::mem::size_of::<Option<Job>>() == 64);

impl Job {
    /// Body length without the trailing CRLF.
    pub fn body_len(&self) -> usize {
        self.body.len().saturating_sub(2)
    }
}

/// What a job keeps only once it has been reserved, buried or kicked: the
/// connection holding it and its stats-job counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobCounters {
    /// Slot of the connection holding the job, while reserved.
    pub reserver: u32,
    pub reserves: u32,
    pub timeouts: u32,
    pub releases: u32,
    pub buries: u32,
    pub kicks: u32,
}

impl Default for JobCounters {
    fn default() -> JobCounters {
        JobCounters {
            reserver: u32::MAX,
            reserves: 0,
            timeouts: 0,
            releases: 0,
            buries: 0,
            kicks: 0,
        }
    }
}

/// What a job costs beside its body, counted against `--max-memory`: its 64-byte
/// slot, its id index entry, its place in a heap or list, a timer, and the rounding
/// of a small body up to its arena slot (at most 15 bytes), rounded up.
pub const JOB_OVERHEAD: u64 = 128;

/// What `job` counts against `--max-memory`.
pub fn job_cost(body_len: usize) -> u64 {
    body_len as u64 + JOB_OVERHEAD
}

/// All live jobs.
#[derive(Debug, Default)]
pub struct JobTable {
    slots: Vec<Option<Job>>,
    free: Vec<u32>,
    index: IdIndex,
    /// The counters of jobs that have any (see [`JobCounters`]), by slot.
    counters: SlotMap<JobCounters>,
    /// The live jobs' bodies (CRLF included) plus [`JOB_OVERHEAD`] each.
    bytes: u64,
    /// Where the small bodies are (declared last: dropped after the jobs).
    arena: BodyArena,
}

impl JobTable {
    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Room for `n` more jobs, in memory backed by huge pages where possible (a
    /// restart fills it at once).
    pub fn reserve(&mut self, n: usize) {
        self.slots.reserve(n);
        crate::memhint::huge_pages(&self.slots);
    }

    pub fn slot_of(&self, id: u64) -> Option<u32> {
        self.index.get(id)
    }

    /// The live jobs' bodies plus [`JOB_OVERHEAD`] each: what `--max-memory` bounds.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// A body for a job about to be inserted into this table.
    pub fn body<'a>(&mut self, body: impl Into<BodyIn<'a>>) -> Body {
        Body::new(&mut self.arena, body.into())
    }

    /// Insert a job whose body [`JobTable::body`] made.
    pub fn insert(&mut self, job: Job) -> u32 {
        let id = job.id;
        self.bytes += job_cost(job.body.len());
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(job);
                slot
            }
            None => {
                // No huge-page hint as the table grows (`reserve` gives one for a
                // restart's fill): on a burst of puts, faulting 2 MiB pages (zeroed,
                // and compacted for where the kernel defragments on madvise) cost the
                // server more CPU than the 4 KiB faults it saves (0.474 against
                // 0.418 s per 2,000,000 puts).
                self.slots.push(Some(job));
                (self.slots.len() - 1) as u32
            }
        };
        self.index.insert(id, slot);
        slot
    }

    /// Remove a job; its tube.
    pub fn remove(&mut self, slot: u32) -> Option<u32> {
        let job = self.slots.get_mut(slot as usize)?.take()?;
        self.bytes -= job_cost(job.body.len());
        self.index.remove(job.id);
        self.counters.remove(&slot);
        self.free.push(slot);
        job.body.release(&mut self.arena);
        Some(job.tube)
    }

    pub fn get(&self, slot: u32) -> Option<&Job> {
        self.slots.get(slot as usize)?.as_ref()
    }

    pub fn get_mut(&mut self, slot: u32) -> Option<&mut Job> {
        self.slots.get_mut(slot as usize)?.as_mut()
    }

    /// A job's reserver and counters (the defaults if it has none yet).
    pub fn counters(&self, slot: u32) -> JobCounters {
        self.counters.get(&slot).copied().unwrap_or_default()
    }

    /// A job's reserver and counters, to change.
    pub fn counters_mut(&mut self, slot: u32) -> &mut JobCounters {
        self.counters.entry(slot).or_default()
    }

    /// Set a job's reserver and counters (storing nothing for the defaults).
    pub fn set_counters(&mut self, slot: u32, counters: JobCounters) {
        if counters == JobCounters::default() {
            self.counters.remove(&slot);
        } else {
            self.counters.insert(slot, counters);
        }
    }

    /// The connection holding a job, which from now on holds it no more.
    pub fn take_reserver(&mut self, slot: u32) -> u32 {
        self.counters
            .get_mut(&slot)
            .map_or(u32::MAX, |c| std::mem::replace(&mut c.reserver, u32::MAX))
    }

    /// Record a job's new position (the heap and list callbacks use this).
    pub fn set_pos(&mut self, slot: u32, pos: u32) {
        if let Some(Some(job)) = self.slots.get_mut(slot as usize) {
            job.pos = pos;
        }
    }

    /// Number of slots (live or free): the bound of a scan by slot.
    pub fn slots(&self) -> u32 {
        self.slots.len() as u32
    }

    pub fn iter(&self) -> impl Iterator<Item = (u32, &Job)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, j)| j.as_ref().map(|j| (i as u32, j)))
    }

    /// Check the side tables against the slots; `Err` names the first mismatch.
    pub fn check(&self) -> Result<(), String> {
        let live = self.iter().count();
        if live != self.len() {
            return Err(format!(
                "{live} jobs in slots, {} in the id index",
                self.len()
            ));
        }
        for (slot, job) in self.iter() {
            if self.slot_of(job.id) != Some(slot) {
                return Err(format!("job {} is not indexed at its slot", job.id));
            }
        }
        if let Some(slot) = self.counters.keys().find(|&&s| self.get(s).is_none()) {
            return Err(format!("counters kept for the empty slot {slot}"));
        }
        let bytes: u64 = self.iter().map(|(_, j)| job_cost(j.body.len())).sum();
        if bytes != self.bytes {
            return Err(format!(
                "jobs counted at {} bytes, {bytes} in slots",
                self.bytes
            ));
        }
        if self.is_empty() && self.arena.pages() > 0 {
            return Err(format!(
                "no jobs, but {} pages of bodies held",
                self.arena.pages()
            ));
        }
        if self.index.mostly_holes() {
            return Err("the id index keeps mostly empty pages".into());
        }
        Ok(())
    }
}
