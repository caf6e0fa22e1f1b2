//! The single writer and the group-commit flusher.
//!
//! Owns: assigning positions, the optimistic-concurrency check, atomic
//! application of each round of appends as one sled batch, and making them
//! durable. All appends of the process pass through one writer thread, so
//! the head check and the write are one step; two writers can never both
//! extend the same position. Durable appends wait for the flusher, which
//! makes everything written so far durable with one flush for every waiter
//! (group commit) while the writer goes on applying the next round.
//! Must never: acknowledge a durable append before its flush returned, or
//! accept a write after a flush failed (the process must restart, since what
//! sled holds in memory may no longer match the disk).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, oneshot};

use crate::ledger::error::{LedgerError, Result};
use crate::ledger::record::{self, FORMAT_VERSION, Header, NEXT_GLOBAL_KEY, NewRecord, StreamKey};
use crate::ledger::{AppendOutcome, Durability, ExpectedPosition, Shared};

/// Most commands the writer takes into one sled batch.
pub const MAX_COMMANDS_PER_ROUND: usize = 1024;

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
}

impl FlushQueue {
    fn push(&self, waiters: Vec<Waiter>) {
        if waiters.is_empty() {
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.waiters.extend(waiters);
        self.ready.notify_one();
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
                return Some(std::mem::take(&mut state.waiters));
            }
            if state.closed {
                return None;
            }
            state = self.ready.wait(state).unwrap_or_else(|p| p.into_inner());
        }
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
            state = self
                .ready
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
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
    let mut previous_group = 1;
    let interval = Duration::from_millis(crate::ledger::watermark::WATERMARK_INTERVAL_MS);
    let mut watermark_at: Option<Instant> = None;
    while let Some(mut waiters) = queue.take() {
        if waiters.len() * 2 < previous_group {
            queue.gather(
                &mut waiters,
                previous_group,
                Duration::from_micros(GROUP_LINGER_US),
            );
        }
        previous_group = waiters.len();
        let started = Instant::now();
        // Read before the flush: every record below it is covered by it.
        let covered = shared.applied_next_global.load(Ordering::Acquire);
        let result = shared.make_durable();
        metrics::counter!(crate::telemetry::LEDGER_FLUSHES).increment(1);
        metrics::histogram!(crate::telemetry::LEDGER_FLUSH_SECONDS)
            .record(started.elapsed().as_secs_f64());
        metrics::histogram!(crate::telemetry::LEDGER_GROUP_COMMIT).record(waiters.len() as f64);
        shared.stats.flushes.fetch_add(1, Ordering::Relaxed);
        shared
            .stats
            .flushed_waiters
            .fetch_add(waiters.len() as u64, Ordering::Relaxed);
        if let Err(error) = &result {
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
        if result.is_ok() && watermark_at.is_none_or(|at| at.elapsed() >= interval) {
            shared.advance_watermark(covered);
            watermark_at = Some(Instant::now());
        }
    }
}

/// The writer thread: takes every command that is waiting, applies the
/// accepted appends as one atomic sled batch, then hands durable ones to
/// the flusher.
pub(crate) fn run_writer(
    shared: Arc<Shared>,
    mut commands: mpsc::Receiver<Command>,
    queue: Arc<FlushQueue>,
) {
    let mut writer = Writer {
        heads: HashMap::new(),
        next_global: shared.next_global_on_open,
    };
    while let Some(first) = commands.blocking_recv() {
        let mut round = vec![first];
        while round.len() < MAX_COMMANDS_PER_ROUND {
            match commands.try_recv() {
                Ok(command) => round.push(command),
                Err(_) => break,
            }
        }
        let waiters = writer.apply_round(&shared, round);
        queue.push(waiters);
    }
    queue.close();
}

struct Writer {
    /// Next position of each stream the writer has touched.
    heads: HashMap<StreamKey, u64>,
    next_global: u64,
}

impl Writer {
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
        let mut batch = sled::Batch::default();
        let mut tentative: HashMap<StreamKey, u64> = HashMap::new();
        let mut next_global = self.next_global;
        let mut accepted: Vec<(Waiter, Durability)> = Vec::new();
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
            for (offset, new) in request.records.iter().enumerate() {
                let header = Header {
                    format_version: FORMAT_VERSION,
                    kind: new.kind,
                    position: head + offset as u64,
                    global_position: next_global + offset as u64,
                    timestamp_ms,
                };
                let envelope = record::encode(&header, &request.stream, &new.payload);
                bytes += envelope.len() as u64;
                batch.insert(
                    record::record_key(&request.stream, header.position),
                    envelope,
                );
            }
            next_global += request.records.len() as u64;
            tentative.insert(request.stream, outcome.next_position);
            accepted.push((Waiter::Append(request.reply, outcome), request.durability));
        }
        if tentative.is_empty() {
            // Only flush requests (or refused appends): nothing to write.
            return accepted.into_iter().map(|(waiter, _)| waiter).collect();
        }
        batch.insert(NEXT_GLOBAL_KEY, &next_global.to_be_bytes());
        if let Err(error) = shared.log.apply_batch(batch) {
            // sled's state is unknown after a failed batch: stop writing.
            let reason = format!("batch failed: {error}");
            shared.poison(reason.clone());
            for (waiter, _) in accepted {
                waiter.resolve(Err(LedgerError::Poisoned {
                    reason: reason.clone(),
                }));
            }
            return Vec::new();
        }
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
            .applied_next_global
            .store(next_global, Ordering::Release);
        shared.notify_watchers(&tentative);
        self.heads.extend(tentative);
        let mut durable = Vec::new();
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
