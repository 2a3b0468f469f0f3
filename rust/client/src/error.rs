//! The client's one error enum, and the server's error replies.

use std::io;

use thiserror::Error;

/// A reply that means the command did not do what was asked. Each is one wire word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ErrorReply {
    #[error("BAD_FORMAT")]
    BadFormat,
    /// `BURIED <id>` after a put, bare `BURIED` after a release: the server ran out of
    /// memory for its priority queue and buried the job instead.
    #[error("BURIED")]
    Buried(Option<u64>),
    #[error("DEADLINE_SOON")]
    DeadlineSoon,
    #[error("DRAINING")]
    Draining,
    #[error("EXPECTED_CRLF")]
    ExpectedCrlf,
    #[error("INTERNAL_ERROR")]
    InternalError,
    #[error("JOB_TOO_BIG")]
    JobTooBig,
    #[error("NOT_FOUND")]
    NotFound,
    #[error("NOT_IGNORED")]
    NotIgnored,
    #[error("OUT_OF_MEMORY")]
    OutOfMemory,
    #[error("TIMED_OUT")]
    TimedOut,
    #[error("UNKNOWN_COMMAND")]
    UnknownCommand,
}

/// Everything that can go wrong in a call.
#[derive(Debug, Error)]
pub enum ClientError {
    /// The server answered with an error word; the connection is still usable.
    #[error("{0}")]
    Reply(ErrorReply),
    /// Connecting failed.
    #[error("cannot connect to {addr}: {source}")]
    Connect { addr: String, source: io::Error },
    /// Reading or writing failed; the connection is closed from then on.
    #[error("connection to {addr} failed: {source}")]
    Io { addr: String, source: io::Error },
    /// The server closed the connection.
    #[error("connection to {addr} closed by the server")]
    Closed { addr: String },
    /// No reply within the connection's timeout; the connection is closed.
    #[error("no reply from {addr} within the timeout")]
    TimedOut { addr: String },
    /// A reply this client does not understand; the connection is closed.
    #[error("unexpected reply from {addr}: {line:?}")]
    Unexpected { addr: String, line: String },
    /// The connection was closed by `close` or by an earlier failure.
    #[error("connection to {addr} is closed")]
    NotConnected { addr: String },
    /// The TLS handshake failed, or the server ended the session with an alert (a
    /// certificate refused); the connection is closed.
    #[error("TLS with {addr} failed: {problem}")]
    Tls { addr: String, problem: String },
    /// TLS settings that cannot be used: a file missing or not PEM, a key that does not
    /// go with its certificate. Nothing was connected.
    #[error("TLS settings: {0}")]
    TlsSetup(String),
    /// An argument that cannot be put on the wire (a tube name with CR or LF).
    #[error("{0}")]
    Invalid(String),
}

/// A command that cannot be written (a tube name with CR or LF) is an invalid
/// argument: nothing was sent and the connection stays usable.
impl From<beanpole_protocol::EncodeError> for ClientError {
    fn from(e: beanpole_protocol::EncodeError) -> Self {
        ClientError::Invalid(e.to_string())
    }
}

impl ClientError {
    /// True when the connection can no longer be used after this error.
    pub fn is_connection(&self) -> bool {
        !matches!(
            self,
            ClientError::Reply(_) | ClientError::Invalid(_) | ClientError::TlsSetup(_)
        )
    }
}
