//! The client address while this node does not lead: connections are
//! accepted and closed at once, so a client is not left waiting on a node
//! that will not answer it and tries another (followers forward commands to
//! the leader in a later step).

use std::net::TcpListener as StdListener;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// Accept and close connections on a copy of `listener` until aborted.
pub fn spawn(listener: &Arc<StdListener>) -> JoinHandle<()> {
    let copy = listener.try_clone().and_then(|l| {
        l.set_nonblocking(true)?;
        TcpListener::from_std(l)
    });
    tokio::spawn(async move {
        let Ok(listener) = copy else {
            return;
        };
        loop {
            match listener.accept().await {
                Ok((stream, _)) => drop(stream),
                // Out of descriptors or the like: wait, as the engine's
                // accept loop does.
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
            }
        }
    })
}
