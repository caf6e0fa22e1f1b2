//! The indexer: applies the rounds the writer journaled to sled, in
//! order, on its own thread, and publishes where the rounds it applied
//! end.
//!
//! Owns: the queue of rounds journaled but not yet in sled (bounded in
//! bytes: a writer that gets too far ahead waits), their inserts, the
//! stored next global position (`m/next_global`, once per batch of
//! rounds), publishing `applied_next_global`, and handing each checkpoint
//! on once every round before it is in sled. Must never: apply a round
//! before one journaled earlier, publish an end before every record below
//! it is inserted, or pass a checkpoint on before sled holds the rounds it
//! covers.
//!
//! Why a thread of its own: sled's inserts were about four fifths of the
//! writer's time (node copies and splits on every insert), all of it
//! before the round's sync could start. Durability does not need them:
//! the journal entry is the durability point, and until the indexer has
//! applied a record, readers find it among the recent records
//! (`ledger::recent` never drops one the indexer has not applied).

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::ledger::Shared;
use crate::ledger::entry;
use crate::ledger::record::{NEXT_GLOBAL_KEY, Record, StreamKey};

/// Most bytes of records journaled but not yet in sled, in bytes; past it
/// the writer waits for the indexer (one round bigger than this is let in
/// alone). It bounds the memory the backlog holds beyond the recent
/// records' own bound.
pub const MAX_UNINDEXED_BYTES: usize = 32 * 1024 * 1024;

/// How long the indexer rests after a batch that emptied its queue, in
/// microseconds, so that the rounds arriving meanwhile make one batch: a
/// server's rounds are small and frequent, and waking the indexer for
/// each cost a context switch a round. While it has a backlog it never
/// rests; readers find what it has not applied among the recent records.
pub const INDEX_LINGER_US: u64 = 500;

/// One round the writer journaled: its records, by stream, in global order.
pub(crate) struct Round {
    pub written: Vec<(StreamKey, Vec<Record>)>,
    /// The global position after the round.
    pub next_global: u64,
    pub bytes: usize,
}

enum Item {
    Round(Round),
    /// The writer started a journal file at this global position: once
    /// every round before it is in sled, sled may be checkpointed and the
    /// older journal files deleted.
    Checkpoint(u64),
}

/// The rounds waiting for the indexer.
#[derive(Default)]
pub(crate) struct IndexQueue {
    state: Mutex<QueueState>,
    /// The indexer waits here for items (signalled only while it waits:
    /// a busy indexer costs a pushing writer no system call).
    work: Condvar,
    /// Writers waiting for room, and callers of `wait_until_applied`,
    /// wait here (signalled only while someone waits).
    progress: Condvar,
}

#[derive(Default)]
struct QueueState {
    items: VecDeque<Item>,
    /// Bytes of the rounds queued or being applied.
    bytes: usize,
    /// Rounds ever queued, and ever applied (or skipped once poisoned).
    queued: u64,
    applied: u64,
    /// The writer queues no more rounds.
    closed: bool,
    /// The indexer's thread ended: nothing queued will be applied.
    gone: bool,
    /// The indexer is waiting for items.
    indexer_idle: bool,
    /// Threads waiting on `progress`.
    progress_waiters: usize,
    /// TEST-ONLY: the indexer takes nothing while set.
    #[cfg(test)]
    paused: bool,
}

