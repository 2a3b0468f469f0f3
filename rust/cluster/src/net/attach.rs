//! Attaching a client session to the leader: a follower that forwards a client
//! connection opens a session on its link to the leader (`mux`) and writes an
//! attach request on it first; the leader answers whether the session is
//! attached, and from then on the session's stream carries the client's
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
//! (its client hung up): its jobs come back at once; busy while a stream is
//! still attached to it.
//!
//! A request that names another node or another cluster is refused (frame 3),
//! as a peer's hello would be. (Each session once had a TCP connection of its
//! own to the leader that opened with this request; the frames are the same.)

use beanpole_engine::server::{Admin, SessionAttach, SessionRefused, END_SESSION};
use beanpole_engine::store::session::AttachError;
use tokio::sync::watch;

use super::mux::MuxStream;
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

/// What an attach request comes to before its connection is handed on: the
/// frame to answer with, or the engine to attach the session to.
enum Checked {
    Answer(Vec<u8>),
    Attach(Admin, SessionAttach),
}

fn check(
    body: &[u8],
    identity: &Identity,
    serving: Option<&watch::Receiver<Option<(u64, Admin)>>>,
) -> Checked {
    let Some(request) = read_attach(body) else {
        return Checked::Answer(wire::refused("not an attach of this version"));
    };
    // A node's own forwarder attaches to it too once it leads.
    let me = identity.node();
    let cluster = identity.cluster();
    if request.to != me || cluster.is_unset() || request.cluster != cluster {
        let reason = format!("this is node {me} of another cluster or not the node asked");
        return Checked::Answer(wire::refused(&reason));
    }
    let admin = serving.and_then(|s| s.borrow().as_ref().map(|(_, a)| a.clone()));
    let Some(admin) = admin else {
        return Checked::Answer(attached(Attached::NotServing));
    };
    if request.session.acked == END_SESSION {
        let answer = match admin.end_session(request.session.owner) {
            Ok(()) => Attached::Yes,
            Err(_) => Attached::Busy,
        };
        return Checked::Answer(attached(answer));
    }
    Checked::Attach(admin, request.session)
}

/// The answer to an attach the engine refused.
fn refusal(why: &SessionRefused) -> Attached {
    match why {
        SessionRefused::Store(AttachError::Busy) => Attached::Busy,
        SessionRefused::Store(AttachError::Lost { .. }) => Attached::Lost,
        _ => Attached::NotServing,
    }
}

/// The leader's side: answer `body` (an attach frame) on a session's stream
/// over the follower's link (`mux`), and on success hand the stream to the
/// serving term's engine, which writes the answer before any reply.
pub async fn serve(
    mut stream: MuxStream,
    body: &[u8],
    identity: &Identity,
    serving: Option<&watch::Receiver<Option<(u64, Admin)>>>,
) -> std::io::Result<()> {
    let (admin, session) = match check(body, identity, serving) {
        Checked::Answer(answer) => return wire::write_frame(&mut stream, &answer).await,
        Checked::Attach(admin, session) => (admin, session),
    };
    let answer = match admin.attach_session(stream.clone(), &session, attached(Attached::Yes)) {
        Ok(()) => return Ok(()),
        Err(why) => refusal(&why),
    };
    wire::write_frame(&mut stream, &attached(answer)).await
}
