//! Jobs and the table that owns them.
//!
//! Jobs live in a slab (`Vec` of slots with a free list) so heaps and lists refer to
//! them by a 4-byte slot; a hash map finds a slot from a job id. Job ids come from a
//! counter and are never reused.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use bytes::Bytes;

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// One job. Times are nanoseconds on the server's monotonic clock.
#[derive(Debug, Clone)]
pub struct Job {
    pub id: u64,
    /// The body followed by its CRLF, exactly as received.
    pub body: Bytes,
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
    /// Slot of the connection holding the job, while reserved.
    pub reserver: u32,
    pub reserves: u32,
    pub timeouts: u32,
    pub releases: u32,
    pub buries: u32,
    pub kicks: u32,
    /// The log segment holding the job's latest snapshot (0 without a log).
    pub home: u32,
    pub state: JobState,
}

impl Job {
    /// Body length without the trailing CRLF.
    pub fn body_len(&self) -> usize {
        self.body.len().saturating_sub(2)
    }
}

/// Hashes sequential u64 ids well for a swiss table (a multiply spreads the bits
/// the table uses for its control bytes).
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (n ^ (n >> 32)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

pub type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// All live jobs.
#[derive(Debug, Default)]
pub struct JobTable {
    slots: Vec<Option<Job>>,
    free: Vec<u32>,
    index: IdMap<u32>,
}

impl JobTable {
    pub fn len(&self) -> usize {
        self.index.len()
    }

    #[allow(dead_code)]
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    pub fn slot_of(&self, id: u64) -> Option<u32> {
        self.index.get(&id).copied()
    }

    pub fn insert(&mut self, job: Job) -> u32 {
        let id = job.id;
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(job);
                slot
            }
            None => {
                self.slots.push(Some(job));
                (self.slots.len() - 1) as u32
            }
        };
        self.index.insert(id, slot);
        slot
    }

    pub fn remove(&mut self, slot: u32) -> Option<Job> {
        let job = self.slots.get_mut(slot as usize)?.take()?;
        self.index.remove(&job.id);
        self.free.push(slot);
        Some(job)
    }

    pub fn get(&self, slot: u32) -> Option<&Job> {
        self.slots.get(slot as usize)?.as_ref()
    }

    pub fn get_mut(&mut self, slot: u32) -> Option<&mut Job> {
        self.slots.get_mut(slot as usize)?.as_mut()
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
}
