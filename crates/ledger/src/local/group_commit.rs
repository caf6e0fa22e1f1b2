//! Group commit: who syncs the journal for which durable appends.
//!
//! Owns: the waiters of journaled rounds that are not durable yet, the
//! decision after each round between syncing now on the caller's thread,
//! holding the waiters for a fuller group, and handing them to the
//! flusher thread; the flusher thread; and one commit (one `fdatasync`
//! for a whole group, then every waiter of it resolved).
//! Must never: resolve a waiter before the sync that covers its round
//! returned, resolve one with success after a failed write or sync, or
//! let two commits run at once (whoever starts one sets `busy` under the
//! queue's lock, and nobody starts one while it is set).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::ledger::AppendOutcome;
use crate::ledger::error::LedgerError;
use crate::ledger::local::Shared;
use crate::ledger::local::error::{LocalError, Result};

/// Longest a group waits for the rest of its writers, in microseconds. A
/// sync of a group costs 100–300 µs on the development machine; waiting a fraction of that for writers
/// that are on their way turns two syncs into one.
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

/// What becomes of the durable waiters of a round just written.
pub(crate) enum Settled {
    /// Nothing waits for a sync.
    Nothing,
    /// The caller syncs these now, on its own thread (then calls
    /// [`FlushQueue::commit_ended`]).
    CommitNow(Vec<Waiter>),
    /// Held for a fuller group: the writer waits for more commands until
    /// its linger ends, then calls [`FlushQueue::release_held`].
    Held,
    /// Handed to the flusher thread.
    Queued,
}

/// Durable appends waiting for a sync.
#[derive(Default)]
pub(crate) struct FlushQueue {
    state: Mutex<FlushQueueState>,
    ready: Condvar,
}

#[derive(Default)]
struct FlushQueueState {
    /// Handed to the flusher.
    waiters: Vec<Waiter>,
    /// Held by the writer for a fuller group; its next settle takes them
    /// with the round's own. Only ever
    /// held while no commit is under way and nothing is handed to the
    /// flusher: every other decision hands them over too.
    held: Vec<Waiter>,
    closed: bool,
    /// A commit is under way (the flusher's or one inline).
    busy: bool,
    /// Waiters of the last group committed.
    previous_group: usize,
    /// While the flusher waits: how many queued waiters make it worth
    /// waking (1 when it waits for any, the rest of its group when it
    /// lingers); 0 while it is busy. A push below it costs no system call.
    wake_at: usize,
}

impl FlushQueueState {
    /// No commit is under way and the flusher has nothing to take.
    fn flusher_idle(&self) -> bool {
        !self.busy && self.waiters.is_empty()
    }

    fn hand_to_flusher(&mut self, ready: &Condvar) {
        self.waiters.append(&mut self.held);
        if self.wake_at > 0 && self.waiters.len() >= self.wake_at {
            ready.notify_one();
        }
    }

    fn take_for_inline_commit(&mut self) -> Vec<Waiter> {
        self.busy = true;
        self.previous_group = self.held.len();
        std::mem::take(&mut self.held)
    }
}

impl FlushQueue {
    /// Decides, after a round, how its durable `waiters` (with any the
    /// writer holds) get synced. `nothing_waiting`: no command waits to
    /// be written.
    ///
    /// A group is synced on the caller's thread (no hand-off) when no
    /// commit is under way, nothing else waits to be written and it is at
    /// least half the last group (the writers acknowledged together come
    /// back together); held while it is smaller, since the rest are most
    /// likely between their acknowledgement and their next append; and
    /// handed to the flusher when a commit is under way (it follows that
    /// one) or commands wait (the writer goes on with them meanwhile).
    pub(crate) fn settle(&self, waiters: Vec<Waiter>, nothing_waiting: bool) -> Settled {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.held.is_empty() {
            // Moved, not copied: a lone writer's group allocates nothing.
            state.held = waiters;
        } else {
            state.held.extend(waiters);
        }
        let group = state.held.len();
        if group == 0 {
            return Settled::Nothing;
        }
        let flusher_idle = state.flusher_idle();
        let full = group >= state.previous_group;
        if flusher_idle && nothing_waiting && group * 2 >= state.previous_group {
            return Settled::CommitNow(state.take_for_inline_commit());
        }
        if flusher_idle && !full {
            return Settled::Held;
        }
        state.hand_to_flusher(&self.ready);
        Settled::Queued
    }

    /// Ends the writer's linger: what it holds is synced on its thread
    /// (`CommitNow`) when no commit is under way, else handed to the
    /// flusher.
    pub(crate) fn release_held(&self) -> Settled {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.held.is_empty() {
            return Settled::Nothing;
        }
        if state.flusher_idle() {
            return Settled::CommitNow(state.take_for_inline_commit());
        }
        state.hand_to_flusher(&self.ready);
        Settled::Queued
    }

