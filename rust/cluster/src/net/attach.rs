//! Attaching a client session to the leader over its peer address: a follower
//! that forwards a client connection opens a connection that starts with an
//! attach request (in place of a peer's hello); the leader answers whether the
//! session is attached, and from then on the connection carries the client's
//! commands and the server's replies as plain beanstalkd protocol, served by the
//! leader's engine as that session (`Admin::attach_session`).
//!
//! ```text
//!  15 attach     magic "BPPEER", version u16, from u64, to u64, cluster id 16
//!                bytes, owner u64, acked u64, used tube (u16 len, bytes),
//!                watched count u16, per tube (u16 len, bytes)
//!  16 attached   outcome u8: 0 attached | 1 busy (attached elsewhere: try again
//!                shortly) | 2 lost (replies the follower needs are no longer
//!                kept) | 3 not serving (this node does not lead)
//! ```
//!
//! An attach whose `acked` is `u64::MAX` asks instead that the session end
//! (its client hung up): its jobs come back at once; busy while a connection
//! is still attached to it.
//!
//! A request that names another node or another cluster is refused (frame 3),
//! as a peer's hello would be.

use std::time::Duration;

use beanpole_engine::server::{Admin, SessionAttach, SessionRefused, END_SESSION};
use beanpole_engine::store::session::AttachError;
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::wire::{self, finish, start};
use crate::codec::{CodecError, Reader};
use crate::identity::{ClusterId, Identity};
use crate::types::NodeId;

pub const ATTACH: u8 = 15;
pub const ATTACHED: u8 = 16;

/// Tube names are at most this long (the protocol's limit).
const MAX_TUBE: usize = 200;

/// An attach request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attach {
    pub from: NodeId,
    pub to: NodeId,
    pub cluster: ClusterId,
    pub session: SessionAttach,
}

/// The leader's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attached {
    Yes,
    Busy,
    Lost,
    NotServing,
}

pub fn attach(a: &Attach) -> Vec<u8> {
    let mut out = start(ATTACH);
    out.extend_from_slice(wire::MAGIC);
    out.extend_from_slice(&wire::VERSION.to_le_bytes());
    out.extend_from_slice(&a.from.to_le_bytes());
    out.extend_from_slice(&a.to.to_le_bytes());
    out.extend_from_slice(&a.cluster.0);
    out.extend_from_slice(&a.session.owner.to_le_bytes());
    out.extend_from_slice(&a.session.acked.to_le_bytes());
    put_name(&mut out, &a.session.use_tube);
    out.extend_from_slice(&(a.session.watch.len() as u16).to_le_bytes());
    for t in &a.session.watch {
        put_name(&mut out, t);
    }
    finish(out)
}

fn put_name(out: &mut Vec<u8>, name: &[u8]) {
    out.extend_from_slice(&(name.len() as u16).to_le_bytes());
    out.extend_from_slice(name);
}

fn name(r: &mut Reader<'_>) -> Result<Vec<u8>, CodecError> {
    let len = r.u16()? as usize;
    if len > MAX_TUBE {
        return Err(CodecError::Truncated);
    }
    Ok(r.take(len)?.to_vec())
}

/// An attach request's fields; `None` if it is not one of this version.
pub fn read_attach(body: &[u8]) -> Option<Attach> {
    let mut r = Reader(body);
    if r.take(6).ok()? != wire::MAGIC || r.u16().ok()? != wire::VERSION {
        return None;
    }
    let from = r.u64().ok()?;
    let to = r.u64().ok()?;
    let cluster = ClusterId(r.take(16).ok()?.try_into().ok()?);
    let owner = r.u64().ok()?;
    let acked = r.u64().ok()?;
    let use_tube = name(&mut r).ok()?;
    let mut watch = Vec::new();
    for _ in 0..r.u16().ok()? {
        watch.push(name(&mut r).ok()?);
    }
    r.end().ok()?;
    if watch.is_empty() {
        return None;
    }
    Some(Attach {
        from,
        to,
        cluster,
        session: SessionAttach {
            owner,
            acked,
            use_tube,
            watch,
        },
    })
}

pub fn attached(a: Attached) -> Vec<u8> {
    let mut out = start(ATTACHED);
    out.push(match a {
        Attached::Yes => 0,
        Attached::Busy => 1,
        Attached::Lost => 2,
        Attached::NotServing => 3,
    });
    finish(out)
}

pub fn read_attached(body: &[u8]) -> Option<Attached> {
    let mut r = Reader(body);
    let a = match r.u8().ok()? {
        0 => Attached::Yes,
        1 => Attached::Busy,
        2 => Attached::Lost,
        3 => Attached::NotServing,
        _ => return None,
    };
    r.end().ok()?;
    Some(a)
}

/// The leader's side: answer `body` (an attach frame) on `stream`, and on
/// success hand the connection to the serving term's engine.
pub async fn serve(
    mut stream: TcpStream,
    body: &[u8],
    identity: &Identity,
    serving: Option<&watch::Receiver<Option<(u64, Admin)>>>,
) -> std::io::Result<()> {
    let Some(request) = read_attach(body) else {
        return wire::write_frame(&mut stream, &wire::refused("not an attach of this version"))
            .await;
    };
    // A node's own forwarder attaches to it too once it leads.
    let me = identity.node();
    let cluster = identity.cluster();
    if request.to != me || cluster.is_unset() || request.cluster != cluster {
        let reason = format!("this is node {me} of another cluster or not the node asked");
        return wire::write_frame(&mut stream, &wire::refused(&reason)).await;
    }
    let admin = serving.and_then(|s| s.borrow().as_ref().map(|(_, a)| a.clone()));
    let Some(admin) = admin else {
        return wire::write_frame(&mut stream, &attached(Attached::NotServing)).await;
    };
    if request.session.acked == END_SESSION {
        let answer = match admin.end_session(request.session.owner) {
            Ok(()) => Attached::Yes,
            Err(_) => Attached::Busy,
        };
        return wire::write_frame(&mut stream, &attached(answer)).await;
    }
    // Attached, the engine sends the answer before any reply; otherwise it is
    // written here, on a copy of the socket the engine did not keep.
    let std = stream.into_std()?;
    let answer =
        match admin.attach_session(std.try_clone()?, &request.session, attached(Attached::Yes)) {
            Ok(()) => return Ok(()),
            Err(SessionRefused::Store(AttachError::Busy)) => Attached::Busy,
            Err(SessionRefused::Store(AttachError::Lost { .. })) => Attached::Lost,
            Err(_) => Attached::NotServing,
        };
    std.set_nonblocking(false)?;
    std.set_write_timeout(Some(Duration::from_secs(2)))?;
    std::io::Write::write_all(&mut &std, &attached(answer))
}
