//! Group commit, on the writer's thread: a sync holds the writer, and what
//! arrives meanwhile is the next round, and so the next group.
//!
//! Owns: the waiters of rounds not yet durable, the choice after each round
//! between syncing now and holding them for a fuller group, and one commit
//! (one `fdatasync`, then its waiters resolved). Must never: resolve a waiter
//! before the sync covering its round returned, or with success after a
//! failed write or sync.

use std::sync::atomic::Ordering;
use std::time::Instant;

use tokio::sync::oneshot;

use crate::AppendOutcome;
use crate::error::LedgerError;
use crate::local::Shared;
use crate::local::error::{LocalError, Result};
use crate::local::watermark::Watermark;

/// Longest a group is held for its writers, in µs (a sync costs 100–300 µs).
pub const GROUP_LINGER_US: u64 = 250;

/// Someone waiting for a journaled round to be durable.
pub(crate) enum Waiter {
    Append(oneshot::Sender<Result<AppendOutcome>>, AppendOutcome),
    Flush(oneshot::Sender<Result<()>>),
}

impl Waiter {
    pub(crate) fn resolve(self, result: Result<()>) {
        // A caller that stopped waiting (dropped its future) is not an error.
        match self {
            Waiter::Append(reply, outcome) => {
                let _ = reply.send(result.map(|()| outcome));
            }
            Waiter::Flush(reply) => {
                let _ = reply.send(result);
            }
        }
    }
}

/// The durable waiters held, and the size of the last group committed.
#[derive(Default)]
pub(crate) struct Group {
    held: Vec<Waiter>,
    previous: usize,
}

impl Group {
    /// Adds a round's `waiters`; whether to sync now: nothing waits, and the
    /// group is half the last or more (writers acknowledged together return).
    pub(crate) fn settle(&mut self, waiters: Vec<Waiter>, nothing_waiting: bool) -> bool {
        if self.held.is_empty() {
            // Moved, not copied: a lone writer's group allocates nothing.
            self.held = waiters;
        } else {
            self.held.extend(waiters);
        }
        !self.held.is_empty() && nothing_waiting && self.held.len() * 2 >= self.previous
    }

    /// Whether waiters are held.
    pub(crate) fn holds(&self) -> bool {
        !self.held.is_empty()
    }

    /// The waiters held, for a commit now.
    pub(crate) fn take(&mut self) -> Vec<Waiter> {
        self.previous = self.held.len();
        std::mem::take(&mut self.held)
    }
}

/// One sync for all journaled, then `waiters` resolved; now and then the
/// watermark advanced.
pub(crate) fn commit(shared: &Shared, waiters: Vec<Waiter>, watermark: &mut Watermark) {
    let started = Instant::now();
    // Read before the sync, which covers every record below it.
    let covered = shared.journaled_next_global.load(Ordering::Acquire);
    // A later sync may succeed without the pages a failed one dropped.
    let result = match shared.poisoned() {
        Some(reason) => Err(LedgerError::Poisoned { reason }.into()),
        None => shared.make_durable(),
    };
    let synced = started.elapsed();
    shared
        .stats
        .sync_micros
        .fetch_add(synced.as_micros() as u64, Ordering::Relaxed);
    static METRICS: ledgerwire_foundations::telemetry::Kept<FlushMetrics> =
        ledgerwire_foundations::telemetry::Kept::new();
    METRICS.with(FlushMetrics::register, |metrics| {
        metrics.flushes.increment(1);
        metrics.seconds.record(synced.as_secs_f64());
        metrics.group.record(waiters.len() as f64);
    });
    shared.stats.flushes.fetch_add(1, Ordering::Relaxed);
    shared
        .stats
        .flushed_waiters
        .fetch_add(waiters.len() as u64, Ordering::Relaxed);
    match result {
        Ok(()) => {
            for waiter in waiters {
                if let Waiter::Append(_, outcome) = &waiter {
                    let end = outcome.first_global_position + outcome.next_position
                        - outcome.first_position;
                    invariant!(
                        end <= covered,
                        "an append ending at global position {end} acknowledged by a sync covering {covered}"
                    );
                }
                waiter.resolve(Ok(()));
            }
            // After the waiters: it never delays an acknowledgement.
            watermark.advance_now_and_then(covered);
        }
        Err(error) => {
            if !matches!(error, LocalError::Ledger(LedgerError::Poisoned { .. })) {
                shared.poison(format!("flush failed: {error}"));
            }
            for waiter in waiters {
                waiter.resolve(Err(LedgerError::Poisoned {
                    reason: error.to_string(),
                }
                .into()));
            }
        }
    }
}

/// The flush metrics' handles, registered once, not per flush.
struct FlushMetrics {
    flushes: metrics::Counter,
    seconds: metrics::Histogram,
    group: metrics::Histogram,
}

impl FlushMetrics {
    fn register() -> Self {
        use ledgerwire_foundations::telemetry::{
            LEDGER_FLUSH_SECONDS, LEDGER_FLUSHES, LEDGER_GROUP_COMMIT,
        };
        Self {
            flushes: metrics::counter!(LEDGER_FLUSHES),
            seconds: metrics::histogram!(LEDGER_FLUSH_SECONDS),
            group: metrics::histogram!(LEDGER_GROUP_COMMIT),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiters(n: usize) -> Vec<Waiter> {
        (0..n)
            .map(|_| Waiter::Flush(oneshot::channel().0))
            .collect()
    }

    #[test]
    fn the_writer_holds_a_small_group_and_commits_it_once_it_is_whole() {
        let mut group = Group::default();
        assert!(!group.settle(Vec::new(), true), "nothing to sync");
        assert!(group.settle(waiters(8), true));
        assert_eq!(group.take().len(), 8);
        // Two of the eight are back: held, not synced.
        assert!(!group.settle(waiters(2), true));
        // Five more while commands still wait: still held (the writer
        // takes the commands first).
        assert!(!group.settle(waiters(5), false));
        assert!(group.settle(waiters(1), true));
        assert_eq!(group.take().len(), 8);
        // A whole group while commands wait is held too: it is synced
        // with theirs.
        assert!(!group.settle(waiters(8), false));
        assert!(group.holds());
        assert_eq!(group.take().len(), 8);
        assert!(!group.holds());
    }
}
