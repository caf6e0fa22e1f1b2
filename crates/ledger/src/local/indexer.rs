//! The indexer: on its own thread, applies the rounds the writer journaled to
//! sled in order, and publishes where they end (`applied_next_global`, where
//! readers of sled stop).
//!
//! Owns: the queue of rounds not yet in sled (bounded in bytes: a writer too
//! far ahead waits), how far the journal is known synced, the inserts, the
//! stored next global position and journal end (once per batch). Must never:
//! apply a round out of order or before the journal holds it synced, or
//! publish an end before every record below it is inserted.
//!
//! A thread because sled's inserts were four fifths of the writer's time and
//! durability does not need them (until applied, readers find a record among
//! the recent ones). Synced rounds only because sled writes its pages on its
//! own schedule: after a power loss it could hold records the journal lost, at
//! positions the ledger would hand out again.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::local::Shared;
use crate::local::entry::{self, Extent, Run};
use crate::local::journal::JournalEnd;
use crate::local::keys::{JOURNAL_END_KEY, NEXT_GLOBAL_KEY};
use crate::record::{Record, StreamKey};

/// Most bytes journaled not yet in sled (memory); past it the writer waits.
pub const MAX_UNINDEXED_BYTES: usize = 32 * 1024 * 1024;

/// Longest the indexer waits for a commit to sync its rounds, in milliseconds,
/// before it syncs the journal itself (one sync for all buffered rounds).
pub const MAX_SYNC_WAIT_MS: u64 = 50;

/// One round the writer journaled: its records, by stream, in global order.
pub(crate) struct Round {
    pub written: Vec<(StreamKey, Vec<Record>)>,
    /// Where each run of `written` lies in the journal, in order.
    pub extents: Vec<Extent>,
    /// Where its journal entry ends (and the global position after it).
    pub end: JournalEnd,
    pub bytes: usize,
    /// Records the recent records let go, freed here, off the commit path.
    pub retired: Vec<Record>,
    /// A durable append waits for a commit, which wakes the indexer (not this).
    pub awaits_commit: bool,
}

/// The rounds waiting for the indexer.
#[derive(Default)]
pub(crate) struct IndexQueue {
    state: Mutex<QueueState>,
    /// The indexer waits here (signalled only then: no system call if busy).
    work: Condvar,
    /// Writers waiting for room, and callers of `wait_until_applied`.
    progress: Condvar,
}

#[derive(Default)]
struct QueueState {
    items: VecDeque<Round>,
    /// Bytes of the rounds queued or being applied.
    bytes: usize,
    /// Rounds ever queued, and ever applied (or skipped once poisoned).
    queued: u64,
    applied: u64,
    /// Every round ending at or below this global position is synced.
    durable: u64,
    /// The writer queues no more rounds.
    closed: bool,
    /// The ledger is poisoned: nothing waits for a sync any more.
    interrupted: bool,
    /// The indexer's thread ended: nothing queued will be applied.
    gone: bool,
    /// The indexer is waiting for rounds or for a sync.
    indexer_idle: bool,
    /// Threads waiting on `progress`.
    progress_waiters: usize,
    /// TEST-ONLY: the indexer takes nothing while set.
    #[cfg(test)]
    paused: bool,
}

impl IndexQueue {
    /// A queue for a ledger whose records below `next_global` are durable.
    pub(crate) fn starting_at(next_global: u64) -> Self {
        let queue = Self::default();
        queue.lock().durable = next_global;
        queue
    }

    fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait_for_progress<'a>(
        &self,
        mut state: MutexGuard<'a, QueueState>,
    ) -> MutexGuard<'a, QueueState> {
        state.progress_waiters += 1;
        let mut state = self.progress.wait(state).unwrap_or_else(|p| p.into_inner());
        state.progress_waiters -= 1;
        state
    }

    fn wake_indexer(&self, state: &QueueState) {
        if state.indexer_idle {
            self.work.notify_one();
        }
    }

    /// Queues a round once the backlog has room (not once the indexer is gone).
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
        // A round a commit will sync wakes the indexer then, unless synced.
        let wake = !round.awaits_commit || state.durable >= round.end.next_global;
        state.items.push_back(round);
        if wake {
            self.wake_indexer(&state);
        }
    }

    /// Every round ending at or below `end` is synced (by any sync).
    pub(crate) fn note_durable(&self, end: u64) {
        let mut state = self.lock();
        if end > state.durable {
            state.durable = end;
            self.wake_indexer(&state);
        }
    }

    /// The ledger is poisoned: an indexer waiting for a sync stops waiting.
    pub(crate) fn interrupt(&self) {
        let mut state = self.lock();
        state.interrupted = true;
        self.wake_indexer(&state);
    }

    /// Blocks until every round below `end` is synced (or the ledger is
    /// poisoned): a commit has [`MAX_SYNC_WAIT_MS`] to sync it (none once the
    /// writer is closed), then `sync` does.
    fn wait_until_durable(&self, end: u64, sync: impl FnOnce()) {
        let deadline = Instant::now() + Duration::from_millis(MAX_SYNC_WAIT_MS);
        let mut state = self.lock();
        while state.durable < end && !state.interrupted {
            let now = Instant::now();
            if state.closed || now >= deadline {
                drop(state);
                return sync();
            }
            state.indexer_idle = true;
            state = (self.work.wait_timeout(state, deadline - now))
                .unwrap_or_else(|p| p.into_inner())
                .0;
            state.indexer_idle = false;
        }
    }

    /// No more rounds: the indexer applies what is queued and ends.
    pub(crate) fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        self.wake_indexer(&state);
    }

    /// Blocks until every round queued before is in sled (or the indexer gone).
    pub(crate) fn wait_until_applied(&self) {
        let mut state = self.lock();
        let target = state.queued;
        while state.applied < target && !state.gone {
            state = self.wait_for_progress(state);
        }
    }

    /// Everything queued, or `None` once the queue is closed and empty.
    fn take(&self) -> Option<Vec<Round>> {
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

    /// The indexer is done with `rounds` rounds holding `bytes`.
    fn applied(&self, rounds: u64, bytes: usize) {
        let mut state = self.lock();
        state.applied += rounds;
        state.bytes -= bytes;
        if state.progress_waiters > 0 {
            self.progress.notify_all();
        }
    }

    /// TEST-ONLY: holds the indexer back (rounds queue up) or lets it go.
    #[cfg(test)]
    pub(crate) fn pause(&self, paused: bool) {
        let mut state = self.lock();
        state.paused = paused;
        self.wake_indexer(&state);
    }

    fn indexer_gone(&self) {
        self.lock().gone = true;
        self.progress.notify_all();
    }
}

/// Marks the indexer gone as its thread ends; a panic poisons the ledger.
struct GoneOnExit<'a>(&'a Shared);

impl Drop for GoneOnExit<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.poison("the indexer stopped".to_owned());
        }
        self.0.index_queue.indexer_gone();
    }
}

/// The indexer thread: applies everything queued, then publishes its end.
pub(crate) fn run_indexer(shared: std::sync::Arc<Shared>) {
    let queue = &shared.index_queue;
    let _gone = GoneOnExit(&shared);
    let mut batch = Batch::default();
    // Where the next round must start: no gap, no overlap.
    let mut due = shared.applied_next_global();
    while let Some(items) = queue.take() {
        let (mut rounds, mut bytes) = (0, 0);
        for round in items {
            let first = round.written.first().and_then(|(_, run)| run.first());
            invariant!(
                first.is_some_and(|record| record.global_position() == due),
                "a round for the index starting at {:?} where {due} was due",
                first.map(Record::global_position)
            );
            due = round.end.next_global;
            rounds += 1;
            bytes += round.bytes;
            batch.join(round);
        }
        batch.apply_and_publish(&shared);
        shared.stats.index_batches.fetch_add(1, Ordering::Relaxed);
        queue.applied(rounds, bytes);
    }
}

/// The rounds taken together, each stream's runs joined in round order (a
/// stable sort) before they are cut into entries: one insert per entry, not
/// per round (sled's cost a record halves from one record an insert to four).
/// A batch is applied and published whole, so every entry lies wholly below or
/// past the end sled recovers, and a replay from there overwrites the rest.
#[derive(Default)]
struct Batch {
    runs: Vec<Run>,
    /// Where the last round joined ends.
    end: Option<JournalEnd>,
    /// Records the recent records let go with the rounds joined.
    retired: Vec<Vec<Record>>,
}

impl Batch {
    fn join(&mut self, round: Round) {
        debug_assert_eq!(round.written.len(), round.extents.len());
        if !round.retired.is_empty() {
            self.retired.push(round.retired);
        }
        for ((stream, records), extent) in round.written.into_iter().zip(round.extents) {
            match self.runs.last_mut() {
                Some(last) if last.stream == stream => {
                    last.records.extend(records);
                    last.extents.push(extent);
                }
                _ => self.runs.push(Run {
                    stream,
                    records,
                    extents: vec![extent],
                }),
            }
        }
        self.end = Some(round.end);
    }

