//! The data directory's cluster identity: which node of which cluster the
//! directory belongs to, kept in `DIR/cluster` so a node is never started on
//! another node's or another cluster's data.
//!
//! ```text
//! DIR/cluster   magic "BPCLUSTR", version u32, node u64, cluster id 16 bytes
//!               (all zero: not yet known), crc u32 (CRC32C of what precedes)
//!               replaced whole: written aside, synced, renamed, directory synced
//! ```
//!
//! The file is written at a node's first start with its node id. The cluster
//! id is random and made once, by the node that initializes the cluster
//! ([`Identity::found`]); the others learn it from the first peer that knows it
//! (the transport's handshake, [`Identity::adopt`]) and keep it. From then on a
//! peer of another cluster is refused, and so is a start with `--node` other
//! than the directory's. Imports nothing of the cluster but its node id type.

use std::fmt;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use thiserror::Error;

use crate::types::NodeId;

/// The file's name in the data directory.
pub const FILE: &str = "cluster";
const MAGIC: &[u8; 8] = b"BPCLUSTR";
const VERSION: u32 = 1;
const LEN: usize = 8 + 4 + 8 + 16 + 4;

/// A cluster's random id, made once when the cluster is initialized.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClusterId(pub [u8; 16]);

impl ClusterId {
    /// The id of a directory whose cluster is not known yet.
    pub const UNSET: ClusterId = ClusterId([0; 16]);

    pub fn is_unset(&self) -> bool {
        *self == Self::UNSET
    }

    /// A new random id (never the unset one).
    pub fn random() -> io::Result<ClusterId> {
        loop {
            let mut id = [0u8; 16];
            getrandom::fill(&mut id).map_err(|e| io::Error::other(e.to_string()))?;
            if id != [0; 16] {
                return Ok(ClusterId(id));
            }
        }
    }
}

impl fmt::Display for ClusterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for ClusterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ClusterId({self})")
    }
}

/// Why a data directory cannot be used by this node.
#[derive(Debug, Error)]
pub enum IdentityError {
    #[error("data directory {path}: {source}")]
    Io { path: String, source: io::Error },
    #[error("data directory {path}: {FILE} is damaged (not a beanpole cluster marker of version {VERSION})")]
    Damaged { path: String },
    #[error("data directory {path} belongs to node {found}, not node {node}")]
    OtherNode {
        path: String,
        found: NodeId,
        node: NodeId,
    },
    #[error("data directory {path} belongs to cluster {found}, not cluster {cluster}")]
    OtherCluster {
        path: String,
        found: ClusterId,
        cluster: ClusterId,
    },
    #[error(
        "data directory {path} holds {what} but no {FILE} marker: not a directory this node made"
    )]
    Unmarked { path: String, what: &'static str },
}

/// A node's identity, backed by its data directory's marker.
#[derive(Debug)]
pub struct Identity {
    dir: PathBuf,
    node: NodeId,
    /// The cluster id as on disk. A std mutex: held to read it or while the
    /// small file is replaced (once in a node's life), never across an await.
    cluster: Mutex<ClusterId>,
}

impl Identity {
    /// Open `dir`'s marker for node `node`, writing it at first start. Refuses
    /// another node's directory and a directory with data but no marker (a
    /// single-node log, or cluster data from before the marker).
    pub fn open(dir: &Path, node: NodeId) -> Result<Identity, IdentityError> {
        let path = dir.join(FILE);
        let io_err = |source| IdentityError::Io {
            path: dir.display().to_string(),
            source,
        };
        let cluster = match std::fs::read(&path) {
            Ok(bytes) => {
                let (found, cluster) = decode(&bytes).ok_or_else(|| IdentityError::Damaged {
                    path: dir.display().to_string(),
                })?;
                if found != node {
                    return Err(IdentityError::OtherNode {
                        path: dir.display().to_string(),
                        found,
                        node,
                    });
                }
                cluster
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                std::fs::create_dir_all(dir).map_err(io_err)?;
                if let Some(what) = foreign_contents(dir).map_err(io_err)? {
                    return Err(IdentityError::Unmarked {
                        path: dir.display().to_string(),
                        what,
                    });
                }
                write(dir, node, ClusterId::UNSET).map_err(io_err)?;
                ClusterId::UNSET
            }
            Err(e) => return Err(io_err(e)),
        };
        Ok(Identity {
            dir: dir.to_path_buf(),
            node,
            cluster: Mutex::new(cluster),
        })
    }

    pub fn node(&self) -> NodeId {
        self.node
    }

