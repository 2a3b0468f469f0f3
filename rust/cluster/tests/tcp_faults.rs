//! The transport's faults, each against a real node's peer server: a closed
//! port is unreachable, a peer that never answers times out, a node of another
//! cluster or a connection that reached the wrong node is refused, and bytes
//! that are not a peer's frames close that connection and nothing else.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{quick, Error, Node};

use beanpole_cluster::identity::{ClusterId, Identity};
use beanpole_cluster::net::{NetConfig, Network, PeerLink};
use beanpole_cluster::types::{NodeId, Peer, Vote};
use openraft::error::RPCError;
use openraft::network::{RPCOption, RaftNetwork};
use openraft::raft::VoteRequest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A link from a node `from` (of cluster `cluster`) to node `to` at `addr`.
fn link(
    dir: &tempfile::TempDir,
    from: NodeId,
    cluster: Option<ClusterId>,
    to: NodeId,
    addr: &str,
) -> Result<PeerLink, Error> {
    let identity = Identity::open(dir.path(), from)?;
    if let Some(id) = cluster {
        identity.adopt(id)?;
    }
    let peer = Peer {
        client: String::new(),
        peer: addr.to_string(),
    };
    Ok(Network::new(Arc::new(identity), NetConfig::default()).link(to, &peer))
}

async fn ask_vote(
    link: &mut PeerLink,
    from: NodeId,
) -> Result<(), RPCError<NodeId, Peer, openraft::error::RaftError<NodeId>>> {
    let req = VoteRequest::new(Vote::new(1, from), None);
    link.vote(req, RPCOption::new(Duration::from_secs(2)))
        .await
        .map(|_| ())
}

/// A lone node (not initialized) answering on a loopback port.
async fn lone(id: NodeId) -> Result<Node, Error> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    Node::start(id, listener, Arc::new(quick().validate()?)).await
}

#[tokio::test]
async fn a_closed_port_is_unreachable() -> Result<(), Error> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?.to_string();
    drop(listener);
    let dir = tempfile::tempdir()?;
    let mut link = link(&dir, 1, None, 2, &addr)?;
    let err = ask_vote(&mut link, 1).await.err().ok_or("answered")?;
    assert!(matches!(err, RPCError::Unreachable(_)), "{err}");
    assert!(
        err.to_string().contains("cannot connect to node 2"),
        "{err}"
    );
    Ok(())
}

#[tokio::test]
async fn a_peer_that_never_answers_times_out() -> Result<(), Error> {
    // A socket that accepts and then says nothing: a stalled node.
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?.to_string();
    let held = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((conn, _)) = listener.accept().await {
            held.push(conn);
        }
    });
    let dir = tempfile::tempdir()?;
    let mut link = link(&dir, 1, None, 2, &addr)?;
    let req = VoteRequest::new(Vote::new(1, 1), None);
    let err = link
        .vote(req, RPCOption::new(Duration::from_millis(300)))
        .await
        .err()
        .ok_or("answered")?;
    // The handshake is what stalls: connecting fails within the deadline.
    assert!(
        matches!(err, RPCError::Unreachable(_) | RPCError::Timeout(_)),
        "{err}"
    );
    held.abort();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_cluster_and_the_wrong_node_are_refused() -> Result<(), Error> {
    let node = lone(1).await?;
    let ours = node.identity.found()?;
    let addr = node.peer.to_string();

    let dir = tempfile::tempdir()?;
    let mut foreign = link(&dir, 2, Some(ClusterId([5; 16])), 1, &addr)?;
    let err = ask_vote(&mut foreign, 2).await.err().ok_or("answered")?;
    assert!(matches!(err, RPCError::Unreachable(_)), "{err}");
    assert!(err.to_string().contains("cluster"), "{err}");

    let dir = tempfile::tempdir()?;
    let mut wrong = link(&dir, 2, None, 7, &addr)?;
    let err = ask_vote(&mut wrong, 2).await.err().ok_or("answered")?;
    assert!(err.to_string().contains("not node 7"), "{err}");

    // A node of no cluster yet is welcome, and learns the cluster's id.
    let dir = tempfile::tempdir()?;
    let mut fresh = link(&dir, 2, None, 1, &addr)?;
    ask_vote(&mut fresh, 2).await?;
    assert_eq!(Identity::open(dir.path(), 2)?.cluster(), ours);

    node.raft.shutdown().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_that_are_not_frames_close_that_connection_only() -> Result<(), Error> {
    let node = lone(1).await?;
    let addr = node.peer.to_string();
    let garbage: [&[u8]; 3] = [
        b"put 0 0 10 5\r\nhello\r\n", // a beanstalkd client on the wrong port
        &u32::MAX.to_le_bytes(),      // a 4 GiB frame announced
        &[6, 0, 0, 0, 1, b'B', b'P', b'X', 0, 0], // a hello of no beanpole peer
    ];
    for bytes in garbage {
        let mut conn = TcpStream::connect(&addr).await?;
        conn.write_all(bytes).await?;
        let mut reply = Vec::new();
        // The server ends the connection (after a refusal, for a bad hello);
        // closing with the rest unread may reset it.
        let read = tokio::time::timeout(Duration::from_secs(10), conn.read_to_end(&mut reply));
        match read.await? {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Err(e) => return Err(e.into()),
        }
        assert!(reply.len() < 300, "{} bytes back", reply.len());
    }
    // The server goes on: a real peer is answered.
    let dir = tempfile::tempdir()?;
    let mut link = link(&dir, 2, None, 1, &addr)?;
    ask_vote(&mut link, 2).await?;
    node.raft.shutdown().await?;
    Ok(())
}
