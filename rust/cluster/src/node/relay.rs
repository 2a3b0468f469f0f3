//! The client address while this node does not serve: each connection is
//! relayed, byte for byte, to the leader's client address, so a client of any
//! node talks to the leader without knowing it (no redirect). The relay lasts
//! as long as both sides: when the leader goes, the leader's side closes and so
//! does the client's, and a reconnect reaches the new leader. Keeping a
//! client's connection (and its reservations) through a change of leader is
//! the next step.
//!
//! Where the leader is comes from Raft's metrics (its id) and the membership
//! (its client address). With no leader known, a connection waits for one, at
//! most [`LEADER_WAIT`], then closes.

use std::net::TcpListener as StdListener;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use crate::types::{NodeId, Raft};

/// How long a client connection waits for a leader to be known before it is
/// closed.
const LEADER_WAIT: Duration = Duration::from_secs(5);
/// The longest a connect to the leader may take.
const CONNECT: Duration = Duration::from_secs(2);

/// Relay connections on a copy of `listener` until aborted (which closes the
/// relays too).
pub fn spawn(listener: &Arc<StdListener>, raft: Raft, me: NodeId) -> JoinHandle<()> {
    let copy = listener.try_clone().and_then(|l| {
        l.set_nonblocking(true)?;
        TcpListener::from_std(l)
    });
    tokio::spawn(async move {
        let Ok(listener) = copy else {
            return;
        };
        // The relays end with this task: a JoinSet aborts them when dropped.
        let mut relays = JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((client, _)) => {
                        relays.spawn(relay(client, raft.clone(), me));
                    }
                    // Out of descriptors or the like: wait, as the engine's
                    // accept loop does.
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                },
                Some(_) = relays.join_next(), if !relays.is_empty() => {}
            }
        }
    })
}

/// The client address of the leader, once one other than this node is known.
async fn leader_address(raft: &Raft, me: NodeId) -> Option<String> {
    let mut metrics = raft.metrics();
    let wait = async {
        loop {
            {
                let m = metrics.borrow_and_update();
                if let Some(leader) = m.current_leader.filter(|&l| l != me) {
                    if let Some(node) = m.membership_config.membership().get_node(&leader) {
                        return Some(node.client.clone());
                    }
                }
            }
            if metrics.changed().await.is_err() {
                return None;
            }
        }
    };
    tokio::time::timeout(LEADER_WAIT, wait).await.ok().flatten()
}

/// Relay one client connection to the leader until either side closes.
async fn relay(mut client: TcpStream, raft: Raft, me: NodeId) {
    let Some(address) = leader_address(&raft, me).await else {
        return;
    };
    let Ok(Ok(mut leader)) = tokio::time::timeout(CONNECT, TcpStream::connect(&address)).await
    else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = leader.set_nodelay(true);
    let _ = tokio::io::copy_bidirectional(&mut client, &mut leader).await;
}
