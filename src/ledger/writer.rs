//! The single writer, the group-commit flusher and the checkpointer.
//!
//! Owns: assigning positions, the optimistic-concurrency check, writing
//! each round of appends to the journal as one entry, handing it to the
//! recent records and to the indexer (which applies it to sled), and
//! making rounds durable. All appends of the
//! process pass through one writer (the writer thread, or a blocking
//! caller leading while the thread is idle, both under the writer's
//! lock), so the head check and the write are one step; two writers can
//! never both extend the same position. Durable appends wait for the flusher, which makes everything
//! journaled so far durable with one `fdatasync` of the journal for every
//! waiter (group commit) while the writer goes on with the next round.
//! The checkpointer makes sled durable when the writer starts a new
//! journal file (once the indexer has applied every round before it), so
//! that an open replays only the files since.
//! Must never: acknowledge a durable append before the sync of the journal
//! entry holding it returned, or accept a write after a write or sync
//! failed (the process must restart, since what sled holds in memory may
//! no longer match the disk).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, oneshot};

use crate::ledger::entry::Extent;
use crate::ledger::error::{LedgerError, Result};
use crate::ledger::indexer::Round;
use crate::ledger::journal::{self, JournalWriter};
use crate::ledger::record::{self, FORMAT_VERSION, Header, NewRecord, Record, StreamKey};
use crate::ledger::{AppendOutcome, Durability, ExpectedPosition, Shared};

/// Most commands the writer takes into one round.
pub const MAX_COMMANDS_PER_ROUND: usize = 1024;

/// Largest encoding buffer the writer keeps between records, in bytes.
pub const MAX_SCRATCH_BYTES: usize = 64 * 1024;

/// Most stream heads the writer keeps in memory; past it the cache is
/// dropped and heads are read back from sled (one reverse seek each).
pub const MAX_CACHED_HEADS: usize = 100_000;

pub(crate) enum Command {
    Append(AppendRequest),
    /// Resolves once everything appended before it is durable.
    Flush(oneshot::Sender<Result<()>>),
}

pub(crate) struct AppendRequest {
    pub stream: StreamKey,
    pub expected: ExpectedPosition,
    pub records: Vec<NewRecord>,
    pub durability: Durability,
    pub reply: oneshot::Sender<Result<AppendOutcome>>,
}

enum Waiter {
    Append(oneshot::Sender<Result<AppendOutcome>>, AppendOutcome),
    Flush(oneshot::Sender<Result<()>>),
}

impl Waiter {
    fn resolve(self, result: Result<()>) {
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

/// Durable appends waiting for the next flush.
#[derive(Default)]
pub(crate) struct FlushQueue {
    state: Mutex<FlushQueueState>,
    ready: Condvar,
}

#[derive(Default)]
struct FlushQueueState {
    waiters: Vec<Waiter>,
    closed: bool,
    /// The flusher holds a group it has not resolved yet.
    busy: bool,
    /// Waiters of the last group committed (by the flusher or the writer).
    previous_group: usize,
    /// While the flusher waits: how many queued waiters make it worth
    /// waking (1 when it waits for any, the rest of its group when it
    /// lingers); 0 while it is busy. A push below it costs no system call.
    wake_at: usize,
}

impl FlushQueue {
    fn push(&self, waiters: Vec<Waiter>) {
        if waiters.is_empty() {
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.waiters.extend(waiters);
        if state.wake_at > 0 && state.waiters.len() >= state.wake_at {
            self.ready.notify_one();
        }
    }

    fn close(&self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.closed = true;
        self.ready.notify_one();
    }

    /// Blocks until there are waiters (all of them are taken) or the queue
    /// is closed and drained (`None`).
    fn take(&self) -> Option<Vec<Waiter>> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if !state.waiters.is_empty() {
                state.busy = true;
                return Some(std::mem::take(&mut state.waiters));
            }
            if state.closed {
                return None;
            }
            state.wake_at = 1;
            state = self.ready.wait(state).unwrap_or_else(|p| p.into_inner());
            state.wake_at = 0;
        }
    }

    /// The flusher resolved the group it took.
    fn done(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).busy = false;
    }

