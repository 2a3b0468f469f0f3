//! The follower's side: one link per node it forwards sessions to, dialed when
//! the first session needs it and again after it breaks.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::{lock, run, Link, MuxStream, LINK};
use crate::identity::ClusterId;
use crate::net::wire;
use crate::types::NodeId;

/// A slot per node: the link to it, if one was made.
type Slot = Arc<tokio::sync::Mutex<Option<Arc<Link>>>>;

/// This node's links to others.
#[derive(Debug, Default)]
pub struct Links {
    /// One slot per node. A std mutex to find the slot; the slot's own async
    /// mutex is held while its link is dialed, so the sessions bound for one
    /// node wait for one dial, and those bound for another do not.
    slots: Mutex<HashMap<NodeId, Slot>>,
}

impl Links {
    /// A new session on the link from node `me` to node `to` at `addr`,
    /// dialed first if there is none or it broke. The caller bounds the time.
    pub async fn open(
        &self,
        me: NodeId,
        cluster: ClusterId,
        to: NodeId,
        addr: &str,
    ) -> io::Result<MuxStream> {
        let slot = Arc::clone(lock(&self.slots).entry(to).or_default());
        let mut held = slot.lock().await;
        if let Some(link) = held.as_ref() {
            if !link.is_broken() && link.addr == addr {
                if let Some(stream) = link.open() {
                    return Ok(stream);
                }
            }
        }
        *held = None;
        let mut tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        let hello = wire::hello_as(
            LINK,
            &wire::Hello {
                from: me,
                to,
                cluster,
            },
        );
        tcp.write_all(&hello).await?;
        let (kind, body) = wire::read_frame(&mut tcp, 1024).await?;
        match (kind, wire::read_welcome(&body)) {
            (wire::WELCOME, Ok((node, c))) if node == to && c == cluster => {}
            _ => return Err(io::Error::other(format!("node {to} refused the link"))),
        }
        let link = Arc::new(Link::new(addr));
        tokio::spawn(run(Arc::clone(&link), tcp, None));
        *held = Some(Arc::clone(&link));
        link.open()
            .ok_or_else(|| io::Error::from(io::ErrorKind::BrokenPipe))
    }
}