    /// Joins each stream's runs into its first (a stable sort: in order).
    fn join_streams(&mut self) {
        if self.runs.len() < 3 {
            return;
        }
        self.runs.sort_by(|a, b| a.stream.cmp(&b.stream));
        // `dedup_by` hands the later run first and keeps the earlier one.
        self.runs.dedup_by(|later, earlier| {
            let same = later.stream == earlier.stream;
            if same {
                earlier.records.append(&mut later.records);
                earlier.extents.append(&mut later.extents);
            }
            same
        });
    }

    /// Once the runs are synced, inserts and publishes them (unless poisoned).
    fn apply_and_publish(&mut self, shared: &Shared) {
        if let Some(end) = self.end.take() {
            // A round no commit synced: the indexer syncs (unless poisoned).
            shared.index_queue.wait_until_durable(end.next_global, || {
                if shared.poisoned().is_none() {
                    shared.stats.index_syncs.fetch_add(1, Ordering::Relaxed);
                    if let Err(error) = shared.make_durable() {
                        shared.poison(format!("flush failed: {error}"));
                    }
                }
            });
            if shared.poisoned().is_none() {
                self.join_streams();
                match insert_records(shared, &self.runs) {
                    Ok(()) => publish(shared, end),
                    Err(error) => shared.poison(format!("sled insert failed: {error}")),
                }
            }
        }
        self.runs.clear();
        self.retired.clear();
    }
}

/// Stores `m/next_global` after the records (sled recovers a prefix of its
/// log: the end never covers a record it lost), then the journal end (where
/// an open reads on), then publishes `applied_next_global` to readers.
fn publish(shared: &Shared, end: JournalEnd) {
    if shared.poisoned().is_some() {
        return;
    }
    let log = &shared.log;
    let stored = log
        .insert(NEXT_GLOBAL_KEY, &end.next_global.to_be_bytes())
        .and_then(|_| log.insert(JOURNAL_END_KEY, &end.encode()));
    if let Err(error) = stored {
        shared.poison(format!("sled insert failed: {error}"));
        return;
    }
    shared
        .applied_next_global
        .store(end.next_global, Ordering::Release);
}

