//! The read threads: a fixed few running the contract's calls into sled and
//! the journal for async callers. A burst queues for threads already running,
//! where tokio's blocking pool would wake or start one each (which cost 23% of
//! the conversations a second on two cores; docs/performance.md).
//!
//! Owns: the job queue and its threads. Must never: run a job on the caller's
//! thread, or let a panicking job take its thread down with it.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::RwLock;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};
use tokio::sync::oneshot;

use crate::error::{LedgerError, Result};

/// Threads reading for async callers: one per core of the small hosts.
pub const READ_THREADS: usize = 2;

type Job = Box<dyn FnOnce() + Send>;

/// The queue the read threads drain; closed when the store closes.
#[derive(Default)]
pub(crate) struct ReadThreads {
    jobs: RwLock<Option<Sender<Job>>>,
}

impl ReadThreads {
    /// Starts [`READ_THREADS`] threads draining this queue.
    pub(crate) fn start(&self) -> std::io::Result<Vec<JoinHandle<()>>> {
        let (sender, receiver) = crossbeam_channel::unbounded();
        let handles = (0..READ_THREADS)
            .map(|_| {
                let jobs = receiver.clone();
                std::thread::Builder::new()
                    .name("ledger-reader".into())
                    .spawn(move || drain(jobs))
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        *self.jobs.write().unwrap_or_else(|p| p.into_inner()) = Some(sender);
        Ok(handles)
    }

    /// Closes the queue: the threads finish what is queued and end.
    pub(crate) fn close(&self) {
        self.jobs.write().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// Runs `work` on a read thread and returns its result.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (reply, answer) = oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = reply.send(work());
        });
        {
            let jobs = self.jobs.read().unwrap_or_else(|p| p.into_inner());
            let sender = jobs.as_ref().ok_or(LedgerError::Closed)?;
            sender.send(job).map_err(|_| LedgerError::Closed)?;
        }
        // A job that panicked dropped its reply unsent.
        answer.await.map_err(|_| LedgerError::Closed)?
    }
}

fn drain(jobs: Receiver<Job>) {
    for job in jobs {
        if catch_unwind(AssertUnwindSafe(job)).is_err() {
            tracing::error!("a ledger read panicked; its caller gets an error");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn jobs_run_off_the_caller_and_a_panic_fails_only_its_own_call() {
        let threads = ReadThreads::default();
        let handles = threads.start().unwrap();
        let caller = std::thread::current().id();
        let ran_on = threads.run(|| Ok(std::thread::current().id())).await;
        assert_ne!(ran_on.unwrap(), caller);
        let panicked = threads.run::<()>(|| panic!("a broken read")).await;
        assert!(matches!(panicked, Err(LedgerError::Closed)), "{panicked:?}");
        // Every thread is still there to take the next jobs.
        for n in 0..(READ_THREADS as u64 * 4) {
            assert_eq!(threads.run(move || Ok(n)).await.unwrap(), n);
        }
        threads.close();
        assert!(matches!(
            threads.run(|| Ok(())).await,
            Err(LedgerError::Closed)
        ));
        for handle in handles {
            handle.join().unwrap();
        }
    }
}
