//! Job id to a 4-byte index, for ids that are dense and mostly increasing: the
//! store's job table and the log's replay both use it.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

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
pub type SlotMap<V> = HashMap<u32, V, BuildHasherDefault<IdHasher>>;

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

    /// Whether the pages are mostly holes with a full page in front (what `trim`
    /// never leaves behind; for consistency checks).
    pub fn mostly_holes(&self) -> bool {
        self.pages.len() > 2 * (self.paged / PAGE) + 8
            && matches!(self.pages.front(), Some(Some(_)))
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
