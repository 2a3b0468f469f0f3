//! What the store knows about one client connection.

use std::sync::Arc;

use super::{Delivery, Wakeup};

/// A blocked reserve.
#[derive(Debug, Clone, Copy)]
pub struct Wait {
    /// Identifies this wait (its queue entries and timer name it).
    pub seq: u64,
    /// When `reserve-with-timeout` gives up, if it does.
    pub timeout_at: Option<u64>,
}

/// Per-connection state that the queue needs: which tube it uses and watches, what
/// it holds, whether it is blocked in reserve.
pub struct ConnState {
    pub use_tube: u32,
    /// Watched tubes in beanstalkd's order (append on watch, swap-remove on ignore).
    pub watch: Vec<u32>,
    /// Slots of the jobs this connection has reserved.
    pub reserved: Vec<u32>,
    pub wait: Option<Wait>,
    pub producer: bool,
    pub worker: bool,
    /// The answer to a blocked reserve, until the connection picks it up.
    pub mailbox: Option<Delivery>,
    pub waker: Arc<dyn Wakeup>,
}

impl std::fmt::Debug for ConnState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnState")
            .field("use_tube", &self.use_tube)
            .field("watch", &self.watch)
            .field("reserved", &self.reserved)
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}
