//! When the log makes data durable: the policy `-f` and `-F` choose.
//!
//! Its own module because both the group commit (`pipe.rs`, which decides when a
//! reply may go) and the writer thread (`writer.rs`, which syncs) read it, and the
//! writer builds on the pipe: neither imports the other for it. Imports nothing.

use std::time::Duration;

/// When data is made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// `-F`: never; the OS writes back when it likes.
    Never,
    /// `-f 0`: before any reply that depends on it.
    Always,
    /// `-f MS`: at most every MS, and at the latest MS after a write.
    Every(Duration),
}
