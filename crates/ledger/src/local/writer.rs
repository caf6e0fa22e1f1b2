//! The single writer: every append passes through its thread, so the head
//! check and the write are one step and two appends never extend one position.
//!
//! Owns: assigning positions, the optimistic-concurrency check, journaling
//! each round as one entry, handing it to the recent records and the indexer,
//! syncing for each group of durable appends (`group_commit`). Must never:
//! acknowledge a durable append before the sync covering it returned, or
//! accept a write after a write or sync failed (only a restart clears it).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use crate::error::LedgerError;
use crate::local::entry::Extent;
use crate::local::error::{LocalError, Result};
use crate::local::group_commit::{self, GROUP_LINGER_US, Group, Waiter};
use crate::local::indexer::Round;
use crate::local::journal::{self, JournalWriter};
use crate::local::watermark::Watermark;
use crate::local::{Shared, lock};
use crate::record::{self, FORMAT_VERSION, Header, NewRecord, Record, StreamKey, StreamMap};
use crate::{AppendOutcome, Durability, ExpectedPosition};

/// Most commands the writer takes into one round.
pub const MAX_COMMANDS_PER_ROUND: usize = 1024;

/// Largest encoding buffer the writer keeps between records, in bytes.
pub const MAX_SCRATCH_BYTES: usize = 64 * 1024;

/// Most stream heads kept in memory; past it they are read back from sled.
pub const MAX_CACHED_HEADS: usize = 100_000;

/// Where the writer answers a command.
pub(crate) type Reply<T> = oneshot::Sender<Result<T>>;

pub(crate) enum Command {
    Append(AppendRequest),
    /// Resolves once everything appended before it is durable.
    Flush(Reply<()>),
}

pub(crate) struct AppendRequest {
    pub stream: StreamKey,
    pub expected: ExpectedPosition,
    pub records: Vec<NewRecord>,
    pub durability: Durability,
    /// The records' timestamp if not now (`log copy` keeps the originals').
    pub timestamp_ms: Option<u64>,
    pub reply: Reply<AppendOutcome>,
}

/// Most bytes of records in one round (it ends at the command passing it).
pub const MAX_ROUND_BYTES: usize = 64 * 1024 * 1024;

/// The writer's state and the durable waiters it holds, on the writer thread.
pub(crate) struct WritePath {
    writer: Writer,
    group: Group,
    watermark: Watermark,
}

impl WritePath {
    pub(crate) fn new(shared: &Shared, journal: JournalWriter) -> Self {
        Self {
            writer: Writer {
                heads: StreamMap::default(),
                next_global: shared.next_global_on_open,
                journal,
                scratch: Vec::new(),
            },
            group: Group::default(),
            watermark: Watermark::open(&shared.path),
        }
    }

    /// Writes a round and syncs or holds its durable appends; whether it holds.
    fn write_round(&mut self, shared: &Shared, round: Vec<Command>, nothing_waiting: bool) -> bool {
        let waiters = self.writer.apply_round(shared, round);
        if self.group.settle(waiters, nothing_waiting) {
            group_commit::commit(shared, self.group.take(), &mut self.watermark);
        }
        self.writer.maybe_rotate(shared);
        self.group.holds()
    }

    /// Ends the hold: the waiters held are synced now.
    fn release_held(&mut self, shared: &Shared) {
        if self.group.holds() {
            group_commit::commit(shared, self.group.take(), &mut self.watermark);
        }
    }

    /// Syncs what is held and the journal, then writes the watermark.
    fn close(&mut self, shared: &Shared) {
        self.release_held(shared);
        if shared.poisoned().is_none() && shared.make_durable().is_ok() {
            self.watermark.advance(self.writer.next_global);
        }
    }
}

/// The writer thread: journals every command waiting as one round, then syncs
/// the durable ones or holds them, going on with what waits up to the linger.
pub(crate) fn run_writer(
    shared: Arc<Shared>,
    mut commands: mpsc::Receiver<Command>,
    mut path: WritePath,
) {
    let waker = std::task::Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut linger_ends: Option<Instant> = None;
    loop {
        let first = match linger_ends {
            None => commands.blocking_recv(),
            Some(deadline) => match recv_until(&mut commands, &waker, deadline) {
                Received::Command(command) => Some(command),
                Received::Closed => None,
                Received::TimedOut => {
                    linger_ends = None;
                    path.release_held(&shared);
                    continue;
                }
            },
        };
        let Some(first) = first else { break };
        let round = take_round(first, &mut commands);
        let holds = path.write_round(&shared, round, commands.is_empty());
        linger_ends = match (holds, linger_ends) {
            (false, _) => None,
            // Commands that keep coming do not hold a group past its linger.
            (true, Some(deadline)) if Instant::now() >= deadline => {
                path.release_held(&shared);
                None
            }
            (true, Some(deadline)) => Some(deadline),
            (true, None) => Some(Instant::now() + Duration::from_micros(GROUP_LINGER_US)),
        };
    }
    path.close(&shared);
    shared.index_queue.close();
}

