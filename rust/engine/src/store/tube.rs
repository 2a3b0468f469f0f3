//! Tubes: per-tube queues and counters, and the registry that creates them on
//! demand and drops them when nothing refers to them.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use super::heap::{DelayEntry, IndexedHeap};

/// A tube's pause, while it lasts.
#[derive(Debug, Clone, Copy)]
pub struct Pause {
    /// The requested length in ns (stats-tube `pause`).
    pub length: u64,
    pub until: u64,
    /// Identifies this pause among the tube's pauses (its timer names it).
    pub seq: u64,
}

#[derive(Debug)]
pub struct Tube {
    /// Shared (not boxed) so that an event can carry the name without a copy.
    pub name: Arc<[u8]>,
    /// Ready jobs by (pri, id).
    pub ready: IndexedHeap,
    /// Delayed jobs by (ready-at, id).
    pub delayed: IndexedHeap<DelayEntry>,
    /// Buried jobs in bury order: sequence number -> job slot.
    pub buried: BTreeMap<u64, u32>,
    /// Connections blocked in reserve that watch this tube, oldest first, with the
    /// wait sequence they were queued under (stale entries are skipped and pruned).
    pub waiting: VecDeque<(u32, u64)>,
    /// Waiting connections in `waiting` (the wide ones wait in the store's list).
    pub waiting_ct: u32,
    /// Index in the store's list of tubes with ready jobs, while `ready` is not empty.
    pub ready_at: u32,
    pub urgent_ct: u64,
    pub reserved_ct: u64,
    pub total_jobs: u64,
    pub using_ct: u32,
    pub watching_ct: u32,
    /// Jobs of this tube in any state (they keep the tube alive).
    pub jobs_ct: u64,
    pub delete_ct: u64,
    pub pause_ct: u64,
    pub pause: Option<Pause>,
}

impl Tube {
    fn new(name: &[u8]) -> Tube {
        Tube {
            name: name.into(),
            ready: IndexedHeap::default(),
            delayed: IndexedHeap::default(),
            buried: BTreeMap::new(),
            waiting: VecDeque::new(),
            waiting_ct: 0,
            ready_at: u32::MAX,
            urgent_ct: 0,
            reserved_ct: 0,
            total_jobs: 0,
            using_ct: 0,
            watching_ct: 0,
            jobs_ct: 0,
            delete_ct: 0,
            pause_ct: 0,
            pause: None,
        }
    }

    /// Nothing refers to the tube any more.
    pub fn unreferenced(&self) -> bool {
        self.using_ct == 0 && self.watching_ct == 0 && self.jobs_ct == 0
    }

    /// Paused at `now` (a pause that has run out no longer counts).
    pub fn paused(&self, now: u64) -> bool {
        self.pause.is_some_and(|p| p.until > now)
    }

    /// Drop queue entries of connections that are no longer waiting here, once
    /// they outnumber the live ones, so the queue stays proportional to waiters.
    pub fn prune_waiting(&mut self, is_live: impl Fn(u32, u64) -> bool) {
        if self.waiting.len() > 2 * self.waiting_ct as usize + 16 {
            self.waiting.retain(|&(conn, seq)| is_live(conn, seq));
        }
    }
}

/// All tubes. The listing order is beanstalkd's: creation order, except that a
/// dropped tube's place is taken by the last tube in the list.
#[derive(Debug, Default)]
pub struct Tubes {
    slots: Vec<Option<Tube>>,
    free: Vec<u32>,
    by_name: HashMap<Box<[u8]>, u32>,
    order: Vec<u32>,
}

impl Tubes {
    pub fn len(&self) -> usize {
        self.order.len()
    }

    #[allow(dead_code)]
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    pub fn find(&self, name: &[u8]) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    pub fn find_or_create(&mut self, name: &[u8]) -> u32 {
        if let Some(slot) = self.find(name) {
            return slot;
        }
        let tube = Tube::new(name);
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(tube);
                slot
            }
            None => {
                self.slots.push(Some(tube));
                (self.slots.len() - 1) as u32
            }
        };
        self.by_name.insert(name.into(), slot);
        self.order.push(slot);
        slot
    }

    /// Remove a tube (the caller has checked it is unreferenced).
    pub fn remove(&mut self, slot: u32) {
        let Some(tube) = self.slots.get_mut(slot as usize).and_then(Option::take) else {
            return;
        };
        self.by_name.remove(&*tube.name);
        if let Some(i) = self.order.iter().position(|&s| s == slot) {
            self.order.swap_remove(i);
        }
        self.free.push(slot);
    }

    pub fn get(&self, slot: u32) -> &Tube {
        match self.slots.get(slot as usize) {
            Some(Some(t)) => t,
            _ => unreachable_tube(slot),
        }
    }

    pub fn get_mut(&mut self, slot: u32) -> &mut Tube {
        match self.slots.get_mut(slot as usize) {
            Some(Some(t)) => t,
            _ => unreachable_tube(slot),
        }
    }

    pub fn try_get(&self, slot: u32) -> Option<&Tube> {
        self.slots.get(slot as usize)?.as_ref()
    }

    /// Tube slots in listing order.
    pub fn order(&self) -> &[u32] {
        &self.order
    }
}

#[cold]
fn unreachable_tube(slot: u32) -> ! {
    // A job or connection refers to a tube that does not exist: the reference
    // counting is broken, and continuing would corrupt the queue.
    panic!("tube slot {slot} is referenced but does not exist")
}
