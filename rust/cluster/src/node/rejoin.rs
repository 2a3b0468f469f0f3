//! A node that starts with nothing in its data directory must not vote until
//! it holds what the cluster has committed.
//!
//! Raft counts a vote as a promise from a node that still has every entry it
//! acknowledged. A node whose directory was wiped (a lost disk, an operator's
//! `rm -rf`) comes back under the same id with an empty log and no vote: as
//! far as openraft can tell, any candidate's log is as up to date as its own.
//! If it had helped commit an entry that the candidate lacks, its vote can
//! elect that candidate, and the entry (an acknowledged put, bury or delete)
//! is gone. A brand-new node looks the same: nothing tells the two apart.
//!
//! So a node that starts without Raft state (and that does not found the
//! cluster) is *rejoining*: it writes `DIR/rejoining` (synced, so a restart
//! halfway through catching up stays rejoining) and its peer server keeps
//! vote requests from Raft, refusing them, until one of:
//!
//! - it took an append from a leader whose commit index is an entry of that
//!   leader's own term and that reaches its log's matched end: a leader that
//!   has committed in its own term holds every entry committed before it, so
//!   this node now holds them too, and from then on Raft's own rule (vote
//!   only for a log at least as up to date) keeps them safe; or
//! - a candidate's log ends at the founding entry (index 0, term 0): no
//!   leader has ever been elected (the first one is always the founder, the
//!   only node that starts with the membership, and its log grows past the
//!   founding entry when it leads), so nothing was ever committed and this
//!   node can have lost nothing. This is how a fresh cluster elects its first
//!   leader while its other nodes are all new; and as the node's state from
//!   then on is all on its disk, it votes freely from that request on, even
//!   if that leader dies before its first commit reaches anyone.
//!
//! Then the marker is removed. The price is availability, never safety: with
//! one node rejoining and the nodes holding the log down, no leader is elected
//! until enough of them are back (docs/cluster.md, "A wiped node").

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::net::CatchUp;
use crate::types::{LogId, NodeId};

/// The marker's name in the data directory.
pub const FILE: &str = "rejoining";

/// Whether this node may vote yet, and its marker.
#[derive(Debug)]
pub struct Rejoin {
    dir: PathBuf,
    /// Set once caught up; read on every vote request and append. An atomic:
    /// one flag, only ever raised.
    caught_up: AtomicBool,
    /// The node's id, when it says on stderr why it refuses votes.
    announce: Option<NodeId>,
    /// Set at the first vote refused (said once). An atomic, as above.
    refused: AtomicBool,
}

impl Rejoin {
    /// The gate of a node in `dir`: rejoining when `pristine` (no Raft state)
    /// or when an earlier start left the marker; the marker is then (re)written
    /// and synced before anything is answered. With `announce`, the node's id,
    /// it says on stderr when it first refuses a vote and when it has caught up.
    pub fn open(dir: &Path, pristine: bool, announce: Option<NodeId>) -> io::Result<Rejoin> {
        let path = dir.join(FILE);
        let rejoining = pristine || path.exists();
        if rejoining {
            std::fs::File::create(&path)?.sync_all()?;
            crate::synced::file(&path, 0);
            crate::synced::sync_dir(dir)?;
        }
        Ok(Rejoin {
            dir: dir.to_owned(),
            caught_up: AtomicBool::new(!rejoining),
            announce,
            refused: AtomicBool::new(false),
        })
    }

    /// Whether the node still keeps votes back.
    pub fn rejoining(&self) -> bool {
        !self.caught_up.load(Ordering::SeqCst)
    }

    /// The node holds what the cluster committed (or founded it): remove the
    /// marker and vote from now on. A marker that cannot be removed is left:
    /// the next start keeps votes back again, which is safe.
    pub fn caught_up(&self) {
        if self.caught_up.swap(true, Ordering::SeqCst) {
            return;
        }
        let removed = std::fs::remove_file(self.dir.join(FILE))
            .or_else(|e| match e.kind() {
                io::ErrorKind::NotFound => Ok(()),
                _ => Err(e),
            })
            .and_then(|()| crate::synced::sync_dir(&self.dir));
        if let Err(e) = removed {
            crate::say::say!(
                "beanpole: {}: cannot remove {FILE}: {e}; the next start waits to catch up again",
                self.dir.display()
            );
        }
        if let (Some(id), true) = (self.announce, self.refused.load(Ordering::SeqCst)) {
            crate::say::say!("beanpole: node {id}: caught up with the cluster; it votes again");
        }
    }
}

