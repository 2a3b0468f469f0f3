//! The cluster file, `cluster.toml`: every node's id, the address its
//! beanstalkd clients connect to and the address the other nodes reach it on.
//!
//! ```toml
//! [[node]]
//! id = 1
//! client = "10.0.0.1:11300"   # where beanstalkd clients connect
//! peer = "10.0.0.1:11400"     # traffic between nodes
//! ```
//!
//! Bad input is one line naming the file and, where there is one, the line: a
//! file that is not TOML, a key that is not one of these, a node without an id
//! or an address, an id used twice, an address used twice (by one node or two),
//! an address that is not `host:port`, and (asked with [`ClusterFile::node`])
//! an id the file does not list. Imports the cluster's types only.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;

use thiserror::Error;
use toml_edit::{Document, Item, Table};

use crate::types::{NodeId, Peer};

/// Why a cluster file cannot be used; each is one line.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum FileError {
    #[error("cluster file {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("cluster file {path} line {line}: {reason}")]
    Bad {
        path: String,
        line: usize,
        reason: String,
    },
    #[error("cluster file {path} lists no nodes: add a [[node]] with id, client and peer")]
    Empty { path: String },
    #[error("cluster file {path} has no node {id} (it lists {listed})")]
    Missing {
        path: String,
        id: NodeId,
        listed: String,
    },
}

/// One `[[node]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEntry {
    pub id: NodeId,
    /// Where beanstalkd clients connect (`host:port`).
    pub client: String,
    /// Where the other nodes reach this one (`host:port`).
    pub peer: String,
}

/// A valid cluster file: its nodes, by id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterFile {
    pub path: String,
    pub nodes: BTreeMap<NodeId, NodeEntry>,
}

