//! The tokio runtime a server runs on, and who drives it.
//!
//! With one worker the server gets a current-thread runtime driven by one thread of
//! its own: every task, timer and socket event is handled on that thread without the
//! work-stealing machinery of a multi-thread runtime (no cross-thread queue, no
//! worker parking protocol, no per-batch scheduler statistics), which costs fewer
//! instructions per wakeup. With more workers tokio's multi-thread runtime drives
//! itself.
//!
//! A cluster leader's term server runs on its node's Raft runtime instead
//! ([`Engine::on`]): a pass's records then reach the proposer, and a commit the
//! waiting connections, as a task's wakeup on the same thread rather than a wakeup
//! of another thread (measured with `bench/cluster_ab.py`: 0.89-0.94x the three
//! nodes' CPU per durable put). Such a server cannot drop its tasks by ending the
//! runtime, so each task it spawns ends when the server is given up on
//! (`Shared::spawn`).

use std::future::Future;
use std::io;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::runtime::{Builder, Handle, Runtime};
use tokio::sync::{oneshot, watch};

/// Name of the server's threads.
const THREAD_NAME: &str = "beanpole";

/// A runtime that is built but not yet serving.
#[derive(Debug)]
pub struct Engine {
    runtime: Kind,
}

#[derive(Debug)]
enum Kind {
    /// A runtime of the server's own; `true` when one thread of ours drives it.
    Own(Runtime, bool),
    /// Somebody else's runtime, shared, and the tasks the server runs on it.
    Borrowed(Arc<Tasks>),
}

/// The tasks a server runs on a shared runtime: how many are running, and the
/// flag that ends them when the server is given up on.
#[derive(Debug)]
pub struct Tasks {
    handle: Handle,
    /// A watch: one change seen by every task, also by one that starts waiting
    /// after it.
    abandon: watch::Sender<bool>,
    /// A mutex and condvar: the count changes on the runtime's threads, and the
    /// one waiting for none is not on the runtime.
    running: Mutex<usize>,
    none: Condvar,
}

impl Tasks {
    /// Spawn `task` on the runtime; it ends early once the server is abandoned.
    pub fn spawn<F>(self: &Arc<Self>, task: F) -> tokio::task::JoinHandle<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        *self.running.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        let counted = Counted(Arc::clone(self));
        let mut abandoned = self.abandon.subscribe();
        self.handle.spawn(async move {
            // Dropped last, after the task: counted out once the task is gone,
            // however it ends (done, abandoned, aborted, or the runtime's end).
            let _counted = counted;
            tokio::select! {
                () = task => {}
                _ = abandoned.wait_for(|&gone| gone) => {}
            }
        })
    }

    /// End every task, and wait at most `timeout` for them to be gone.
    fn abandon(&self, timeout: Duration) {
        self.abandon.send_replace(true);
        let running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = self
            .none
            .wait_timeout_while(running, timeout, |n| *n > 0)
            .unwrap_or_else(PoisonError::into_inner);
    }
}

/// One running task of [`Tasks`].
struct Counted(Arc<Tasks>);

impl Drop for Counted {
    fn drop(&mut self) {
        let mut running = self
            .0
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *running -= 1;
        if *running == 0 {
            self.0.none.notify_all();
        }
    }
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
            runtime: Kind::Own(builder.build()?, single),
        })
    }

    /// The runtime `handle` runs, shared with whoever else runs on it.
    pub fn on(handle: Handle) -> Engine {
        Engine {
            runtime: Kind::Borrowed(Arc::new(Tasks {
                handle,
                abandon: watch::channel(false).0,
                running: Mutex::new(0),
                none: Condvar::new(),
            })),
        }
    }

    /// On a shared runtime, the server's tasks (`Shared::spawn`): with a runtime
    /// of its own, the runtime's end ends them.
    pub fn tasks(&self) -> Option<Arc<Tasks>> {
        match &self.runtime {
            Kind::Own(..) => None,
            Kind::Borrowed(tasks) => Some(Arc::clone(tasks)),
        }
    }

    /// The runtime's handle (for sessions handed over from other threads).
    pub fn handle(&self) -> Handle {
        match &self.runtime {
            Kind::Own(runtime, _) => runtime.handle().clone(),
            Kind::Borrowed(tasks) => tasks.handle.clone(),
        }
    }

    /// Run `f` in the runtime's context on the calling thread (for binding sockets
    /// before serving starts).
    pub fn block_on<F: Future>(&self, f: F) -> F::Output {
        match &self.runtime {
            Kind::Own(runtime, _) => runtime.block_on(f),
            Kind::Borrowed(tasks) => tasks.handle.block_on(f),
        }
    }

    /// Start running `server`; it runs until it completes or [`Running::stop`] gives
    /// up waiting for it.
    pub fn run<F>(self, server: F) -> io::Result<Running>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let (runtime, single) = match self.runtime {
            Kind::Own(runtime, single) => (runtime, single),
            Kind::Borrowed(tasks) => {
                tasks.spawn(server);
                return Ok(Running::Shared(tasks));
            }
        };
        if !single {
            runtime.spawn(server);
            return Ok(Running::Pool(runtime));
        }
        // A oneshot: the driver is told to give up at most once.
        let (abandon, abandoned) = oneshot::channel::<()>();
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
    /// It runs on a runtime shared with others.
    Shared(Arc<Tasks>),
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
            // The tasks end on the runtime's threads as it goes on.
            Running::Shared(tasks) => tasks.abandon(timeout),
        }
    }
}