    /// Whether the writer may commit `group` waiters itself: the flusher
    /// has nothing queued and no group in hand (the writer is the only one
    /// who queues), and the group is not so much smaller than the last
    /// one that the flusher would linger for the rest of it.
    fn may_commit_inline(&self, group: usize) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let inline = state.waiters.is_empty() && !state.busy && group * 2 >= state.previous_group;
        if inline {
            state.previous_group = group;
        }
        inline
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

/// Longest a flush waits for the rest of a group, in microseconds. A flush
/// costs about a millisecond; waiting a fraction of that for writers that
/// are on their way turns two flushes into one.
pub const GROUP_LINGER_US: u64 = 250;

/// The flusher thread: one flush per round of waiters.
pub(crate) fn run_flusher(shared: Arc<Shared>, queue: Arc<FlushQueue>) {
    // Waiters of the previous flush: writers that, acknowledged together,
    // come back together. When only a few of them are back, the rest are
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
        commit_group(&shared, waiters);
        queue.done();
    }
}

/// Makes everything journaled so far durable with one sync of the journal
/// and then resolves `waiters` (each was journaled before this call), and
/// now and then advances the watermark. What the flusher does for each
/// group, and the writer for a group it commits itself.
fn commit_group(shared: &Shared, waiters: Vec<Waiter>) {
    let started = Instant::now();
    // Read before the flush: every record below it was journaled before
    // the indexer applied it, so the flush covers it.
    let covered = shared.applied_next_global.load(Ordering::Acquire);
    // After a failed write or sync, a later sync may succeed without
    // the lost pages (the kernel drops them on a writeback error), so
    // nothing is acknowledged once the ledger is poisoned.
    let result = match shared.poisoned() {
        Some(reason) => Err(LedgerError::Poisoned { reason }),
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
    if let Err(error) = &result
        && !matches!(error, LedgerError::Poisoned { .. })
    {
        shared.poison(format!("flush failed: {error}"));
    }
    for waiter in waiters {
        let result = match &result {
            Ok(()) => Ok(()),
            Err(error) => Err(LedgerError::Poisoned {
                reason: error.to_string(),
            }),
        };
        waiter.resolve(result);
    }
    // After the waiters: the watermark never delays an acknowledgement.
    if result.is_ok() {
        shared.advance_watermark_now_and_then(covered);
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

/// Most bytes of records the writer takes into one round; a round ends
/// at the command that passes it (so one journal entry stays bounded).
pub const MAX_ROUND_BYTES: usize = 64 * 1024 * 1024;

/// The writer's state and the flush queue, shared by the writer thread
/// and by callers that lead (see [`WritePath::try_lead`]). Whoever holds
/// `writer` is the one writer: the head check, the journal write and the
/// hand-off to the indexer of a round happen under it, so two rounds can
/// never both extend the same position.
pub(crate) struct WritePath {
    writer: Mutex<Writer>,
    queue: Arc<FlushQueue>,
}

impl WritePath {
    pub(crate) fn new(shared: &Shared, journal: JournalWriter, queue: Arc<FlushQueue>) -> Self {
        Self {
            writer: Mutex::new(Writer {
                heads: HashMap::new(),
                next_global: shared.next_global_on_open,
                journal,
                scratch: Vec::new(),
            }),
            queue,
        }
    }

    /// The leader path: a blocking caller whose append finds the writer
    /// idle (nobody holds it and no command waits in `commands`) writes
    /// the append itself, and syncs it itself when the flusher is idle
    /// too, instead of handing it to the writer thread and waiting to be
    /// woken (two thread hand-offs, about a third of a lone durable
    /// append here). As PostgreSQL's backends flush the WAL they wrote.
    /// Gives the command back when it may not lead: it then goes through
    /// `commands`, behind those already there.
    pub(crate) fn try_lead(
        &self,
        shared: &Shared,
        command: Command,
        commands: &mpsc::Sender<Command>,
    ) -> std::result::Result<(), Command> {
        let idle = || commands.capacity() == commands.max_capacity();
        if !idle() {
            return Err(command);
        }
        let mut writer = match self.writer.try_lock() {
            Ok(writer) => writer,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Err(command),
        };
        shared.stats.led_rounds.fetch_add(1, Ordering::Relaxed);
        self.write_round(&mut writer, shared, vec![command], idle);
        Ok(())
    }

    /// Writes one round and sees it committed: synced here when nothing
    /// else waits to be written (`nothing_waiting`) and the flusher is
    /// idle (a lone writer, or a group that came back together), one
    /// thread hand-off less on the commit path; otherwise queued for the
    /// flusher, which syncs while the writer goes on with the next round.
    fn write_round(
        &self,
        writer: &mut Writer,
        shared: &Shared,
        round: Vec<Command>,
        nothing_waiting: impl Fn() -> bool,
    ) {
        let waiters = writer.apply_round(shared, round);
        if !waiters.is_empty() && nothing_waiting() && self.queue.may_commit_inline(waiters.len()) {
            commit_group(shared, waiters);
        } else {
            self.queue.push(waiters);
        }
        writer.maybe_rotate(shared);
    }
}

/// The writer thread: takes every command that is waiting, writes the
/// accepted appends to the journal as one entry and hands it to the
/// indexer, then hands durable ones to the flusher.
pub(crate) fn run_writer(
    shared: Arc<Shared>,
    mut commands: mpsc::Receiver<Command>,
    path: Arc<WritePath>,
) {
    while let Some(first) = commands.blocking_recv() {
        // Sized for what waits now, so a round of many appends does not
        // grow its vectors step by step.
        let mut round = Vec::with_capacity((commands.len() + 1).min(MAX_COMMANDS_PER_ROUND));
        round.push(first);
        let mut bytes = 0;
        while round.len() < MAX_COMMANDS_PER_ROUND && bytes < MAX_ROUND_BYTES {
            match commands.try_recv() {
                Ok(command) => {
                    if let Command::Append(request) = &command {
                        bytes += request
                            .records
                            .iter()
                            .map(|r| r.payload.len())
                            .sum::<usize>();
                    }
                    round.push(command);
                }
                Err(_) => break,
            }
        }
        let mut writer = path.writer.lock().unwrap_or_else(|p| p.into_inner());
        path.write_round(&mut writer, &shared, round, || commands.is_empty());
    }
    path.queue.close();
    shared.index_queue.close();
}

/// The checkpointer thread: after each journal rotation, once the indexer
/// applied every round before it, makes sled hold them on stable storage
/// (sled's flush and an `fdatasync` of its data file), so that an open
/// replays at most the rounds of the files since. Off the commit path:
/// appends go on meanwhile.
pub(crate) fn run_checkpointer(shared: Arc<Shared>, rotations: std::sync::mpsc::Receiver<u64>) {
    while let Ok(mut base) = rotations.recv() {
        while let Ok(later) = rotations.try_recv() {
            base = later;
        }
        if shared.poisoned().is_some() {
            continue;
        }
        let started = Instant::now();
        // The indexer applied every record below `base` (and stored the
        // next global position past them) before it passed `base` on, so
        // sled's flush now covers them.
        if let Err(error) = shared.make_sled_durable() {
            shared.poison(format!("checkpoint failed: {error}"));
            continue;
        }
        tracing::debug!(
            base,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "checkpoint"
        );
    }
}

struct Writer {
    /// Next position of each stream the writer has touched.
    heads: HashMap<StreamKey, u64>,
    next_global: u64,
    journal: JournalWriter,
    /// Where each record is encoded before it is copied into its shared
    /// buffer; kept so that encoding allocates nothing.
    scratch: Vec<u8>,
}

impl Writer {
    /// Starts a new journal file once the current one is full (or a
    /// spare is ready to replace an allocated one), and asks for a
    /// checkpoint of everything before it.
    fn maybe_rotate(&mut self, shared: &Shared) {
        if !self.journal.wants_rotation() || shared.poisoned().is_some() {
            return;
        }
        match self.journal.rotate(self.next_global) {
            Ok(()) => {
                *shared
                    .journal_file
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()) = self.journal.file();
                // The rotation synced the file the writer left.
                shared.index_queue.note_durable(self.next_global);
                shared.index_queue.push_checkpoint(self.next_global);
            }
            Err(error) => shared.poison(format!("journal rotation failed: {error}")),
        }
    }

    fn head(&mut self, shared: &Shared, stream: &StreamKey) -> Result<u64> {
        if let Some(&head) = self.heads.get(stream) {
            return Ok(head);
        }
        if self.heads.len() >= MAX_CACHED_HEADS {
            self.heads.clear();
        }
        let head = shared.read_head(stream)?;
        self.heads.insert(stream.clone(), head);
        Ok(head)
    }

    /// Applies one round; returns the waiters that need a flush.
    fn apply_round(&mut self, shared: &Shared, round: Vec<Command>) -> Vec<Waiter> {
        if let Some(reason) = shared.poisoned() {
            for command in round {
                fail(
                    command,
                    LedgerError::Poisoned {
                        reason: reason.clone(),
                    },
                );
            }
            return Vec::new();
        }
        let timestamp_ms = now_ms();
        let commands = round.len();
        // The records of the round, by stream, in the order they apply.
        let mut written: Vec<(StreamKey, Vec<Record>)> = Vec::with_capacity(commands);
        let mut tentative: HashMap<StreamKey, u64> = HashMap::with_capacity(commands);
        let mut next_global = self.next_global;
        let mut accepted: Vec<(Waiter, Durability)> = Vec::with_capacity(commands);
        let mut bytes = 0u64;
        for command in round {
            let request = match command {
                Command::Flush(reply) => {
                    accepted.push((Waiter::Flush(reply), Durability::Durable));
                    continue;
                }
                Command::Append(request) => request,
            };
            let head = match tentative.get(&request.stream) {
                Some(&head) => Ok(head),
                None => self.head(shared, &request.stream),
            }
            .and_then(|head| shared.check_not_corrupt(&request.stream).map(|()| head));
            let head = match head {
                Ok(head) => head,
                Err(error) => {
                    let _ = request.reply.send(Err(error));
                    continue;
                }
            };
            if let ExpectedPosition::Exactly(expected) = request.expected
                && expected != head
            {
                let _ = request.reply.send(Err(LedgerError::Conflict {
                    stream: request.stream.to_string(),
                    expected,
                    actual: head,
                }));
                continue;
            }
            let outcome = AppendOutcome {
                first_position: head,
                next_position: head + request.records.len() as u64,
                first_global_position: next_global,
            };
            let mut records = Vec::with_capacity(request.records.len());
            for (offset, new) in request.records.iter().enumerate() {
                let header = Header {
                    format_version: FORMAT_VERSION,
                    kind: new.kind,
                    position: head + offset as u64,
                    global_position: next_global + offset as u64,
                    timestamp_ms,
                };
                record::encode_into(&header, &request.stream, &new.payload, &mut self.scratch);
                // One allocation: the shared buffer is copied, not moved.
                let envelope = sled::IVec::from(&self.scratch[..]);
                bytes += envelope.len() as u64;
                records.push(Record::encoded(envelope, header));
            }
            next_global += request.records.len() as u64;
            if self.scratch.capacity() > MAX_SCRATCH_BYTES {
                // A large record should not pin its buffer.
                self.scratch = Vec::new();
            }
            match written.last_mut() {
                Some((stream, held)) if *stream == request.stream => held.extend(records),
                _ => written.push((request.stream.clone(), records)),
            }
            tentative.insert(request.stream, outcome.next_position);
            accepted.push((Waiter::Append(request.reply, outcome), request.durability));
        }
        if tentative.is_empty() {
            // Only flush requests (or refused appends): nothing to write.
            return accepted.into_iter().map(|(waiter, _)| waiter).collect();
        }
        // The journal first: it is what makes the round durable, and what
        // an open applies to sled again if sled lost the round.
        let mut envelopes: Vec<&[u8]> =
            Vec::with_capacity((next_global - self.next_global) as usize);
        envelopes.extend(
            written
                .iter()
                .flat_map(|(_, records)| records.iter().map(|r| &r.bytes()[..])),
        );
        let journaled = self
            .journal
            .append(self.next_global, next_global, envelopes.into_iter());
        let start = match journaled {
            Ok(start) => start,
            Err(error) => {
                // The journal's state is unknown: stop writing.
                let reason = format!("journal write failed: {error}");
                shared.poison(reason.clone());
                for (waiter, _) in accepted {
                    waiter.resolve(Err(LedgerError::Poisoned {
                        reason: reason.clone(),
                    }));
                }
                return Vec::new();
            }
        };
        // Where each run of the round lies in the journal: the indexer
        // points sled's entries there.
        let extents = Extent::of_runs(
            self.journal.base(),
            journal::records_offset(start),
            written.iter().map(|(_, records)| records.len()),
            written
                .iter()
                .flat_map(|(_, records)| records.iter().map(Record::encoded_len)),
        );
        shared.stats.rounds.fetch_add(1, Ordering::Relaxed);
        shared
            .stats
            .records
            .fetch_add(next_global - self.next_global, Ordering::Relaxed);
        metrics::counter!(crate::telemetry::LEDGER_RECORDS)
            .increment(next_global - self.next_global);
        metrics::counter!(crate::telemetry::LEDGER_BYTES).increment(bytes);
        self.next_global = next_global;
        shared
            .journaled_next_global
            .store(next_global, Ordering::Release);
        // Readers find the round among the recent records until the
        // indexer has applied it to sled (and only then may they drop it).
        let mut retired = Vec::new();
        shared
            .recent
            .extend(&written, shared.applied_next_global(), &mut retired);
        shared.notify_watchers(&tentative);
        self.heads.extend(tentative);
        shared.index_queue.push(Round {
            written,
            extents,
            journal_end: journal::JournalEnd {
                file: self.journal.base(),
                offset: self.journal.len(),
                next_global,
            },
            next_global,
            bytes: bytes as usize,
            retired,
            awaits_commit: accepted.iter().any(|(_, d)| *d == Durability::Durable),
        });
        let mut durable = Vec::with_capacity(accepted.len());
        for (waiter, durability) in accepted {
            match durability {
                Durability::Buffered => waiter.resolve(Ok(())),
                Durability::Durable => durable.push(waiter),
            }
        }
        durable
    }
}

fn fail(command: Command, error: LedgerError) {
    match command {
        Command::Append(request) => {
            let _ = request.reply.send(Err(error));
        }
        Command::Flush(reply) => {
            let _ = reply.send(Err(error));
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiter() -> Waiter {
        Waiter::Flush(oneshot::channel().0)
    }

    /// Longer than any test here may take: a wait that ran to it failed.
    const NEVER: Duration = Duration::from_secs(60);

    /// A blocking append that finds the writer idle writes and syncs its
    /// round itself; an async append goes through the writer thread.
    #[test]
    fn a_blocking_append_to_an_idle_writer_leads_and_an_async_one_does_not() {
        use crate::ledger::{Ledger, OpenMode};
        let dir = tempfile::tempdir().expect("a scratch directory");
        let (ledger, _) = Ledger::open(dir.path(), OpenMode::CreateIfMissing).expect("open");
        let stream = StreamKey::new("lead/one").expect("a key");
        let record = || NewRecord {
            kind: 1,
            payload: vec![7],
        };
        let outcome = ledger
            .append_blocking(
                &stream,
                ExpectedPosition::Exactly(0),
                vec![record()],
                Durability::Durable,
            )
            .expect("append");
        assert_eq!(outcome.next_position, 1);
        let stats = ledger.stats();
        assert_eq!((stats.rounds, stats.led_rounds), (1, 1));
        assert_eq!(stats.flushes, 1, "the leader synced its own round");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        runtime
            .block_on(ledger.append(
                &stream,
                ExpectedPosition::Exactly(1),
                vec![record()],
                Durability::Durable,
            ))
            .expect("append");
        let stats = ledger.stats();
        assert_eq!((stats.rounds, stats.led_rounds), (2, 1));
        // A leader's conflict is refused as the writer thread refuses it.
        let conflict = ledger.append_blocking(
            &stream,
            ExpectedPosition::Exactly(1),
            vec![record()],
            Durability::Durable,
        );
        assert!(matches!(
            conflict,
            Err(LedgerError::Conflict { actual: 2, .. })
        ));
        assert_eq!(ledger.head(&stream).expect("head"), 2);
    }

    #[test]
    fn a_waiting_flusher_takes_the_first_waiter_pushed() {
        let queue = FlushQueue::default();
        std::thread::scope(|scope| {
            let taker = scope.spawn(|| queue.take().map(|group| group.len()));
            queue.push(vec![waiter()]);
            assert_eq!(taker.join().unwrap(), Some(1));
        });
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
            // One push below the rest of the group, then the rest of it.
            queue.push(vec![waiter()]);
            queue.push(vec![waiter(), waiter()]);
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
