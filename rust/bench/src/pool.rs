//! Where the tasks run: one current-thread runtime per OS thread (tasks dealt round-robin)
//! or one multi-thread runtime.

use std::future::Future;
use std::pin::Pin;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::runtime::{Builder, Runtime};
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};

use crate::args::RuntimeKind;

pub type Job = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

#[derive(Debug)]
pub enum Pool {
    Current {
        senders: Vec<UnboundedSender<Job>>,
        threads: Vec<JoinHandle<()>>,
        next: usize,
    },
    Multi(Runtime),
}

impl Pool {
    pub fn new(kind: RuntimeKind, threads: usize) -> std::io::Result<Pool> {
        match kind {
            RuntimeKind::Multi => Ok(Pool::Multi(
                Builder::new_multi_thread()
                    .worker_threads(threads)
                    .enable_all()
                    .build()?,
            )),
            RuntimeKind::Current => {
                let mut senders = Vec::with_capacity(threads);
                let mut handles = Vec::with_capacity(threads);
                for i in 0..threads {
                    let rt = Builder::new_current_thread().enable_all().build()?;
                    let (tx, mut rx) = unbounded_channel::<Job>();
                    senders.push(tx);
                    handles.push(
                        std::thread::Builder::new()
                            .name(format!("bench-{i}"))
                            .spawn(move || {
                                rt.block_on(async move {
                                    while let Some(job) = rx.recv().await {
                                        tokio::spawn(job);
                                    }
                                });
                            })?,
                    );
                }
                Ok(Pool::Current {
                    senders,
                    threads: handles,
                    next: 0,
                })
            }
        }
    }

    pub fn spawn(&mut self, job: Job) {
        match self {
            Pool::Multi(rt) => {
                rt.spawn(job);
            }
            Pool::Current { senders, next, .. } => {
                let i = *next % senders.len();
                *next += 1;
                // A send fails only when that thread has ended; the task's result is then
                // missing and the main thread reports it.
                let _ = senders[i].send(job);
            }
        }
    }

    /// Stop the runtimes; tasks still running are dropped (their sockets closed).
    pub fn shutdown(self) {
        match self {
            Pool::Multi(rt) => rt.shutdown_timeout(Duration::from_secs(1)),
            Pool::Current {
                senders, threads, ..
            } => {
                drop(senders);
                for t in threads {
                    let _ = t.join();
                }
            }
        }
    }
}
