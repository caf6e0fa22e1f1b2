//! Group commit: appends that wait together go to the database as one
//! statement, so one round trip and one commit (one transaction) carry
//! appends to many streams.
//!
//! An append joins the queue; while fewer than the store's batches in
//! flight run, it starts one at once with whatever waits (often only
//! itself: a lone writer is not held back). Each batch, once committed,
//! takes the next one from the queue, so appends arriving while the
//! batches are in flight ride in the next. A batch holds at most one
//! append per stream (a later one to the same stream waits for the next
//! batch, in order), at most [`MAX_RECORDS_PER_APPEND`] records in all
//! (each record's offset in the batch's transaction is its global
//! position's low bits) and at most [`MAX_BATCH_BYTES`]. Each append in
//! the statement is still guarded by its own head row: one that finds its
//! head moved gets a conflict and inserts nothing, the others land. A
//! batch is durable if one of its appends asks for it (it commits on the
//! durable pool), and every append in it is acknowledged only once the
//! commit returned.
//!
//! Why one statement and not a transaction of several: in PostgreSQL's
//! READ COMMITTED each statement takes a new snapshot, so a later
//! statement could accept a head moved by a transaction that committed
//! after this one took its id, and give the record a global position
//! below its predecessor's. One statement sees one snapshot taken before
//! its id (LOG-FORMAT.md, "Global order on PostgreSQL").
//!
//! Owns: the queue, the batches in flight and the batch statement.
//! Must never: put two appends to one stream in a batch, exceed
//! [`MAX_RECORDS_PER_APPEND`] records in a batch, acknowledge an append
//! before its batch committed, or leave an append waiting with no batch
//! in flight to take it.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;
use tokio_postgres::types::ToSql;

use super::Shared;
use super::error::PostgresError;
use crate::error::{LedgerError, Result};
use crate::record::StreamKey;
use crate::{Durability, MAX_RECORDS_PER_APPEND};

/// Most bytes of envelopes one batch carries (a lone append larger than
/// this goes alone).
pub const MAX_BATCH_BYTES: usize = 8 << 20;

/// Batches of appends a store runs at once unless its URL says
/// otherwise (`?ledgerwire_batches=N`): appends that arrive while they
/// run wait for the next.
pub const DEFAULT_BATCHES_IN_FLIGHT: usize = 2;

/// Appends to many streams, each at its own expected head (`$1` streams,
/// `$2` expected heads, `$3` record counts, `$4` each append's first
/// offset among the envelopes, `$5` the envelopes, `$6` the append each
/// envelope belongs to, 1-based). One row per append that landed: its
/// stream and its first record's global position.
const APPEND_BATCH: &str = r#"
WITH batch AS (
    SELECT b.stream COLLATE "C" AS stream, b.expected, b.n, b.first_offset, b.i
    FROM unnest($1::text[], $2::int8[], $3::int8[], $4::int8[])
        WITH ORDINALITY AS b(stream, expected, n, first_offset, i)
), moved AS (
    UPDATE ledgerwire_streams s SET head = b.expected + b.n
    FROM batch b
    WHERE s.stream = b.stream AND b.expected > 0 AND s.head = b.expected
    RETURNING b.i
), created AS (
    INSERT INTO ledgerwire_streams (stream, head)
    SELECT stream, n FROM batch WHERE expected = 0 ORDER BY stream
    ON CONFLICT (stream) DO NOTHING
    RETURNING stream
), landed AS (
    SELECT i FROM moved
    UNION ALL
    SELECT b.i FROM created c JOIN batch b ON b.stream = c.stream AND b.expected = 0
), inserted AS (
    INSERT INTO ledgerwire_records (stream, position, global, envelope)
    SELECT b.stream, b.expected + (r.k - 1 - b.first_offset),
        (pg_current_xact_id()::text::int8 << 10) | (r.k - 1), r.envelope
    FROM landed l
    JOIN batch b ON b.i = l.i
    JOIN unnest($5::bytea[], $6::int8[]) WITH ORDINALITY AS r(envelope, owner, k) ON r.owner = l.i
    RETURNING stream, global
)
SELECT stream::text, min(global) FROM inserted GROUP BY stream"#;

