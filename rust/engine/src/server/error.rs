//! Why a server could not start: [`ServerError`], one enum for the start's steps.
//!
//! Its own module because binding (`bind.rs`) and starting (`handle.rs`) both fail
//! with it and `handle.rs` builds on `bind.rs`. Imports only the log's and TLS's
//! error types.

use std::io;

use thiserror::Error;

use super::tls::TlsError;

/// Why a server could not start.
#[derive(Debug, Error)]
pub enum ServerError {
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: String, source: io::Error },
    #[error("invalid setting: {0}")]
    Invalid(String),
    #[error("cannot start the runtime: {0}")]
    Runtime(io::Error),
    #[error(transparent)]
    Log(#[from] crate::wal::LogError),
    #[error("TLS: {0}")]
    Tls(#[from] TlsError),
}
