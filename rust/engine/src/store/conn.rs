//! What the store knows about one client connection.

use std::sync::Arc;

use super::{Delivery, Wakeup};

/// A blocked reserve.
#[derive(Debug, Clone, Copy)]
pub struct Wait {
    /// Identifies this wait (its queue entries and timer name it).
    pub seq: u64,
    /// When `reserve-with-timeout` gives up, if it does.
    pub timeout_at: Option<u64>,
    /// Queued once in the store's list of wide waiters rather than in every
    /// watched tube's queue (see [`WIDE`]).
    pub wide: bool,
}

/// A connection watching more tubes than this waits in one store-wide list instead
/// of in each watched tube's queue, so starting and ending its wait costs O(1) and
/// not O(watched tubes); a tube with a new job then also looks at that list.
pub const WIDE: usize = 8;

/// Per-connection state that the queue needs: which tube it uses and watches, what
/// it holds, whether it is blocked in reserve.
pub struct ConnState {
    pub use_tube: u32,
    /// Watched tubes in beanstalkd's order (append on watch, swap-remove on ignore).
    pub watch: Vec<u32>,
    /// The same tubes sorted, kept only while there are more than [`WIDE`] of them
    /// (for a membership test by binary search); empty otherwise.
    pub watch_sorted: Vec<u32>,
    /// Slots of the jobs this connection has reserved.
    pub reserved: Vec<u32>,
    pub wait: Option<Wait>,
    pub producer: bool,
    pub worker: bool,
    /// The answer to a blocked reserve, until the connection picks it up.
    pub mailbox: Option<Delivery>,
    pub waker: Arc<dyn Wakeup>,
    /// Set for a session a follower forwards (replicated clusters only).
    pub session: Option<Box<super::session::Session>>,
}

impl std::fmt::Debug for ConnState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnState")
            .field("use_tube", &self.use_tube)
            .field("watch", &self.watch)
            .field("reserved", &self.reserved)
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

impl ConnState {
    /// Whether the connection watches `tube`.
    pub fn watches(&self, tube: u32) -> bool {
        if self.watch_sorted.is_empty() {
            self.watch.contains(&tube)
        } else {
            self.watch_sorted.binary_search(&tube).is_ok()
        }
    }

    /// Bring `watch_sorted` up to date after `watch` gained `added` or lost `removed`.
    pub fn watch_changed(&mut self, added: Option<u32>, removed: Option<u32>) {
        if self.watch.len() <= WIDE {
            self.watch_sorted = Vec::new();
            return;
        }
        if self.watch_sorted.is_empty() {
            self.watch_sorted = self.watch.clone();
            self.watch_sorted.sort_unstable();
            return;
        }
        if let Some(t) = added {
            if let Err(i) = self.watch_sorted.binary_search(&t) {
                self.watch_sorted.insert(i, t);
            }
        }
        if let Some(t) = removed {
            if let Ok(i) = self.watch_sorted.binary_search(&t) {
                self.watch_sorted.remove(i);
            }
        }
    }
}