/// Inserts the runs, one insert per entry. Not one `apply_batch`: sled 0.34
/// writes its I/O buffer out twice a batch (more than the inserts cost), and
/// after its first batch every call takes a reader-writer lock. Nothing needs
/// the atomicity: the journal holds the round synced (an open replays it), and
/// readers see nothing past the published end.
fn insert_records(shared: &Shared, runs: &[Run]) -> sled::Result<()> {
    let mut inserted = 0;
    for entry in entry::cut(runs) {
        shared.log.insert(entry.key, entry.value)?;
        inserted += 1;
    }
    shared
        .stats
        .index_entries
        .fetch_add(inserted, Ordering::Relaxed);
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::LogStore;
    use crate::local::testing::{self, Faults};
    use crate::local::{LocalStore, OpenMode};
    use crate::record::{NewRecord, StreamKey};
    use crate::{Durability, ExpectedPosition};

    /// A new ledger in a scratch directory (kept while the test runs).
    fn new_ledger() -> (tempfile::TempDir, LocalStore) {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let (ledger, _) = LocalStore::open(dir.path(), OpenMode::CreateIfMissing).expect("open");
        (dir, ledger)
    }

    /// [`new_ledger`] whose syncs a test can hold.
    fn ledger_with_faults() -> (tempfile::TempDir, LocalStore, Arc<Faults>) {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let faults = testing::install(dir.path(), Faults::default());
        let (ledger, _) = LocalStore::open(dir.path(), OpenMode::CreateIfMissing).expect("open");
        (dir, ledger, faults)
    }

    fn append(ledger: &LocalStore, stream: &StreamKey, payload: u8) {
        append_as(ledger, stream, payload, Durability::Durable);
    }

    fn append_as(ledger: &LocalStore, stream: &StreamKey, payload: u8, durability: Durability) {
        let record = NewRecord {
            kind: 1,
            payload: vec![payload],
        };
        ledger
            .append_blocking(stream, ExpectedPosition::Any, vec![record], durability)
            .expect("append");
    }

    /// The first position of each sled entry of `stream`, with its record
    /// count.
    fn entries(ledger: &LocalStore, stream: &StreamKey) -> Vec<(u64, usize)> {
        ledger
            .shared
            .log
            .scan_prefix(crate::local::keys::stream_prefix(stream))
            .map(|entry| {
                let (key, value) = entry.expect("a sled entry");
                let (_, first) = crate::local::keys::parse_record_key(&key).expect("a record key");
                (first, crate::local::entry::span(&value) as usize)
            })
            .collect()
    }

    /// The first payload byte of each record of `stream`, in order.
    fn first_bytes(ledger: &LocalStore, stream: &StreamKey) -> Vec<u8> {
        ledger
            .read_blocking(stream, 0)
            .expect("read")
            .map(|r| r.expect("a record").payload()[0])
            .collect()
    }

    /// Rounds the indexer takes together are stored as one entry per
    /// stream, however their streams interleave, and read back whole in
    /// position order; rounds taken apart stay apart.
    #[test]
    fn every_run_of_a_stream_in_a_batch_is_one_entry() {
        let (dir, ledger) = new_ledger();
        let (a, b) = (
            StreamKey::new("join/a").expect("a key"),
            StreamKey::new("join/b").expect("a key"),
        );
        ledger.shared.index_queue.pause(true);
        for (stream, payload) in [(&b, 0), (&a, 1), (&b, 2), (&a, 3), (&a, 4), (&b, 5)] {
            append(&ledger, stream, payload);
        }
        ledger.shared.index_queue.pause(false);
        ledger.shared.index_queue.wait_until_applied();
        assert_eq!(entries(&ledger, &a), vec![(0, 3)]);
        assert_eq!(entries(&ledger, &b), vec![(0, 3)]);
        assert_eq!(LogStore::stats(&ledger).engine["index_entries"], 2);
        // A round applied on its own is an entry of its own.
        append(&ledger, &a, 6);
        ledger.shared.index_queue.wait_until_applied();
        assert_eq!(entries(&ledger, &a), vec![(0, 3), (3, 1)]);
        assert_eq!(LogStore::stats(&ledger).engine["index_entries"], 3);
        assert_eq!(first_bytes(&ledger, &a), vec![1, 3, 4, 6]);
        assert_eq!(first_bytes(&ledger, &b), vec![0, 2, 5]);
        assert!(
            ledger
                .verify_blocking()
                .expect("verify")
                .problems
                .is_empty()
        );
        // sled answers as the recent records did, after a restart too.
        drop(ledger);
        let (ledger, _) = LocalStore::open(dir.path(), OpenMode::MustExist).expect("reopen");
        assert_eq!(first_bytes(&ledger, &a), vec![1, 3, 4, 6]);
    }

    /// sled gets a round only once the journal holds it on stable
    /// storage: a buffered append has no commit coming, so the indexer
    /// takes its round, waits for a sync, then syncs the journal itself;
    /// while that sync is held sled lacks the record (a power loss then
    /// could take it from the journal and leave it in sled); after it,
    /// sled has it.
    #[test]
    fn a_round_reaches_sled_only_after_the_journal_sync_that_covers_it() {
        let (_dir, ledger, faults) = ledger_with_faults();
        let stream = StreamKey::new("synced/a").expect("a key");
        faults.hold_syncs(true);
        append_as(&ledger, &stream, 8, Durability::Buffered);
        // The indexer's own sync, once no commit came for the round.
        let awaited = faults.wait_until_a_sync_waits();
        let in_sled = entries(&ledger, &stream);
        faults.hold_syncs(false);
        assert!(awaited, "the indexer never synced the round");
        assert_eq!(
            in_sled,
            vec![],
            "sled holds a round the journal has not synced"
        );
        ledger.shared.index_queue.wait_until_applied();
        assert_eq!(entries(&ledger, &stream), vec![(0, 1)]);
        let stats = LogStore::stats(&ledger);
        assert_eq!(
            (stats.engine["index_syncs"], stats.syncs),
            (1, 0),
            "{stats:?}"
        );
    }

    /// A durable append's commit syncs its round and wakes the indexer:
    /// the indexer syncs nothing itself.
    #[test]
    fn a_durable_round_costs_the_indexer_no_sync() {
        let (_dir, ledger) = new_ledger();
        let stream = StreamKey::new("synced/b").expect("a key");
        append(&ledger, &stream, 1);
        ledger.shared.index_queue.wait_until_applied();
        assert_eq!(entries(&ledger, &stream), vec![(0, 1)]);
        let stats = LogStore::stats(&ledger);
        assert_eq!(
            (stats.engine["index_syncs"], stats.syncs),
            (0, 1),
            "{stats:?}"
        );
    }
}
