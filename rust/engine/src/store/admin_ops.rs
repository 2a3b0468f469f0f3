//! Store operations that only the in-process admin calls use (the web dashboard's
//! actions): looking at a tube's next job by name, deleting a job no worker holds,
//! clearing a tube's jobs of one state. No connection is involved, so none of this
//! is on the protocol path.

use bytes::Bytes;

use super::job::JobState;
use super::Store;
use crate::events::EventKind;

/// Which of a tube's jobs an admin call means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    Ready,
    Delayed,
    Buried,
}

/// Why [`Store::delete_unreserved`] deleted nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotDeleted {
    /// There is no job with that id.
    Missing,
    /// A worker holds the job; only it may delete it.
    Reserved,
}

impl Store {
    /// The slot of the next job of `which` in the tube at `tube`, as `peek-*` would
    /// show it.
    fn next_of(&self, tube: u32, which: Which) -> Option<u32> {
        let t = self.tubes.get(tube);
        match which {
            Which::Ready => t.ready.peek().map(|e| e.slot),
            Which::Delayed => t.delayed.peek().map(|e| e.slot),
            Which::Buried => t.buried.values().next().copied(),
        }
    }

    /// `peek-ready`, `peek-delayed` or `peek-buried` on the tube named `name`:
    /// None if there is no such tube, Some(None) if it has no such job.
    pub fn peek_in(&self, name: &[u8], which: Which) -> Option<Option<(u64, Bytes)>> {
        let tube = self.tubes.find(name)?;
        Some(
            self.next_of(tube, which)
                .and_then(|slot| self.jobs.get(slot).map(|j| (j.id, j.body.to_bytes()))),
        )
    }

    /// `delete ID` for a job in any state but reserved: the job is journaled as
    /// deleted and a `delete` event goes to the hooks, as for a connection's delete.
    pub fn delete_unreserved(&mut self, id: u64) -> Result<(), NotDeleted> {
        let slot = self.jobs.slot_of(id).ok_or(NotDeleted::Missing)?;
        let job = self.jobs.get(slot).ok_or(NotDeleted::Missing)?;
        if job.state == JobState::Reserved {
            return Err(NotDeleted::Reserved);
        }
        self.delete_slot(slot);
        Ok(())
    }

    /// Delete up to `limit` of the tube's `which` jobs, next first: None if there is
    /// no such tube, else how many were deleted.
    pub fn clear_in(&mut self, name: &[u8], which: Which, limit: u32) -> Option<u32> {
        let tube = self.tubes.find(name)?;
        let mut deleted = 0;
        while deleted < limit {
            // The tube is dropped with its last job once unused: look it up again.
            if self.tubes.find(name) != Some(tube) {
                break;
            }
            let Some(slot) = self.next_of(tube, which) else {
                break;
            };
            self.delete_slot(slot);
            deleted += 1;
        }
        Some(deleted)
    }

    fn delete_slot(&mut self, slot: u32) {
        let Some(tube) = self.jobs.get(slot).map(|j| j.tube) else {
            return;
        };
        self.emit(EventKind::Delete, slot);
        self.detach(slot);
        self.tubes.get_mut(tube).delete_ct += 1;
        self.free_job(slot);
    }
}