    pub(crate) fn close(&self) {
        let mut guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let state = &mut *guard;
        state.closed = true;
        state.waiters.append(&mut state.held);
        self.ready.notify_one();
    }

    /// Blocks until there are waiters and no commit is under way (all of
    /// them are taken) or the queue is closed and drained (`None`).
    fn take(&self) -> Option<Vec<Waiter>> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if !state.waiters.is_empty() && !state.busy {
                state.busy = true;
                return Some(std::mem::take(&mut state.waiters));
            }
            if state.closed && state.waiters.is_empty() {
                return None;
            }
            state.wake_at = 1;
            state = self.ready.wait(state).unwrap_or_else(|p| p.into_inner());
            state.wake_at = 0;
        }
    }

    /// A commit ended (the flusher's or one on a caller's thread).
    pub(crate) fn commit_ended(&self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.busy = false;
        if !state.waiters.is_empty() {
            // Handed over while the inline commit ran.
            self.ready.notify_one();
        }
    }

    /// Waiters of the last group committed, at least 1.
    fn previous_group(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .previous_group
            .max(1)
    }

    /// Remembers the size of a group the flusher committed.
    fn committed(&self, group: usize) {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .previous_group = group;
    }

    /// Adds to `waiters` what arrives until there are `expected` of them or
    /// `linger` has passed, whichever is first.
    fn gather(&self, waiters: &mut Vec<Waiter>, expected: usize, linger: Duration) {
        let deadline = Instant::now() + linger;
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            waiters.append(&mut state.waiters);
            let now = Instant::now();
            if waiters.len() >= expected || state.closed || now >= deadline {
                return;
            }
            state.wake_at = expected - waiters.len();
            state = self
                .ready
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            state.wake_at = 0;
        }
    }
}

/// The flusher thread: one sync per group handed to it.
pub(crate) fn run_flusher(shared: Arc<Shared>, queue: Arc<FlushQueue>) {
    // When only a few of the last group's writers are back, the rest are
    // most likely between their acknowledgement and their next append, so
    // the flush lingers briefly for them (as PostgreSQL's commit_delay
    // does); a lone writer (a group of one) never waits.
    while let Some(mut waiters) = queue.take() {
        let previous_group = queue.previous_group();
        if waiters.len() * 2 < previous_group {
            queue.gather(
                &mut waiters,
                previous_group,
                Duration::from_micros(GROUP_LINGER_US),
            );
        }
        queue.committed(waiters.len());
        commit(&shared, waiters);
        queue.commit_ended();
    }
}

/// Makes everything journaled so far durable with one sync of the journal
/// and then resolves `waiters` (each was journaled before this call), and
/// now and then advances the watermark. What the flusher does for each
/// group, and a caller for a group it commits itself.
pub(crate) fn commit(shared: &Shared, waiters: Vec<Waiter>) {
    let started = Instant::now();
    // Read before the flush: every record below it was journaled before
    // it began, so the flush covers it.
    let covered = shared.journaled_next_global.load(Ordering::Acquire);
    // After a failed write or sync, a later sync may succeed without
    // the lost pages (the kernel drops them on a writeback error), so
    // nothing is acknowledged once the ledger is poisoned.
    let result = match shared.poisoned() {
        Some(reason) => Err(LedgerError::Poisoned { reason }.into()),
        None => shared.make_durable(),
    };
    let synced = started.elapsed();
    shared
        .stats
        .sync_micros
        .fetch_add(synced.as_micros() as u64, Ordering::Relaxed);
    static METRICS: crate::telemetry::Kept<FlushMetrics> = crate::telemetry::Kept::new();
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
                waiter.resolve(Ok(()));
            }
            // After the waiters: the watermark never delays an
            // acknowledgement.
            shared.advance_watermark_now_and_then(covered);
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

/// The flush metrics' handles: each commit records them before it
/// resolves its waiters, so they are registered once, not per flush.
struct FlushMetrics {
    flushes: metrics::Counter,
    seconds: metrics::Histogram,
    group: metrics::Histogram,
}

