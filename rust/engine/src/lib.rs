//! The beanpole server: the beanstalkd protocol over tokio, with the queue state in
//! a synchronous [`store::Store`].
//!
//! * [`protocol`] (the `beanpole-protocol` crate, shared with the client) parses
//!   command lines and names the fixed replies;
//! * [`store`] holds jobs, tubes, reservations and deadlines, with no I/O;
//! * [`stats`] renders the YAML bodies;
//! * [`server`] runs listeners, one task per connection and one clock task, and
//!   [`server::ServerHandle`] owns a running server for embedding (Python uses it).
//!
//! `docs/architecture.md` follows one command from the socket to its reply.

pub mod events;
mod idindex;
mod memhint;
pub mod server;
pub mod stats;
pub mod store;
pub mod wal;

/// The command language (`beanpole-protocol`), as `crate::protocol` for the engine's
/// modules: it imports nothing of the engine.
pub use beanpole_protocol as protocol;

/// beanpole's own version: `beanpole --version`, the start line, `/metrics` build info
/// and `beanpole-version` in the embedded server's stats, never the wire.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The beanstalkd version whose protocol beanpole speaks, reported as `version` in the
/// wire `stats`: clients gate features on it (Perl's Beanstalk::Client and fivebeans
/// send `kick-job` only to 1.8 or later), so it names the protocol, not beanpole.
pub const PROTOCOL_VERSION: &str = "1.13";
