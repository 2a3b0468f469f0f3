//! Limits on what clients can make the server hold: `--max-connections`, and the
//! file descriptor limit raised at start so that the connection limit, not the
//! process's soft limit, is what bounds the connections.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::events::{level, EventHub, EventKind};

/// `--max-connections` and what it refused.
#[derive(Debug, Default)]
pub struct Limits {
    /// Most connections served at once; 0 means no limit.
    max_connections: AtomicUsize,
    /// Connections closed at once because the limit was reached.
    refused: AtomicU64,
}

impl Limits {
    pub fn set_max_connections(&self, n: usize) {
        self.max_connections.store(n, Ordering::Relaxed);
    }

    /// Whether a new connection must be closed at once, `open` being the number of
    /// connections served now. Counts the refusal, tells the hooks (`connection-refused`)
    /// and now and then logs it.
    pub fn refuse(&self, open: usize, events: &EventHub) -> bool {
        let max = self.max_connections.load(Ordering::Relaxed);
        if max == 0 || open < max {
            return false;
        }
        let n = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
        events.server_event(EventKind::ConnectionRefused, || {
            Some(format!("{open} connections open (--max-connections {max})"))
        });
        // Said for the 1st, 2nd, 4th, 8th ... refusal: a flood of them cannot flood
        // the log.
        if n.is_power_of_two() {
            events.log(level::WARNING, || {
                format!(
                    "connection refused: {open} connections open (--max-connections {max}); \
                     {n} refused so far"
                )
            });
        }
        true
    }

    /// Connections refused so far.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

/// Raise the soft limit on open files to the hard limit, so that only
/// `--max-connections` (or the hard limit) bounds the connections. Returns the
/// soft limit now in force.
pub fn raise_fd_limit() -> std::io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid rlimit for the call to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: `raised` is a valid rlimit; raising the soft limit up to the hard
        // one needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        lim = raised;
    }
    Ok(lim.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_beyond_the_limit_are_refused_and_counted() {
        let limits = Limits::default();
        let events = std::sync::Arc::new(EventHub::new(0));
        let stream = events.subscribe(8);
        events.set_kinds(&[EventKind::ConnectionRefused]);
        assert!(!limits.refuse(1_000_000, &events), "no limit by default");
        limits.set_max_connections(2);
        assert!(!limits.refuse(0, &events));
        assert!(!limits.refuse(1, &events));
        assert!(limits.refuse(2, &events));
        assert!(limits.refuse(3, &events));
        assert_eq!(limits.refused(), 2);
        events.close();
        let crate::events::Batch::Events(got) = stream.next_batch(8, None) else {
            panic!("expected the refusals as events");
        };
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[1].detail.as_deref(),
            Some("3 connections open (--max-connections 2)")
        );
    }

    #[test]
    fn the_soft_fd_limit_reaches_the_hard_one() {
        let soft = raise_fd_limit().expect("rlimit");
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: as above.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
        assert_eq!(lim.rlim_cur, lim.rlim_max);
        assert_eq!(soft, lim.rlim_cur);
    }
}