impl FlushMetrics {
    fn register() -> Self {
        use crate::telemetry::{LEDGER_FLUSH_SECONDS, LEDGER_FLUSHES, LEDGER_GROUP_COMMIT};
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

    fn waiter() -> Waiter {
        Waiter::Flush(oneshot::channel().0)
    }

    fn waiters(n: usize) -> Vec<Waiter> {
        (0..n).map(|_| waiter()).collect()
    }

    /// Longer than any test here may take: a wait that ran to it failed.
    const NEVER: Duration = Duration::from_secs(60);

    /// The queue's decision by name, with the group's size when it is
    /// synced on the caller's thread.
    fn decided(settled: Settled) -> (&'static str, usize) {
        match settled {
            Settled::Nothing => ("nothing", 0),
            Settled::CommitNow(group) => ("commit now", group.len()),
            Settled::Held => ("held", 0),
            Settled::Queued => ("queued", 0),
        }
    }

    #[test]
    fn a_waiting_flusher_takes_the_first_group_handed_to_it() {
        let queue = FlushQueue::default();
        std::thread::scope(|scope| {
            let taker = scope.spawn(|| queue.take().map(|group| group.len()));
            // Commands wait: the group goes to the flusher.
            assert_eq!(decided(queue.settle(waiters(1), false)), ("queued", 0));
            assert_eq!(taker.join().unwrap(), Some(1));
        });
    }

    /// One step of a scripted write path, with the decision it expects.
    enum Step {
        /// A round's durable waiters: how many, whether nothing else
        /// waits to be written; then the decision expected.
        Settle(usize, bool, (&'static str, usize)),
        /// The writer's linger ends; the decision expected.
        Release((&'static str, usize)),
        /// The commit on the caller's thread ends.
        CommitEnds,
    }

    fn play(queue: &FlushQueue, steps: &[Step]) {
        for (index, step) in steps.iter().enumerate() {
            let (got, expected) = match *step {
                Step::Settle(count, nothing_waiting, expected) => (
                    decided(queue.settle(waiters(count), nothing_waiting)),
                    expected,
                ),
                Step::Release(expected) => (decided(queue.release_held()), expected),
                Step::CommitEnds => {
                    queue.commit_ended();
                    continue;
                }
            };
            assert_eq!(got, expected, "step {index}");
        }
    }

    #[test]
    fn the_writer_holds_a_small_group_and_commits_it_once_it_is_whole() {
        use Step::*;
        play(
            &FlushQueue::default(),
            &[
                Settle(8, true, ("commit now", 8)),
                CommitEnds,
                // Two of the eight are back: held, not synced.
                Settle(2, true, ("held", 0)),
                // Five more while commands still wait: still held (the
                // writer takes the commands first).
                Settle(5, false, ("held", 0)),
                Settle(1, true, ("commit now", 8)),
                CommitEnds,
                // A whole group while commands wait goes to the flusher,
                // and the writer goes on with the commands.
                Settle(8, false, ("queued", 0)),
            ],
        );
    }

    #[test]
    fn a_commit_under_way_sends_the_next_groups_to_the_flusher() {
        use Step::*;
        let queue = FlushQueue::default();
        play(
            &queue,
            &[
                Settle(4, true, ("commit now", 4)),
                // Meanwhile the writer's next groups follow that commit.
                Settle(1, true, ("queued", 0)),
                Settle(2, true, ("queued", 0)),
                CommitEnds,
            ],
        );
        assert_eq!(queue.take().map(|group| group.len()), Some(3));
    }

    #[test]
    fn a_released_hold_commits_on_the_writer_or_goes_to_the_flusher() {
        use Step::*;
        let queue = FlushQueue::default();
        play(
            &queue,
            &[
                Release(("nothing", 0)),
                Settle(6, true, ("commit now", 6)),
                CommitEnds,
                Settle(2, true, ("held", 0)),
                Release(("commit now", 2)),
                CommitEnds,
                // Below the last group (now 2) while commands wait: held.
                Settle(1, false, ("held", 0)),
            ],
        );
        // Closing hands what is held to the flusher, which drains it.
        queue.close();
        assert_eq!(queue.take().map(|group| group.len()), Some(1));
        assert!(queue.take().is_none());
    }

    #[test]
    fn a_lingering_flush_ends_when_its_group_is_complete_not_at_its_deadline() {
        let queue = FlushQueue::default();
        std::thread::scope(|scope| {
            let gatherer = scope.spawn(|| {
                let started = Instant::now();
                let mut group = vec![waiter()];
                queue.gather(&mut group, 4, NEVER);
                (group.len(), started.elapsed())
            });
            // One below the rest of the group, then the rest of it.
            let mut state = queue.state.lock().unwrap();
            state.waiters.push(waiter());
            drop(state);
            queue.settle(waiters(2), false);
            let (gathered, waited) = gatherer.join().unwrap();
            assert_eq!(gathered, 4);
            assert!(
                waited < NEVER / 2,
                "it waited {waited:?}, as if never woken"
            );
        });
    }

    #[test]
    fn closing_ends_a_lingering_flush_and_a_waiting_one() {
        let queue = FlushQueue::default();
        std::thread::scope(|scope| {
            let gatherer = scope.spawn(|| {
                let mut group = vec![waiter()];
                queue.gather(&mut group, 8, NEVER);
                group.len()
            });
            queue.close();
            assert_eq!(gatherer.join().unwrap(), 1);
            assert!(queue.take().is_none());
        });
    }
}