/// Whether an append that reached `matched` in common with a leader of
/// `term`, which had committed up to `commit`, brings this node up to what
/// the cluster has committed.
pub fn holds_commit(term: u64, matched: Option<&LogId>, commit: Option<&LogId>) -> bool {
    match (matched, commit) {
        (Some(matched), Some(commit)) => {
            commit.leader_id.term == term && matched.index >= commit.index
        }
        _ => false,
    }
}

/// Whether a candidate whose log ends at `last` is one no leader has ever
/// preceded: its log holds only the founding entry.
pub fn before_any_leader(last: Option<&LogId>) -> bool {
    last.is_some_and(|l| l.index == 0 && l.leader_id.term == 0)
}

impl CatchUp for Rejoin {
    fn may_vote(&self, candidate_last: Option<&LogId>) -> bool {
        if !self.rejoining() {
            return true;
        }
        if before_any_leader(candidate_last) {
            self.caught_up();
            return true;
        }
        if let (Some(id), false) = (self.announce, self.refused.swap(true, Ordering::SeqCst)) {
            crate::say::say!(
                "beanpole: node {id}: refusing votes: it started with an empty data directory \
                 and has not yet caught up with what the cluster committed (a node that holds \
                 the log must lead first)"
            );
        }
        false
    }

    fn appended(&self, term: u64, matched: Option<&LogId>, commit: Option<&LogId>) {
        if self.rejoining() && holds_commit(term, matched, commit) {
            self.caught_up();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::CommittedLeaderId;

    type Res = Result<(), Box<dyn std::error::Error>>;

    fn id(term: u64, index: u64) -> LogId {
        LogId::new(CommittedLeaderId::new(term, 1), index)
    }

    #[test]
    fn a_pristine_node_keeps_votes_back_until_it_holds_a_commit_of_the_leaders_term() -> Res {
        let dir = tempfile::tempdir()?;
        let gate = Rejoin::open(dir.path(), true, None)?;
        assert!(dir.path().join(FILE).exists());
        assert!(!gate.may_vote(Some(&id(3, 40))));
        // The leader of term 4 has committed only an entry of term 3: its own
        // term's first entry (and what came before it) may not be here yet.
        gate.appended(4, Some(&id(3, 40)), Some(&id(3, 40)));
        assert!(gate.rejoining());
        // Matched short of the commit.
        gate.appended(4, Some(&id(4, 41)), Some(&id(4, 45)));
        assert!(gate.rejoining());
        gate.appended(4, Some(&id(4, 45)), Some(&id(4, 45)));
        assert!(!gate.rejoining());
        assert!(gate.may_vote(Some(&id(3, 40))));
        assert!(!dir.path().join(FILE).exists());
        Ok(())
    }

    #[test]
    fn a_restart_halfway_through_catching_up_stays_rejoining() -> Res {
        let dir = tempfile::tempdir()?;
        drop(Rejoin::open(dir.path(), true, None)?);
        // The log now holds part of the leader's: no longer pristine.
        let again = Rejoin::open(dir.path(), false, None)?;
        assert!(again.rejoining());
        again.caught_up();
        let after = Rejoin::open(dir.path(), false, None)?;
        assert!(!after.rejoining());
        Ok(())
    }

    #[test]
    fn only_a_candidate_before_any_leader_gets_a_rejoining_nodes_vote() -> Res {
        let dir = tempfile::tempdir()?;
        let gate = Rejoin::open(dir.path(), true, None)?;
        assert!(!gate.may_vote(Some(&id(1, 0))));
        assert!(!gate.may_vote(Some(&id(1, 1))));
        assert!(!gate.may_vote(None));
        assert!(gate.rejoining());
        // A cluster no leader has led yet: nothing was lost, from now on
        // the node votes as any other.
        assert!(gate.may_vote(Some(&id(0, 0))));
        assert!(!gate.rejoining());
        assert!(!dir.path().join(FILE).exists());
        assert!(gate.may_vote(Some(&id(1, 1))));
        Ok(())
    }
}
