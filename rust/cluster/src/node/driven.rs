//! A node's runtimes: a current-thread tokio runtime driven by one thread of
//! its own ([`Driven`]), as a single server's is (`beanpole_engine`'s
//! `server/engine.rs`). Every task, timer and socket event of the node's Raft
//! (its core, peer server, leadership task and a leader's term server) is
//! handled on that thread without a multi-thread runtime's work-stealing
//! machinery, which a runtime of one worker pays for on every wakeup. Nothing
//! on it may block for long: a follower's append on a slow disk goes to the
//! log's writer thread (`logstore/ops.rs`).

use std::future::Future;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::runtime::{Builder, Handle, Runtime};
use tokio::sync::oneshot;

/// A current-thread runtime and the thread that drives it.
#[derive(Debug)]
pub struct Driven {
    /// Dropped first: the driving thread stops before the runtime goes.
    driver: Driver,
    /// Shared with the driving thread, which runs it until told to stop.
    runtime: Arc<Runtime>,
}

/// The driving thread, stopped and joined when dropped.
#[derive(Debug)]
struct Driver {
    /// Tells the thread to stop. A oneshot: said once.
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Driven {
    /// A runtime with I/O and timers, driven by a thread named `name`.
    pub fn start(name: &str) -> std::io::Result<Driven> {
        let runtime = Arc::new(Builder::new_current_thread().enable_all().build()?);
        let (stop, stopped) = oneshot::channel::<()>();
        let driving = Arc::clone(&runtime);
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                // Sent or dropped, the stop ends the drive.
                let _ = driving.block_on(stopped);
            })?;
        Ok(Driven {
            driver: Driver {
                stop: Some(stop),
                thread: Some(thread),
            },
            runtime,
        })
    }

    /// The runtime's handle, to spawn on it from anywhere.
    pub fn handle(&self) -> &Handle {
        self.runtime.handle()
    }

    /// Run `f` to completion from the calling thread (the driving thread
    /// runs the runtime's tasks meanwhile).
    pub fn block_on<F: Future>(&self, f: F) -> F::Output {
        self.runtime.block_on(f)
    }

    /// Stop the driving thread, then shut the runtime down, waiting at most
    /// `timeout` for its blocking tasks.
    pub fn shutdown_timeout(self, timeout: Duration) {
        let Driven { driver, runtime } = self;
        drop(driver);
        if let Ok(runtime) = Arc::try_unwrap(runtime) {
            runtime.shutdown_timeout(timeout);
        }
    }
}