    /// The cluster id, or [`ClusterId::UNSET`] before it is known.
    pub fn cluster(&self) -> ClusterId {
        *self.cluster.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The cluster id, made now (random) if this directory has none yet: what
    /// the node that initializes the cluster calls.
    pub fn found(&self) -> Result<ClusterId, IdentityError> {
        let mut cluster = self.cluster.lock().unwrap_or_else(|e| e.into_inner());
        if cluster.is_unset() {
            let id = ClusterId::random().map_err(|source| self.io_err(source))?;
            write(&self.dir, self.node, id).map_err(|source| self.io_err(source))?;
            *cluster = id;
        }
        Ok(*cluster)
    }

    /// Take `id` as this node's cluster if it has none yet; refuse another
    /// cluster's id. An unset `id` changes nothing.
    pub fn adopt(&self, id: ClusterId) -> Result<(), IdentityError> {
        let mut cluster = self.cluster.lock().unwrap_or_else(|e| e.into_inner());
        if id.is_unset() || id == *cluster {
            return Ok(());
        }
        if !cluster.is_unset() {
            return Err(IdentityError::OtherCluster {
                path: self.dir.display().to_string(),
                found: *cluster,
                cluster: id,
            });
        }
        write(&self.dir, self.node, id).map_err(|source| self.io_err(source))?;
        *cluster = id;
        Ok(())
    }

    fn io_err(&self, source: io::Error) -> IdentityError {
        IdentityError::Io {
            path: self.dir.display().to_string(),
            source,
        }
    }
}

/// What in `dir` shows it holds data that is not a marked cluster node's.
fn foreign_contents(dir: &Path) -> io::Result<Option<&'static str>> {
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        let name = name.to_string_lossy();
        if name == "raft" || name == "sm" {
            return Ok(Some("cluster data"));
        }
        if name.ends_with(".log") {
            return Ok(Some("a single-node log"));
        }
    }
    Ok(None)
}

fn encode(node: NodeId, cluster: ClusterId) -> Vec<u8> {
    let mut out = Vec::with_capacity(LEN);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&node.to_le_bytes());
    out.extend_from_slice(&cluster.0);
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn decode(bytes: &[u8]) -> Option<(NodeId, ClusterId)> {
    if bytes.len() != LEN || &bytes[..8] != MAGIC {
        return None;
    }
    let (body, crc) = bytes.split_at(LEN - 4);
    if crc32c::crc32c(body).to_le_bytes() != crc {
        return None;
    }
    if body[8..12] != VERSION.to_le_bytes() {
        return None;
    }
    let node = NodeId::from_le_bytes(body[12..20].try_into().ok()?);
    let cluster = ClusterId(body[20..36].try_into().ok()?);
    Some((node, cluster))
}

/// Replace the marker whole: aside, synced, renamed, directory synced.
fn write(dir: &Path, node: NodeId, cluster: ClusterId) -> io::Result<()> {
    let aside = dir.join(format!("{FILE}.new"));
    let bytes = encode(node, cluster);
    let mut file = File::create(&aside)?;
    file.write_all(&bytes)?;
    file.sync_all()?;
    drop(file);
    crate::synced::file(&aside, bytes.len() as u64);
    let path = dir.join(FILE);
    std::fs::rename(&aside, &path)?;
    crate::synced::sync_dir(dir)?;
    crate::synced::file(&path, bytes.len() as u64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    type Res = Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn first_start_writes_the_node_and_a_restart_keeps_the_cluster() -> Res {
        let dir = tempfile::tempdir()?;
        let first = Identity::open(dir.path(), 2)?;
        assert!(first.cluster().is_unset());
        let id = first.found()?;
        assert!(!id.is_unset());
        assert_eq!(first.found()?, id, "found twice keeps the first id");
        drop(first);
        let again = Identity::open(dir.path(), 2)?;
        assert_eq!(again.cluster(), id);
        Ok(())
    }

    #[test]
    fn another_nodes_directory_is_refused() -> Res {
        let dir = tempfile::tempdir()?;
        Identity::open(dir.path(), 1)?;
        let err = Identity::open(dir.path(), 2).err().ok_or("opened")?;
        assert!(matches!(
            err,
            IdentityError::OtherNode {
                found: 1,
                node: 2,
                ..
            }
        ));
        assert!(err.to_string().contains("belongs to node 1, not node 2"));
        Ok(())
    }

    #[test]
    fn a_cluster_id_is_adopted_once_and_another_is_refused() -> Res {
        let dir = tempfile::tempdir()?;
        let ours = ClusterId([7; 16]);
        let theirs = ClusterId([9; 16]);
        let node = Identity::open(dir.path(), 3)?;
        node.adopt(ClusterId::UNSET)?;
        assert!(node.cluster().is_unset());
        node.adopt(ours)?;
        node.adopt(ours)?;
        let err = node.adopt(theirs).err().ok_or("adopted a second cluster")?;
        assert!(matches!(err, IdentityError::OtherCluster { .. }));
        drop(node);
        // Another cluster's directory: it keeps its id and refuses ours.
        let node = Identity::open(dir.path(), 3)?;
        assert_eq!(node.cluster(), ours);
        assert!(node.adopt(theirs).is_err());
        Ok(())
    }

    #[test]
    fn data_without_a_marker_and_a_damaged_marker_are_refused() -> Res {
        let dir = tempfile::tempdir()?;
        std::fs::create_dir(dir.path().join("raft"))?;
        let err = Identity::open(dir.path(), 1).err().ok_or("opened")?;
        assert!(matches!(err, IdentityError::Unmarked { .. }));

        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("0000000001.log"), b"x")?;
        let err = Identity::open(dir.path(), 1).err().ok_or("opened")?;
        assert!(err.to_string().contains("single-node log"), "{err}");

        let dir = tempfile::tempdir()?;
        Identity::open(dir.path(), 1)?;
        let path = dir.path().join(FILE);
        let mut bytes = std::fs::read(&path)?;
        bytes[14] ^= 1;
        std::fs::write(&path, &bytes)?;
        let err = Identity::open(dir.path(), 1).err().ok_or("opened")?;
        assert!(matches!(err, IdentityError::Damaged { .. }));
        Ok(())
    }
}
