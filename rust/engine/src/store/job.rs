//! Jobs and the table that owns them.
//!
//! Jobs live in a slab (`Vec` of slots with a free list) so heaps and lists refer to
//! them by a 4-byte slot; an [`IdIndex`] finds a slot from a job id. Job ids come
//! from a counter and are never reused.
//!
//! Memory per job is what bounds the queue, so the record is 64 bytes: the body is
//! a 12-byte [`Body`], and the fields most jobs never need (the reserver and the
//! five counters, all zero until a job is first reserved, buried or kicked) live in
//! a side table keyed by slot.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

pub use super::body::Body;

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

/// One job. Times are nanoseconds on the server's monotonic clock.
#[derive(Debug, Clone)]
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

/// Hashes sequential integer keys well for a swiss table (a multiply spreads the
/// bits the table uses for its control bytes).
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

    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (n ^ (n >> 32)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

pub type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;
type SlotMap<V> = HashMap<u32, V, BuildHasherDefault<IdHasher>>;

/// Ids per page of the [`IdIndex`].
const PAGE: usize = 1024;
/// An empty entry of a page.
const HOLE: u32 = u32::MAX;

#[derive(Debug)]
struct Page {
    slots: [u32; PAGE],
    live: u32,
}

/// Job id to slot. Ids are dense and increasing, so the recent ones live in pages
/// of 4-byte entries indexed by `id - base` (4 bytes a job instead of a hash
/// entry). An emptied page is freed at once; when the pages hold less than half
/// as many jobs as they could (old jobs pinning pages while new ids move on), the
/// oldest page's jobs move to a hash map of stragglers and the page goes, so the
/// memory stays proportional to the live jobs whatever the churn.
#[derive(Debug, Default)]
pub struct IdIndex {
    /// Id of the first entry of `pages[0]` (a multiple of `PAGE`).
    base: u64,
    pages: VecDeque<Option<Box<Page>>>,
    /// Jobs in `pages`.
    paged: usize,
    /// Jobs with ids below `base`.
    far: IdMap<u32>,
}

impl IdIndex {
    pub fn len(&self) -> usize {
        self.paged + self.far.len()
    }

    /// Bytes held (for tests of the bound).
    #[cfg(test)]
    pub fn footprint(&self) -> usize {
        let pages = self.pages.iter().flatten().count();
        pages * std::mem::size_of::<Page>()
            + self.pages.capacity() * std::mem::size_of::<Option<Box<Page>>>()
            + self.far.capacity() * (std::mem::size_of::<(u64, u32)>() + 1)
    }

    fn locate(&self, id: u64) -> Option<(usize, usize)> {
        let rel = id.checked_sub(self.base)?;
        Some(((rel / PAGE as u64) as usize, (rel % PAGE as u64) as usize))
    }

    pub fn get(&self, id: u64) -> Option<u32> {
        match self.locate(id) {
            Some((p, i)) => {
                let slot = self.pages.get(p)?.as_ref()?.slots[i];
                (slot != HOLE).then_some(slot)
            }
            None => self.far.get(&id).copied(),
        }
    }

    pub fn insert(&mut self, id: u64, slot: u32) {
        if self.pages.is_empty() && id >= self.base {
            // Start the pages at this id's page.
            self.base = id - id % PAGE as u64;
        }
        let Some((mut p, mut i)) = self.locate(id) else {
            self.far.insert(id, slot);
            return;
        };
        if p > self.pages.len() + self.paged / PAGE + 8 {
            // A jump far past the pages (only a restored log has gaps): retire
            // them rather than fill the gap with empty pages.
            while !self.pages.is_empty() {
                self.evict_front();
            }
            self.base = id - id % PAGE as u64;
            (p, i) = (0, (id % PAGE as u64) as usize);
        }
        while self.pages.len() <= p {
            self.pages.push_back(None);
        }
        let page = self.pages[p].get_or_insert_with(|| {
            Box::new(Page {
                slots: [HOLE; PAGE],
                live: 0,
            })
        });
        if page.slots[i] == HOLE {
            page.live += 1;
            self.paged += 1;
        }
        page.slots[i] = slot;
        self.trim();
    }

    pub fn remove(&mut self, id: u64) -> Option<u32> {
        let Some((p, i)) = self.locate(id) else {
            let slot = self.far.remove(&id);
            if self.far.len() * 4 < self.far.capacity() {
                self.far.shrink_to(self.far.len() * 2);
            }
            return slot;
        };
        let page = self.pages.get_mut(p)?.as_mut()?;
        let slot = std::mem::replace(&mut page.slots[i], HOLE);
        if slot == HOLE {
            return None;
        }
        page.live -= 1;
        self.paged -= 1;
        if page.live == 0 {
            self.pages[p] = None;
        }
        self.trim();
        Some(slot)
    }

    /// Drop empty pages at the front, and move the oldest page's jobs to `far`
    /// while the pages are mostly holes.
    fn trim(&mut self) {
        loop {
            match self.pages.front() {
                Some(None) => {}
                Some(Some(_)) if self.pages.len() > 2 * (self.paged / PAGE) + 8 => {}
                _ => break,
            }
            self.evict_front();
        }
        if self.pages.is_empty() && self.pages.capacity() > 64 {
            self.pages = VecDeque::new();
        }
    }
}

impl IdIndex {
    /// Move the first page's jobs to `far` and drop the page.
    fn evict_front(&mut self) {
        if let Some(Some(page)) = self.pages.front() {
            for (i, &slot) in page.slots.iter().enumerate() {
                if slot != HOLE {
                    self.far.insert(self.base + i as u64, slot);
                    self.paged -= 1;
                }
            }
        }
        self.pages.pop_front();
        self.base += PAGE as u64;
    }
}

/// All live jobs.
#[derive(Debug, Default)]
pub struct JobTable {
    slots: Vec<Option<Job>>,
    free: Vec<u32>,
    index: IdIndex,
    /// The counters of jobs that have any (see [`JobCounters`]), by slot.
    counters: SlotMap<JobCounters>,
}

impl JobTable {
    pub fn len(&self) -> usize {
        self.index.len()
    }

    #[allow(dead_code)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn slot_of(&self, id: u64) -> Option<u32> {
        self.index.get(id)
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
        self.index.remove(job.id);
        self.counters.remove(&slot);
        self.free.push(slot);
        Some(job)
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
        if self.index.pages.len() > 2 * (self.index.paged / PAGE) + 8
            && matches!(self.index.pages.front(), Some(Some(_)))
        {
            return Err("the id index keeps mostly empty pages".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_index_stays_bounded_under_churn() {
        let mut index = IdIndex::default();
        // A few long-lived jobs, then a million ids put and deleted past them.
        for id in 1..=5u64 {
            index.insert(id * 700, id as u32);
        }
        for id in 10_000..1_010_000u64 {
            index.insert(id, 9);
            if id % 3 == 0 {
                // Some stay a while.
                if let Some(old) = id.checked_sub(3000) {
                    index.remove(old);
                }
            } else {
                index.remove(id);
            }
            assert!(
                index.footprint() < 64 * 1024,
                "{} bytes at {id}",
                index.footprint()
            );
        }
        for id in 1..=5u64 {
            assert_eq!(index.get(id * 700), Some(id as u32));
        }
        assert_eq!(index.get(1_009_998), Some(9));
        assert_eq!(index.get(1_009_999), None);
        assert_eq!(index.get(1_006_998), None);
        assert_eq!(index.get(3), None);
        assert_eq!(index.len(), 5 + 1000);
        // A jump far ahead (a restored log with a gap) keeps what is there.
        index.insert(1 << 40, 4);
        assert!(index.footprint() < 64 * 1024);
        assert_eq!(index.get(1 << 40), Some(4));
        assert_eq!(index.get(1_009_998), Some(9));
        assert_eq!(index.get(700), Some(1));
        for id in (1_007_001..1_010_000).step_by(3) {
            assert_eq!(index.remove(id), Some(9));
        }
        assert_eq!(index.len(), 6);
    }
}