impl IndexQueue {
    fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for the indexer to make progress (or go).
    fn wait_for_progress<'a>(
        &self,
        mut state: MutexGuard<'a, QueueState>,
    ) -> MutexGuard<'a, QueueState> {
        state.progress_waiters += 1;
        let mut state = self.progress.wait(state).unwrap_or_else(|p| p.into_inner());
        state.progress_waiters -= 1;
        state
    }

    /// Wakes the indexer if it waits for items.
    fn wake_indexer(&self, state: &QueueState) {
        if state.indexer_idle {
            self.work.notify_one();
        }
    }

    /// Queues a round, first waiting while the backlog is over
    /// [`MAX_UNINDEXED_BYTES`]. Once the indexer is gone nothing is
    /// queued: it ended because the ledger is poisoned or closing.
    pub(crate) fn push(&self, round: Round) {
        let mut state = self.lock();
        while !state.gone
            && state.queued > state.applied
            && state.bytes + round.bytes > MAX_UNINDEXED_BYTES
        {
            state = self.wait_for_progress(state);
        }
        if state.gone {
            return;
        }
        state.bytes += round.bytes;
        state.queued += 1;
        state.items.push_back(Item::Round(round));
        self.wake_indexer(&state);
    }

    /// Queues a checkpoint at `base`, behind every round queued before.
    pub(crate) fn push_checkpoint(&self, base: u64) {
        let mut state = self.lock();
        state.items.push_back(Item::Checkpoint(base));
        self.wake_indexer(&state);
    }

    /// No more rounds: the indexer applies what is queued and ends.
    pub(crate) fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        self.wake_indexer(&state);
    }

    /// Blocks until every round queued before the call is in sled (or the
    /// indexer is gone).
    pub(crate) fn wait_until_applied(&self) {
        let mut state = self.lock();
        let target = state.queued;
        while state.applied < target && !state.gone {
            state = self.wait_for_progress(state);
        }
    }

    /// Everything queued, or `None` once the queue is closed and empty.
    fn take(&self) -> Option<Vec<Item>> {
        let mut state = self.lock();
        loop {
            #[cfg(test)]
            let paused = state.paused && !state.closed;
            #[cfg(not(test))]
            let paused = false;
            if !state.items.is_empty() && !paused {
                return Some(state.items.drain(..).collect());
            }
            if state.closed {
                return None;
            }
            state.indexer_idle = true;
            state = self.work.wait(state).unwrap_or_else(|p| p.into_inner());
            state.indexer_idle = false;
        }
    }

    /// The indexer is done with `rounds` rounds holding `bytes`; whether
    /// nothing more is queued.
    fn applied(&self, rounds: u64, bytes: usize) -> bool {
        let mut state = self.lock();
        state.applied += rounds;
        state.bytes -= bytes;
        if state.progress_waiters > 0 {
            self.progress.notify_all();
        }
        state.items.is_empty()
    }

    /// TEST-ONLY: holds the indexer back (rounds queue up) or lets it go.
    #[cfg(test)]
    pub(crate) fn pause(&self, paused: bool) {
        let mut state = self.lock();
        state.paused = paused;
        self.wake_indexer(&state);
    }

    fn indexer_gone(&self) {
        let mut state = self.lock();
        state.gone = true;
        self.progress.notify_all();
    }
}

/// Marks the indexer gone when its thread ends, however it ends, so a
/// writer waiting for room never waits for a thread that is gone; an end
/// by panic also poisons the ledger (nothing would reach sled or be
/// checkpointed any more, and the recent records could drop nothing).
struct GoneOnExit<'a>(&'a Shared);

impl Drop for GoneOnExit<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.poison("the indexer stopped".to_owned());
        }
        self.0.index_queue.indexer_gone();
    }
}

/// The indexer thread: takes everything queued, applies the rounds in
/// order, then publishes their end; passes checkpoints on to the
/// checkpointer once what precedes them is published.
pub(crate) fn run_indexer(
    shared: std::sync::Arc<Shared>,
    checkpoints: std::sync::mpsc::Sender<u64>,
) {
    let queue = &shared.index_queue;
    let _gone = GoneOnExit(&shared);
    let mut batch = Batch::default();
    while let Some(items) = queue.take() {
        let (mut rounds, mut bytes) = (0, 0);
        for item in items {
            match item {
                Item::Round(round) => {
                    rounds += 1;
                    bytes += round.bytes;
                    batch.join(round);
                }
                Item::Checkpoint(base) => {
                    batch.apply_and_publish(&shared);
                    let _ = checkpoints.send(base);
                }
            }
        }
        batch.apply_and_publish(&shared);
        shared.stats.index_batches.fetch_add(1, Ordering::Relaxed);
        if queue.applied(rounds, bytes) {
            std::thread::sleep(std::time::Duration::from_micros(INDEX_LINGER_US));
        }
    }
}

/// The rounds taken together, a stream's run joined to the run before
/// it when both are of that stream (so at consecutive positions) before
/// they are cut into entries: a lone writer's rounds of one record each,
/// taken together, cost one insert per entry, not one per round. sled's
/// cost is per insert (a tree walk, and a leaf split every eight inserts
/// into a stream's end). Only neighbours are joined: joining a stream's
/// runs across others would take a map of the batch's streams (a lookup
/// and a key copy for every run), and a server's batch rarely holds one
/// conversation twice. Joining never crosses a
/// published end (the batch is applied and published whole before a
/// checkpoint or the next batch), so every entry lies wholly below or
/// wholly past the end sled recovers, and a replay from that end
/// overwrites whatever sled held past it.
#[derive(Default)]
struct Batch {
    runs: Vec<(StreamKey, Vec<Record>)>,
    /// The global position after the last round joined.
    end: Option<u64>,
}