/// One append waiting for its batch.
pub(super) struct Pending {
    pub(super) stream: StreamKey,
    pub(super) at: u64,
    pub(super) envelopes: Vec<Vec<u8>>,
    pub(super) durability: Durability,
    reply: oneshot::Sender<Reply>,
}

/// What an append hears back: its first global position (`None`: its
/// head was elsewhere, nothing written), and its envelopes.
pub(super) type Reply = (Result<Option<u64>>, Vec<Vec<u8>>);

/// The appends waiting and the batches running.
#[derive(Default)]
pub(super) struct Batcher {
    queue: Mutex<Queue>,
    /// Batches that may run at once.
    pub(super) limit: usize,
}

#[derive(Default)]
struct Queue {
    waiting: VecDeque<Pending>,
    in_flight: usize,
}

impl Batcher {
    pub(super) fn new(limit: usize) -> Self {
        Self {
            queue: Mutex::default(),
            limit: limit.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Queues an append and waits for its batch's outcome.
pub(super) async fn submit(
    shared: &Arc<Shared>,
    stream: StreamKey,
    at: u64,
    envelopes: Vec<Vec<u8>>,
    durability: Durability,
) -> Reply {
    let (reply, outcome) = oneshot::channel();
    let started = {
        let mut queue = shared.batcher.lock();
        queue.waiting.push_back(Pending {
            stream,
            at,
            envelopes,
            durability,
            reply,
        });
        if queue.in_flight < shared.batcher.limit {
            queue.in_flight += 1;
            Some(take_batch(&mut queue.waiting))
        } else {
            None
        }
    };
    if let Some(batch) = started {
        tokio::spawn(run_batches(shared.clone(), batch));
    }
    outcome.await.unwrap_or_else(|_| {
        let reason = "the append's batch ended without an outcome; it may or may not have landed";
        (
            Err(LedgerError::Unavailable {
                reason: reason.to_owned(),
            }),
            Vec::new(),
        )
    })
}

/// Runs `batch`, then the next batches waiting, until none waits.
async fn run_batches(shared: Arc<Shared>, mut batch: Vec<Pending>) {
    loop {
        execute(&shared, batch).await;
        let mut queue = shared.batcher.lock();
        batch = take_batch(&mut queue.waiting);
        if batch.is_empty() {
            queue.in_flight -= 1;
            return;
        }
    }
}

/// The next batch from the front of the queue: at most one append per
/// stream (a stream's later appends keep their order), within the
/// record and byte budgets; the first append always goes.
fn take_batch(waiting: &mut VecDeque<Pending>) -> Vec<Pending> {
    let mut batch = Vec::new();
    let mut streams = HashSet::new();
    let (mut records, mut bytes) = (0usize, 0usize);
    let mut kept = VecDeque::new();
    while let Some(pending) = waiting.pop_front() {
        let size: usize = pending.envelopes.iter().map(Vec::len).sum();
        let fits = batch.is_empty()
            || (records + pending.envelopes.len() <= MAX_RECORDS_PER_APPEND
                && bytes + size <= MAX_BATCH_BYTES);
        // Once a stream waits, its later appends wait behind it.
        let first_of_stream = streams.insert(pending.stream.clone());
        if fits && first_of_stream {
            records += pending.envelopes.len();
            bytes += size;
            batch.push(pending);
        } else {
            kept.push_back(pending);
        }
        if records >= MAX_RECORDS_PER_APPEND {
            break;
        }
    }
    kept.append(waiting);
    *waiting = kept;
    batch
}

/// Runs one batch and answers each of its appends.
async fn execute(shared: &Shared, mut batch: Vec<Pending>) {
    // Sorted by stream: two batches lock their head rows in one order.
    batch.sort_by(|a, b| a.stream.cmp(&b.stream));
    let durability = if batch
        .iter()
        .any(|pending| pending.durability == Durability::Durable)
    {
        Durability::Durable
    } else {
        Durability::Buffered
    };
    let pool = match durability {
        Durability::Durable => &shared.durable,
        Durability::Buffered => &shared.buffered,
    };
    let outcome = match batch.as_slice() {
        [one] => super::append::run(pool, &one.stream, one.at, &one.envelopes)
            .await
            .map(|first| vec![first]),
        _ => run(pool, &batch).await,
    };
    shared.counters.batched(durability, batch.len());
    match shared.availability.observe(outcome) {
        Ok(firsts) => {
            for (pending, first) in batch.into_iter().zip(firsts) {
                let _ = pending.reply.send((Ok(first), pending.envelopes));
            }
        }
        Err(error) => {
            // A failed batch statement is a failure to use the database
            // (`PostgresError`): retryable for each of its appends.
            let reason = match error {
                LedgerError::Unavailable { reason } => reason,
                other => other.to_string(),
            };
            for pending in batch {
                let error = LedgerError::Unavailable {
                    reason: reason.clone(),
                };
                let _ = pending.reply.send((Err(error), pending.envelopes));
            }
        }
    }
}

/// Runs the batch statement: each append's first global position, in
/// the batch's order (`None` for those whose head was elsewhere).
async fn run(
    pool: &deadpool_postgres::Pool,
    batch: &[Pending],
) -> std::result::Result<Vec<Option<u64>>, PostgresError> {
    let doing = "append a batch";
    let failed = |e: tokio_postgres::Error| PostgresError::statement(doing, &e);
    let mut streams = Vec::with_capacity(batch.len());
    let (mut expected, mut counts, mut first_offsets) = (Vec::new(), Vec::new(), Vec::new());
    let (mut envelopes, mut owners) = (Vec::new(), Vec::new());
    for (index, pending) in batch.iter().enumerate() {
        streams.push(pending.stream.as_str());
        expected.push(pending.at as i64);
        counts.push(pending.envelopes.len() as i64);
        first_offsets.push(envelopes.len() as i64);
        for envelope in &pending.envelopes {
            envelopes.push(envelope.as_slice());
            owners.push(index as i64 + 1);
        }
    }
    let client = pool.get().await?;
    let statement = client.prepare_cached(APPEND_BATCH).await.map_err(failed)?;
    let params: [&(dyn ToSql + Sync); 6] = [
        &streams,
        &expected,
        &counts,
        &first_offsets,
        &envelopes,
        &owners,
    ];
    let rows = client.query(&statement, &params).await.map_err(failed)?;
    let mut firsts = vec![None; batch.len()];
    for row in rows {
        let (stream, first): (String, i64) = (row.get(0), row.get(1));
        if let Some(index) = streams.iter().position(|s| *s == stream) {
            firsts[index] = Some(first as u64);
        }
    }
    Ok(firsts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(stream: &str, records: usize) -> Pending {
        Pending {
            stream: StreamKey::new(stream).unwrap(),
            at: 0,
            envelopes: vec![vec![0u8; 10]; records],
            durability: Durability::Buffered,
            reply: oneshot::channel().0,
        }
    }

    fn names(batch: &[Pending]) -> Vec<&str> {
        batch.iter().map(|p| p.stream.as_str()).collect()
    }

    #[test]
    fn a_batch_takes_one_append_per_stream_in_order_within_its_budget() {
        let mut waiting: VecDeque<Pending> = [
            pending("a", 1),
            pending("b", 2),
            pending("a", 1),
            pending("c", 1000),
            pending("d", 30),
            pending("c", 1),
            pending("e", 21),
        ]
        .into();
        let batch = take_batch(&mut waiting);
        // "d" would pass 1024 records; "c"'s second waits behind its first.
        assert_eq!(names(&batch), ["a", "b", "c", "e"]);
        assert_eq!(batch.iter().map(|p| p.envelopes.len()).sum::<usize>(), 1024);
        assert_eq!(names(waiting.make_contiguous()), ["a", "d", "c"]);
        let batch = take_batch(&mut waiting);
        assert_eq!(names(&batch), ["a", "d", "c"]);
        assert!(take_batch(&mut waiting).is_empty());
    }

    #[test]
    fn an_append_alone_goes_whatever_its_size() {
        let mut waiting: VecDeque<Pending> = [pending("a", 1024), pending("b", 1)].into();
        assert_eq!(names(&take_batch(&mut waiting)), ["a"]);
        assert_eq!(names(&take_batch(&mut waiting)), ["b"]);
    }
}
