//! A blocking beanstalkd client, the engine of `beanpole.Client`.
//!
//! * [`command`] encodes command lines (and put bodies) into a byte buffer;
//! * [`reply`] parses reply lines and bodies from a byte buffer, never panicking;
//! * [`conn`] owns one TCP (plain or TLS) or Unix-socket connection and runs a command
//!   to its reply;
//! * [`tls`] reads TLS settings from PEM files and does the client's handshake;
//! * [`batch`] pipelines many commands in bounded windows;
//! * [`shard`] picks the server of a key (rendezvous hashing).
//!
//! Limits and reply words come from the engine's `protocol` module, so the client
//! and the server agree on them by construction. Nothing here knows about Python.

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
