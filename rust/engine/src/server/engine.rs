//! The tokio runtime a server runs on, and who drives it.
//!
//! With one worker the server gets a current-thread runtime driven by one thread of
//! its own: every task, timer and socket event is handled on that thread without the
//! work-stealing machinery of a multi-thread runtime (no cross-thread queue, no
//! worker parking protocol, no per-batch scheduler statistics), which costs fewer
//! instructions per wakeup. With more workers tokio's multi-thread runtime drives
//! itself.

use std::future::Future;
use std::io;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::runtime::{Builder, Runtime};
use tokio::sync::oneshot;

/// Name of the server's threads.
const THREAD_NAME: &str = "beanpole";

/// A runtime that is built but not yet serving.
#[derive(Debug)]
pub struct Engine {
    runtime: Runtime,
    single: bool,
}

impl Engine {
    /// A current-thread runtime for one worker, a multi-thread one for more.
    pub fn new(workers: usize) -> io::Result<Engine> {
        let single = workers <= 1;
        let mut builder = if single {
            Builder::new_current_thread()
        } else {
            let mut b = Builder::new_multi_thread();
            b.worker_threads(workers);
            b
        };
        builder.enable_all().thread_name(THREAD_NAME);
        Ok(Engine {
            runtime: builder.build()?,
            single,
        })
    }

    /// Run `f` in the runtime's context on the calling thread (for binding sockets
    /// before serving starts).
    pub fn block_on<F: Future>(&self, f: F) -> F::Output {
        self.runtime.block_on(f)
    }

    /// Start running `server`; it runs until it completes or [`Running::stop`] gives
    /// up waiting for it.
    pub fn run<F>(self, server: F) -> io::Result<Running>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        if !self.single {
            self.runtime.spawn(server);
            return Ok(Running::Pool(self.runtime));
        }
        // A oneshot: the driver is told to give up at most once.
        let (abandon, abandoned) = oneshot::channel::<()>();
        let runtime = self.runtime;
        let thread = std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || {
                runtime.block_on(async {
                    tokio::select! {
                        () = server => {}
                        _ = abandoned => {}
                    }
                });
                // Shutting down drops every task still left (connections stuck
                // writing to a client that does not read), closing their sockets; the
                // server starts no blocking work, so there is nothing to wait for.
                runtime.shutdown_background();
            })?;
        Ok(Running::Single { thread, abandon })
    }
}

/// A runtime that is serving.
#[derive(Debug)]
pub enum Running {
    /// tokio's worker threads drive it.
    Pool(Runtime),
    /// One thread of ours drives it.
    Single {
        thread: JoinHandle<()>,
        abandon: oneshot::Sender<()>,
    },
}

impl Running {
    /// End the runtime: drop the tasks still running (the caller has already given
    /// the server future its chance to finish) and wait for the runtime's threads,
    /// for blocking work at most `timeout` (the server starts none).
    pub fn stop(self, timeout: Duration) {
        match self {
            Running::Pool(rt) => rt.shutdown_timeout(timeout),
            Running::Single { thread, abandon } => {
                let _ = abandon.send(());
                // Dropping tasks does not block, so the thread ends promptly.
                let _ = thread.join();
            }
        }
    }
}