impl ClusterFile {
    /// Read and check the file at `path`.
    pub fn load(path: &Path) -> Result<ClusterFile, FileError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| FileError::Read {
            path: shown.clone(),
            reason: e.to_string(),
        })?;
        ClusterFile::parse(&text, &shown)
    }

    /// Check `text`, the content of the file named `path` (for messages).
    pub fn parse(text: &str, path: &str) -> Result<ClusterFile, FileError> {
        let bad = |span: Option<Range<usize>>, reason: String| FileError::Bad {
            path: path.to_string(),
            line: line_of(text, span),
            reason,
        };
        let doc = Document::parse(text).map_err(|e| {
            let reason = e.message().lines().next().unwrap_or("not TOML").to_string();
            bad(e.span(), format!("not valid TOML: {reason}"))
        })?;
        let root = doc.as_item().as_table().ok_or_else(|| FileError::Empty {
            path: path.to_string(),
        })?;
        for (key, item) in root.iter() {
            if key != "node" {
                return Err(bad(
                    item.span(),
                    format!("unknown key `{key}` (the file holds [[node]] entries only)"),
                ));
            }
        }
        let entries = match root.get("node") {
            None => return Err(FileError::Empty { path: path.into() }),
            Some(item) => item.as_array_of_tables().ok_or_else(|| {
                bad(
                    item.span(),
                    "`node` must be [[node]] entries, each with id, client and peer".into(),
                )
            })?,
        };
        let mut nodes: BTreeMap<NodeId, NodeEntry> = BTreeMap::new();
        let mut lines: BTreeMap<NodeId, usize> = BTreeMap::new();
        // Each address, normalised, with the node and role that use it.
        let mut addresses: BTreeMap<String, (NodeId, &'static str)> = BTreeMap::new();
        for table in entries.iter() {
            let entry = node_entry(table).map_err(|(span, reason)| bad(span, reason))?;
            let line = line_of(text, table.span());
            if let Some(first) = lines.get(&entry.id) {
                return Err(bad(
                    table.span(),
                    format!(
                        "node id {} is used twice (lines {first} and {line})",
                        entry.id
                    ),
                ));
            }
            for (role, addr) in [("client", &entry.client), ("peer", &entry.peer)] {
                let key = addr.to_ascii_lowercase();
                if let Some((other, other_role)) = addresses.get(&key) {
                    let span = table.get(role).and_then(Item::span);
                    return Err(bad(
                        span,
                        format!(
                            "address {addr} is both node {other}'s {other_role} and node {}'s {role}",
                            entry.id
                        ),
                    ));
                }
                addresses.insert(key, (entry.id, role));
            }
            lines.insert(entry.id, line);
            nodes.insert(entry.id, entry);
        }
        if nodes.is_empty() {
            return Err(FileError::Empty { path: path.into() });
        }
        Ok(ClusterFile {
            path: path.to_string(),
            nodes,
        })
    }

    /// The entry of node `id`, or the error a node not in the file gets.
    pub fn node(&self, id: NodeId) -> Result<&NodeEntry, FileError> {
        self.nodes.get(&id).ok_or_else(|| FileError::Missing {
            path: self.path.clone(),
            id,
            listed: self
                .nodes
                .keys()
                .map(|id| id.to_string())
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    /// The nodes as openraft's initial membership.
    pub fn members(&self) -> BTreeMap<NodeId, Peer> {
        self.nodes
            .values()
            .map(|n| {
                let peer = Peer {
                    client: n.client.clone(),
                    peer: n.peer.clone(),
                };
                (n.id, peer)
            })
            .collect()
    }
}

type Bad = (Option<Range<usize>>, String);

fn node_entry(table: &Table) -> Result<NodeEntry, Bad> {
    for (key, item) in table.iter() {
        if !matches!(key, "id" | "client" | "peer") {
            return Err((
                item.span(),
                format!("unknown key `{key}` in a [[node]] (it takes id, client and peer)"),
            ));
        }
    }
    let id = match table.get("id") {
        None => return Err((table.span(), "a [[node]] has no `id`".into())),
        Some(item) => match item.as_integer() {
            Some(id) if id >= 1 => id as NodeId,
            _ => {
                return Err((
                    item.span(),
                    "a node's `id` must be a whole number of at least 1".into(),
                ))
            }
        },
    };
    let address = |role: &str| -> Result<String, Bad> {
        let item = table
            .get(role)
            .ok_or_else(|| (table.span(), format!("node {id} has no `{role}` address")))?;
        let addr = item.as_str().ok_or_else(|| {
            (
                item.span(),
                format!("node {id}'s `{role}` must be a \"host:port\" string"),
            )
        })?;
        check_address(addr).map_err(|why| {
            (
                item.span(),
                format!("node {id}'s `{role}` address {addr:?} {why}"),
            )
        })?;
        Ok(addr.to_string())
    };
    Ok(NodeEntry {
        id,
        client: address("client")?,
        peer: address("peer")?,
    })
}

/// Why `addr` is not `host:port` (a name, an IPv4 address or a bracketed IPv6
/// address, and a port from 1 to 65535).
fn check_address(addr: &str) -> Result<(), &'static str> {
    let (host, port) = addr.rsplit_once(':').ok_or("has no :port")?;
    match port.parse::<u16>() {
        Ok(p) if p > 0 => {}
        _ => return Err("has no port from 1 to 65535"),
    }
    let bracketed = host.starts_with('[') && host.ends_with(']') && host.len() > 2;
    if host.is_empty() || (host.contains(':') && !bracketed) {
        return Err("has no host (an IPv6 address goes in brackets)");
    }
    if host.chars().any(|c| c.is_whitespace() || c == '/') {
        return Err("is not host:port");
    }
    Ok(())
}

/// The 1-based line where `span` starts (1 without one).
fn line_of(text: &str, span: Option<Range<usize>>) -> usize {
    let at = span.map_or(0, |s| s.start.min(text.len()));
    text.as_bytes()[..at]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[[node]]
id = 1
client = "10.0.0.1:11300"   # where beanstalkd clients connect
peer = "10.0.0.1:11400"     # traffic between nodes

[[node]]
id = 2
client = "10.0.0.2:11300"
peer = "10.0.0.2:11400"

[[node]]
id = 3
client = "node3.example:11300"
peer = "[fd00::3]:11400"
"#;

    fn err(text: &str) -> String {
        match ClusterFile::parse(text, "cluster.toml") {
            Ok(file) => panic!("accepted: {file:?}"),
            Err(e) => {
                let line = e.to_string();
                assert!(!line.contains('\n'), "more than one line: {line}");
                line
            }
        }
    }

    #[test]
    fn the_issues_file_reads_as_three_nodes() -> Result<(), FileError> {
        let file = ClusterFile::parse(GOOD, "cluster.toml")?;
        assert_eq!(file.nodes.keys().copied().collect::<Vec<_>>(), [1, 2, 3]);
        let two = file.node(2)?;
        assert_eq!(two.client, "10.0.0.2:11300");
        assert_eq!(two.peer, "10.0.0.2:11400");
        assert_eq!(file.members()[&3].peer, "[fd00::3]:11400");
        Ok(())
    }

    #[test]
    fn a_node_missing_from_the_file_is_one_line() -> Result<(), FileError> {
        let file = ClusterFile::parse(GOOD, "cluster.toml")?;
        let e = file.node(4).err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("cluster file cluster.toml has no node 4 (it lists 1, 2, 3)")
        );
        Ok(())
    }

    #[test]
    fn a_reused_node_id_is_refused_with_both_lines() {
        let text = GOOD.replace("id = 3", "id = 2");
        assert_eq!(
            err(&text),
            "cluster file cluster.toml line 12: node id 2 is used twice (lines 7 and 12)"
        );
    }

    #[test]
    fn a_reused_address_is_refused() {
        let text = GOOD.replace("\"10.0.0.2:11400\"", "\"10.0.0.1:11300\"");
        assert_eq!(
            err(&text),
            "cluster file cluster.toml line 10: address 10.0.0.1:11300 is both node 1's client and node 2's peer"
        );
        let text = GOOD.replace("\"10.0.0.1:11400\"", "\"10.0.0.1:11300\"");
        assert!(err(&text).contains("both node 1's client and node 1's peer"));
    }

    #[test]
    fn a_malformed_file_is_refused_with_its_line() {
        let e = err("[[node]]\nid = 1\nclient = \"a:1\npeer = \"b:2\"\n");
        assert!(
            e.starts_with("cluster file cluster.toml line 3: not valid TOML"),
            "{e}"
        );
        let e = err("[[node]]\nid = \"one\"\nclient = \"a:1\"\npeer = \"b:2\"\n");
        assert!(
            e.contains("line 2: a node's `id` must be a whole number"),
            "{e}"
        );
        let e = err("[[node]]\nid = 0\nclient = \"a:1\"\npeer = \"b:2\"\n");
        assert!(e.contains("at least 1"), "{e}");
        let e = err("[[node]]\nid = 1\nclient = \"a:1\"\n");
        assert!(e.contains("node 1 has no `peer` address"), "{e}");
        let e = err("[[node]]\nid = 1\nclient = \"a\"\npeer = \"b:2\"\n");
        assert!(
            e.contains("line 3: node 1's `client` address \"a\" has no :port"),
            "{e}"
        );
        let e = err("[[node]]\nid = 1\nclient = \"a:1\"\npeer = \"fd00::1:2\"\n");
        assert!(e.contains("brackets"), "{e}");
        let e = err("[[node]]\nid = 1\nclient = \"a:1\"\npeer = \"b:2\"\nport = 5\n");
        assert!(
            e.contains("line 5: unknown key `port` in a [[node]]"),
            "{e}"
        );
        let e = err("nodes = []\n");
        assert!(e.contains("unknown key `nodes`"), "{e}");
        let e = err("node = 3\n");
        assert!(e.contains("must be [[node]] entries"), "{e}");
        assert_eq!(
            err("# nothing\n"),
            "cluster file cluster.toml lists no nodes: add a [[node]] with id, client and peer"
        );
    }

    #[test]
    fn a_file_that_cannot_be_read_is_one_line() {
        let e = ClusterFile::load(Path::new("/nonexistent/cluster.toml")).err();
        let line = e.map(|e| e.to_string()).unwrap_or_default();
        assert!(
            line.starts_with("cluster file /nonexistent/cluster.toml: "),
            "{line}"
        );
    }
}
