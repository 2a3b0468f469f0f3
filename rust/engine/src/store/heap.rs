//! An indexed binary min-heap of jobs.
//!
//! Each entry carries its ordering key and the job's id and table slot, so sifting
//! never touches the job table except to record where each job now sits; with that
//! position a job can be removed from the middle of the heap in O(log n) (delete,
//! kick-job, reserve-job on a ready or delayed job).
//!
//! Ready heaps hold 16-byte [`Entry`]s (priority, id, slot); delay heaps need the
//! full 8-byte time as key and hold 24-byte [`DelayEntry`]s.

/// An element of an [`IndexedHeap`].
pub trait HeapEntry: Copy {
    /// Orders strictly before `other`.
    fn less(&self, other: &Self) -> bool;
    /// The job's slot in the job table.
    fn slot(&self) -> u32;
}

/// A ready-heap element: ordered by `(pri, id)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub id: u64,
    pub pri: u32,
    /// The job's slot in the job table.
    pub slot: u32,
}

impl Entry {
    /// The order key: lower is served first.
    pub fn key(&self) -> (u32, u64) {
        (self.pri, self.id)
    }
}

impl HeapEntry for Entry {
    #[inline]
    fn less(&self, other: &Entry) -> bool {
        self.key() < other.key()
    }

    #[inline]
    fn slot(&self) -> u32 {
        self.slot
    }
}

/// A delay-heap element: ordered by `(key, id)`, the key being the ready-at time
/// in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DelayEntry {
    pub key: u64,
    pub id: u64,
    /// The job's slot in the job table.
    pub slot: u32,
}

impl HeapEntry for DelayEntry {
    #[inline]
    fn less(&self, other: &DelayEntry) -> bool {
        (self.key, self.id) < (other.key, other.id)
    }

    #[inline]
    fn slot(&self) -> u32 {
        self.slot
    }
}

const _: () = assert!(std::mem::size_of::<Entry>() == 16);

/// Min-heap that reports every move through `moved(slot, index)`.
#[derive(Debug)]
pub struct IndexedHeap<E = Entry> {
    entries: Vec<E>,
}

impl<E> Default for IndexedHeap<E> {
    fn default() -> Self {
        IndexedHeap {
            entries: Vec::new(),
        }
    }
}

impl<E: HeapEntry> IndexedHeap<E> {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn peek(&self) -> Option<&E> {
        self.entries.first()
    }

    /// Room for `n` more entries, in memory backed by huge pages where possible
    /// (a restart fills it at once).
    pub fn reserve(&mut self, n: usize) {
        self.entries.reserve(n);
        crate::memhint::huge_pages(&self.entries);
    }

    pub fn get(&self, index: usize) -> Option<&E> {
        self.entries.get(index)
    }

    pub fn push(&mut self, entry: E, moved: &mut impl FnMut(u32, u32)) {
        self.entries.push(entry);
        let i = self.entries.len() - 1;
        moved(entry.slot(), i as u32);
        self.sift_up(i, moved);
    }

    /// Remove the entry at `index` (as last reported through `moved`).
    pub fn remove(&mut self, index: usize, moved: &mut impl FnMut(u32, u32)) -> Option<E> {
        if index >= self.entries.len() {
            return None;
        }
        let removed = self.entries.swap_remove(index);
        if index < self.entries.len() {
            moved(self.entries[index].slot(), index as u32);
            self.sift_down(index, moved);
            self.sift_up(index, moved);
        }
        Some(removed)
    }

    fn sift_up(&mut self, mut i: usize, moved: &mut impl FnMut(u32, u32)) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if !self.entries[i].less(&self.entries[parent]) {
                break;
            }
            self.entries.swap(i, parent);
            moved(self.entries[i].slot(), i as u32);
            moved(self.entries[parent].slot(), parent as u32);
            i = parent;
        }
    }

    fn sift_down(&mut self, mut i: usize, moved: &mut impl FnMut(u32, u32)) {
        let n = self.entries.len();
        loop {
            let left = 2 * i + 1;
            if left >= n {
                break;
            }
            let right = left + 1;
            let mut child = left;
            if right < n && self.entries[right].less(&self.entries[left]) {
                child = right;
            }
            if !self.entries[child].less(&self.entries[i]) {
                break;
            }
            self.entries.swap(i, child);
            moved(self.entries[i].slot(), i as u32);
            moved(self.entries[child].slot(), child as u32);
            i = child;
        }
    }

    /// True if every parent orders before its children (for tests and checks).
    pub fn is_valid(&self) -> bool {
        (1..self.entries.len()).all(|i| !self.entries[i].less(&self.entries[(i - 1) / 2]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_key_then_id_order_and_tracks_positions() {
        let mut heap = IndexedHeap::<DelayEntry>::default();
        let mut pos = vec![u32::MAX; 64];
        let keys = [5u64, 3, 9, 3, 1, 7, 5, 0, 2, 8];
        for (i, &k) in keys.iter().enumerate() {
            heap.push(
                DelayEntry {
                    key: k,
                    id: 100 - i as u64,
                    slot: i as u32,
                },
                &mut |s, p| pos[s as usize] = p,
            );
        }
        assert!(heap.is_valid());
        for (slot, &p) in pos.iter().enumerate().take(keys.len()) {
            assert_eq!(heap.get(p as usize).map(|e| e.slot), Some(slot as u32));
        }
        // Remove from the middle by position.
        let p3 = pos[3] as usize;
        let removed = heap.remove(p3, &mut |s, p| pos[s as usize] = p);
        assert_eq!(removed.map(|e| e.slot), Some(3));
        assert!(heap.is_valid());
        let mut out = vec![];
        while !heap.is_empty() {
            let e = heap
                .remove(0, &mut |s, p| pos[s as usize] = p)
                .unwrap_or(DelayEntry {
                    key: 0,
                    id: 0,
                    slot: 0,
                });
            out.push((e.key, e.id));
        }
        let mut sorted = out.clone();
        sorted.sort();
        assert_eq!(out, sorted);
        assert_eq!(out.len(), keys.len() - 1);
    }
}