/// `first` and every command waiting behind it, up to a round's bounds.
fn take_round(first: Command, commands: &mut mpsc::Receiver<Command>) -> Vec<Command> {
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
    round
}

enum Received {
    Command(Command),
    Closed,
    TimedOut,
}

/// Wakes the writer thread parked in [`recv_until`].
struct ThreadWaker(std::thread::Thread);

impl std::task::Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// The next command, by `deadline` at most (the channel wakes this thread).
fn recv_until(
    commands: &mut mpsc::Receiver<Command>,
    waker: &std::task::Waker,
    deadline: Instant,
) -> Received {
    let mut context = std::task::Context::from_waker(waker);
    loop {
        match commands.poll_recv(&mut context) {
            std::task::Poll::Ready(Some(command)) => return Received::Command(command),
            std::task::Poll::Ready(None) => return Received::Closed,
            std::task::Poll::Pending => {}
        }
        let now = Instant::now();
        if now >= deadline {
            return Received::TimedOut;
        }
        // A spurious or stale unpark only polls again.
        std::thread::park_timeout(deadline - now);
    }
}

struct Writer {
    /// Next position of each stream the writer has touched.
    heads: StreamMap<u64>,
    next_global: u64,
    journal: JournalWriter,
    /// Where each record is encoded before it is copied (no allocation).
    scratch: Vec<u8>,
}

impl Writer {
    /// Starts a new journal file when [`JournalWriter::wants_rotation`].
    fn maybe_rotate(&mut self, shared: &Shared) {
        if !self.journal.wants_rotation() || shared.poisoned().is_some() {
            return;
        }
        match self.journal.rotate(self.next_global) {
            Ok(()) => {
                *lock(&shared.journal_file) = self.journal.file();
                // The rotation synced the file the writer left.
                shared.index_queue.note_durable(self.next_global);
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
                    }
                    .into(),
                );
            }
            return Vec::new();
        }
        let timestamp_ms = crate::record::now_ms();
        let commands = round.len();
        // The records of the round, by stream, in the order they apply.
        let mut written: Vec<(StreamKey, Vec<Record>)> = Vec::with_capacity(commands);
        let mut tentative: StreamMap<u64> =
            StreamMap::with_capacity_and_hasher(commands, Default::default());
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
                }
                .into()));
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
                    timestamp_ms: request.timestamp_ms.unwrap_or(timestamp_ms),
                };
                record::encode_into(&header, &request.stream, &new.payload, &mut self.scratch);
                // One allocation: the shared buffer is copied, not moved.
                let envelope = bytes::Bytes::copy_from_slice(&self.scratch);
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
        // The journal first: it is the durability, replayed into sled at open.
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
                let reason = format!("journal write failed: {error}");
                shared.poison(reason.clone());
                for (waiter, _) in accepted {
                    waiter.resolve(Err(LedgerError::Poisoned {
                        reason: reason.clone(),
                    }
                    .into()));
                }
                return Vec::new();
            }
        };
        // Where each run lies in the journal: sled's entries point there.
        let extents = Extent::of_runs(self.journal.base(), start, &written);
        shared.stats.rounds.fetch_add(1, Ordering::Relaxed);
        shared
            .stats
            .records
            .fetch_add(next_global - self.next_global, Ordering::Relaxed);
        metrics::counter!(ledgerwire_foundations::telemetry::LEDGER_RECORDS)
            .increment(next_global - self.next_global);
        metrics::counter!(ledgerwire_foundations::telemetry::LEDGER_BYTES).increment(bytes);
        self.next_global = next_global;
        shared
            .journaled_next_global
            .store(next_global, Ordering::Release);
        // Readers find the round here until the indexer applied it.
        let mut retired = Vec::new();
        shared
            .recent
            .extend(&written, shared.applied_next_global(), &mut retired);
        shared.notify_watchers(&tentative);
        self.heads.extend(tentative);
        shared.index_queue.push(Round {
            written,
            extents,
            end: journal::JournalEnd {
                file: self.journal.base(),
                offset: self.journal.len(),
                next_global,
            },
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

fn fail(command: Command, error: LocalError) {
    match command {
        Command::Append(request) => {
            let _ = request.reply.send(Err(error));
        }
        Command::Flush(reply) => {
            let _ = reply.send(Err(error));
        }
    }
}
