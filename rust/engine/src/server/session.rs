//! Sessions a cluster follower forwards: the leader's side of attaching one.
//!
//! The follower hands the leader a stream for one of its clients,
//! naming the session (its owner key), how many of its commands it already
//! has replies for, and the tube it uses and those it watches. The store
//! attaches the session (`store/session.rs`); the connection is then served as
//! any other, except that resent commands are answered from their first run and
//! each reply is recorded with the changes it answers (`conn.rs`).

use std::sync::Arc;

use thiserror::Error;

use super::conn::SessionConn;
use super::input::Socket;
use super::signal::ConnSignal;
use super::{listener, Admin};
use crate::store::session::AttachError;

/// What a follower says when it attaches a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionAttach {
    /// The session's key, drawn by the follower.
    pub owner: u64,
    /// Commands of the session the follower has replies for.
    pub acked: u64,
    /// The tube the client uses.
    pub use_tube: Vec<u8>,
    /// The tubes it watches, in its order.
    pub watch: Vec<Vec<u8>>,
}

/// Why a session was not attached.
#[derive(Debug, Error)]
pub enum SessionRefused {
    #[error(transparent)]
    Store(#[from] AttachError),
    #[error("the server is stopping")]
    Stopping,
}

/// The `acked` of an attach that asks for the session's end instead (its
/// client hung up after the follower's link to the leader carried its last
/// replies).
pub const END_SESSION: u64 = u64::MAX;

impl Admin {
    /// The runtime the server's connections run on (None once it stops): for
    /// a transport that hands it many sessions to run its own work beside them.
    pub fn runtime(&self) -> Option<tokio::runtime::Handle> {
        self.shared().runtime.clone()
    }

    /// End session `owner` as a client's hang-up ends a connection: its jobs
    /// come back at once. Refused while a connection is attached to it.
    pub fn end_session(&self, owner: u64) -> Result<(), SessionRefused> {
        let shared = self.shared();
        let settled = {
            let mut store = shared.lock();
            let Some(conn) = store.session_conn(owner) else {
                return Ok(());
            };
            if !store.session_detached(conn) {
                return Err(SessionRefused::Store(AttachError::Busy));
            }
            store.disconnect(conn, shared.now());
            shared.settle(&mut store)
        };
        let position = shared.finish(settled);
        shared.write_log(position);
        Ok(())
    }

    /// Serve `sock` as session `attach.owner`, attached with the follower's
    /// view of it: `greeting` is written first, then the stream carries the
    /// client's commands and their replies as a client's connection would (a
    /// session's stream on the follower's link to the leader).
    pub fn attach_session<S: Socket>(
        &self,
        sock: S,
        attach: &SessionAttach,
        greeting: Vec<u8>,
    ) -> Result<(), SessionRefused> {
        let shared = self.shared();
        let Some(runtime) = shared.runtime.clone() else {
            return Err(SessionRefused::Stopping);
        };
        if shared.stopping() {
            return Err(SessionRefused::Stopping);
        }
        let signal = Arc::new(ConnSignal::default());
        let watch: Vec<&[u8]> = attach.watch.iter().map(Vec::as_slice).collect();
        let (id, replay_to) = {
            let mut store = shared.lock();
            store.attach_session(
                signal.clone(),
                attach.owner,
                attach.acked,
                &attach.use_tube,
                &watch,
            )?
        };
        let _entered = runtime.enter();
        let session = Box::new(SessionConn::new(attach.acked, replay_to));
        listener::spawn_session(sock, Arc::clone(shared), signal, id, session, greeting);
        Ok(())
    }
}
