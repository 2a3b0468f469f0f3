//! A blocking beanstalkd client, the engine of `beanpole.Client`.
//!
//! * [`command`]: the commands sent (the protocol crate's, encoded by it) and the
//!   reply each expects;
//! * [`reply`] parses reply lines and bodies from a byte buffer, never panicking;
//! * [`conn`] owns one TCP (plain or TLS) or Unix-socket connection and runs a command
//!   to its reply;
//! * [`tls`] reads TLS settings from PEM files and does the client's handshake;
//! * [`batch`] pipelines many commands in bounded windows;
//! * [`shard`] picks the server of a key (rendezvous hashing).
//!
//! Commands, their encoding, limits and reply words come from `beanpole-protocol`,
//! the crate the server parses with, so the client and the server agree on them by
//! construction; the client does not depend on the engine. Nothing here knows about
//! Python.

pub mod batch;
pub mod command;
pub mod conn;
pub mod error;
pub mod reply;
pub mod shard;
pub mod tls;

pub use batch::DEFAULT_WINDOW;
pub use command::Command;
pub use conn::{Address, Closer, Connection};
pub use error::{ClientError, ErrorReply};
pub use reply::Reply;
pub use tls::{TlsFiles, TlsSettings};