impl Batch {
    fn join(&mut self, round: Round) {
        for (stream, records) in round.written {
            match self.runs.last_mut() {
                Some((last, run)) if *last == stream => run.extend(records),
                _ => self.runs.push((stream, records)),
            }
        }
        self.end = Some(round.next_global);
    }

    /// Inserts the joined runs and publishes their end (nothing once the
    /// ledger is poisoned), and starts an empty batch.
    fn apply_and_publish(&mut self, shared: &Shared) {
        let end = self.end.take();
        if end.is_some() && shared.poisoned().is_none() {
            match insert_records(&shared.log, &self.runs) {
                Ok(()) => publish(shared, end),
                Err(error) => shared.poison(format!("sled insert failed: {error}")),
            }
        }
        self.runs.clear();
    }
}

/// Stores and publishes the end of the rounds applied: `m/next_global`
/// after their records (sled recovers a prefix of its log, so the stored
/// end never covers a record it lost), then `applied_next_global`, which
/// makes them visible to sled readers.
fn publish(shared: &Shared, end: Option<u64>) {
    let Some(end) = end else {
        return;
    };
    if shared.poisoned().is_some() {
        return;
    }
    if let Err(error) = shared.log.insert(NEXT_GLOBAL_KEY, &end.to_be_bytes()) {
        shared.poison(format!("sled insert failed: {error}"));
        return;
    }
    shared.applied_next_global.store(end, Ordering::Release);
}

/// Inserts the runs of records, one insert per entry (`ledger::entry`).
/// Not one `apply_batch`: sled 0.34 seals and writes out
/// its I/O buffer twice for every batch (a `pwrite` and a
/// `sync_file_range` each, on its thread pool), which cost more than the
/// inserts. Nothing needs the batch's atomicity: the journal entry holds
/// the round whole (a crash replays it on open, idempotent by global
/// position), sled recovers a prefix of its log, and readers see no record
/// at or past the published end.
fn insert_records(log: &sled::Tree, written: &[(StreamKey, Vec<Record>)]) -> sled::Result<()> {
    for entry in entry::entries(written) {
        log.insert(entry.key(), entry.value())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::ledger::record::{self, NewRecord, StreamKey};
    use crate::ledger::{Durability, ExpectedPosition, Ledger, OpenMode};

    fn append(ledger: &Ledger, stream: &StreamKey, payload: u8) {
        let record = NewRecord {
            kind: 1,
            payload: vec![payload],
        };
        ledger
            .append_blocking(
                stream,
                ExpectedPosition::Any,
                vec![record],
                Durability::Durable,
            )
            .expect("append");
    }

    /// The first position of each sled entry of `stream`, with its record
    /// count.
    fn entries(ledger: &Ledger, stream: &StreamKey) -> Vec<(u64, usize)> {
        ledger
            .shared
            .log
            .scan_prefix(record::stream_prefix(stream))
            .map(|entry| {
                let (key, value) = entry.expect("a sled entry");
                let (_, first) = record::parse_record_key(&key).expect("a record key");
                (first, crate::ledger::entry::envelopes(value).count())
            })
            .collect()
    }

    /// Rounds the indexer takes together are stored as one entry where
    /// neighbouring runs are of one stream, and read back whole; rounds
    /// taken apart stay apart.
    #[test]
    fn neighbouring_runs_of_rounds_taken_together_are_one_entry() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let (ledger, _) = Ledger::open(dir.path(), OpenMode::CreateIfMissing).expect("open");
        let (a, b) = (
            StreamKey::new("join/a").expect("a key"),
            StreamKey::new("join/b").expect("a key"),
        );
        ledger.shared.index_queue.pause(true);
        for (stream, payload) in [(&a, 0), (&a, 1), (&b, 2), (&a, 3), (&a, 4)] {
            append(&ledger, stream, payload);
        }
        ledger.shared.index_queue.pause(false);
        ledger.shared.index_queue.wait_until_applied();
        assert_eq!(entries(&ledger, &a), vec![(0, 2), (2, 2)]);
        assert_eq!(entries(&ledger, &b), vec![(0, 1)]);
        // A round applied on its own is an entry of its own.
        append(&ledger, &a, 5);
        ledger.shared.index_queue.wait_until_applied();
        assert_eq!(entries(&ledger, &a), vec![(0, 2), (2, 2), (4, 1)]);
        let payloads: Vec<Vec<u8>> = ledger
            .read(&a, 0)
            .expect("read")
            .map(|r| r.expect("a record").payload().to_vec())
            .collect();
        assert_eq!(payloads, vec![vec![0], vec![1], vec![3], vec![4], vec![5]]);
        assert!(ledger.verify().expect("verify").problems.is_empty());
    }
}
