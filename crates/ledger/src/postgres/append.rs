//! Appends and flushes: each append one statement (or one part of a
//! batch's statement, `batch`), on the pool whose sessions commit as the
//! append's durability asks.
//!
//! The statement moves the stream's head row from the expected position
//! to the new one (or creates it, for a new stream) and inserts the
//! records only if that row moved, so two appends never extend one
//! position and a loser leaves nothing behind; it holds no lock across a
//! network wait (the statement is its own transaction). Each record's
//! global position is its transaction's id shifted left by
//! [`GLOBAL_OFFSET_BITS`] plus its offset in the transaction (LOG-FORMAT.md,
//! "The PostgreSQL store", says why that is an order readers can trust).
//!
//! Owns: the statements of one append and the flush.
//!
//! Must never: insert a record whose head row did not move in the same
//! statement, resolve a conflict with `ON CONFLICT DO NOTHING` on the
//! records, or acknowledge a durable append before its commit returned.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use deadpool_postgres::Pool;
use tokio_postgres::types::ToSql;

use super::error::PostgresError;
use super::read::head;
use super::{Shared, batch};
use crate::error::{LedgerError, Result};
use crate::record::{self, FORMAT_VERSION, Header, NewRecord, Record, StreamKey};
use crate::{AppendOutcome, Durability, ExpectedPosition, MAX_RECORDS_PER_APPEND, check_append};

/// Bits of a global position that number a record within its append:
/// enough for [`MAX_RECORDS_PER_APPEND`] records.
pub const GLOBAL_OFFSET_BITS: u32 = 10;

const _: () = assert!(MAX_RECORDS_PER_APPEND <= 1 << GLOBAL_OFFSET_BITS);

/// Most times an append at [`ExpectedPosition::Any`] reads the head and
/// tries again when another append moved it in between.
pub const MAX_ANY_ATTEMPTS: usize = 64;

// The two ways a head row moves (`$1` stream, `$2` expected head, `$3`
// record count), and the two ways records follow it (`$4` the envelopes,
// or one envelope); each statement is one of each, as string literals.
macro_rules! head_moved {
    () => {
        "
WITH moved AS (
    UPDATE ledgerwire_streams SET head = $2::int8 + $3::int8
    WHERE stream = $1 AND head = $2::int8
    RETURNING head
)"
    };
}
macro_rules! head_created {
    () => {
        "
WITH moved AS (
    INSERT INTO ledgerwire_streams (stream, head) VALUES ($1, $2::int8 + $3::int8)
    ON CONFLICT (stream) DO NOTHING
    RETURNING head
)"
    };
}
macro_rules! records_inserted {
    () => {
        ", inserted AS (
    INSERT INTO ledgerwire_records (stream, position, global, envelope)
    SELECT $1, $2::int8 + r.n - 1, (pg_current_xact_id()::text::int8 << 10) | (r.n - 1), r.envelope
    FROM moved, unnest($4::bytea[]) WITH ORDINALITY AS r(envelope, n)
    RETURNING global
)
SELECT min(global) FROM inserted"
    };
}
macro_rules! record_inserted {
    () => {
        "
INSERT INTO ledgerwire_records (stream, position, global, envelope)
SELECT $1, $2::int8, pg_current_xact_id()::text::int8 << 10, $4::bytea FROM moved
RETURNING global"
    };
}

/// Appends to a stream at a position other than 0: `$1` stream, `$2`
/// expected head, `$3` record count, `$4` the envelopes. One row: the
/// first record's global position, or NULL when the head was elsewhere.
const APPEND_AT: &str = concat!(head_moved!(), records_inserted!());

/// The same for a new stream (`$2` is 0): the head row is created, and a
/// stream someone else created first is a conflict (the head row, never
/// a record, is what `ON CONFLICT` leaves alone).
const APPEND_NEW: &str = concat!(head_created!(), records_inserted!());

/// [`APPEND_AT`] for one record (`$4` one envelope), the common case:
/// no array to build and unnest. No row when the head was elsewhere.
const APPEND_ONE_AT: &str = concat!(head_moved!(), record_inserted!());

/// [`APPEND_NEW`] for one record.
const APPEND_ONE_NEW: &str = concat!(head_created!(), record_inserted!());

/// A commit that writes WAL (an update of a row of ours) in a session
/// with `synchronous_commit = on`: PostgreSQL flushes the WAL up to its
/// commit record before answering, and with it every commit before it.
const FLUSH: &str = "UPDATE ledgerwire_meta SET value = value + 1 WHERE key = 'flushes'";

/// Appends `records` at `expected`; the outcome and the envelopes as
/// stored (global position 0), for [`super::read::stored_record`].
pub(super) async fn append(
    shared: &Arc<Shared>,
    stream: &StreamKey,
    expected: ExpectedPosition,
    records: Vec<NewRecord>,
    durability: Durability,
) -> Result<(AppendOutcome, Vec<Vec<u8>>)> {
    check_append(&records)?;
    shared.check_not_damaged(stream)?;
    let timestamp_ms = record::now_ms();
    let encode = |at: u64| {
        let records = records
            .iter()
            .map(|new| (new.kind, &new.payload[..], timestamp_ms));
        envelopes(stream, at, records)
    };
    let mut at = match expected {
        ExpectedPosition::Exactly(at) => {
            return append_at(shared, stream, at, encode(at), durability).await;
        }
        ExpectedPosition::Any => head(shared, stream).await?,
    };
    // Any position: the head as read, again while others move it.
    for _ in 1..MAX_ANY_ATTEMPTS {
        match append_at(shared, stream, at, encode(at), durability).await {
            Err(LedgerError::Conflict { actual, .. }) => at = actual,
            outcome => return outcome,
        }
    }
    append_at(shared, stream, at, encode(at), durability).await
}

/// Appends copies of `records` (another store's, `log copy`) at `at`,
/// buffered, each keeping its kind, payload and timestamp.
pub(super) async fn append_copies(
    shared: &Arc<Shared>,
    stream: &StreamKey,
    at: u64,
    records: &[Record],
) -> Result<AppendOutcome> {
    let copied = crate::copied_fields(records)?;
    let envelopes = envelopes(stream, at, copied);
    let (outcome, _) = append_at(shared, stream, at, envelopes, Durability::Buffered).await?;
    Ok(outcome)
}

/// Appends the envelopes at `at` in the next batch (`batch`).
async fn append_at(
    shared: &Arc<Shared>,
    stream: &StreamKey,
    at: u64,
    envelopes: Vec<Vec<u8>>,
    durability: Durability,
) -> Result<(AppendOutcome, Vec<Vec<u8>>)> {
    let count = envelopes.len() as u64;
    let started = Instant::now();
    let (inserted, envelopes) =
        batch::submit(shared, stream.clone(), at, envelopes, durability).await;
    let Some(first_global) = inserted? else {
        shared.counters.conflicts.fetch_add(1, Ordering::Relaxed);
        let actual = head(shared, stream).await?;
        return Err(LedgerError::Conflict {
            stream: stream.to_string(),
            expected: at,
            actual,
        });
    };
    shared
        .counters
        .appended(durability, count, started.elapsed());
    shared.heads.appended(stream, at + count);
    let outcome = AppendOutcome {
        first_position: at,
        next_position: at + count,
        first_global_position: first_global,
    };
    Ok((outcome, envelopes))
}

/// The records' envelopes as stored: the local store's bytes with global
/// position 0 (a record's global position is known only once its
/// statement runs; reads put it in and checksum the envelope again).
fn envelopes<'a>(
    stream: &StreamKey,
    at: u64,
    records: impl Iterator<Item = (u16, &'a [u8], u64)>,
) -> Vec<Vec<u8>> {
    records
        .zip(at..)
        .map(|((kind, payload, timestamp_ms), position)| {
            let header = Header {
                format_version: FORMAT_VERSION,
                kind,
                position,
                global_position: 0,
                timestamp_ms,
            };
            record::encode(&header, stream, payload)
        })
        .collect()
}

/// Runs the statement of one append alone; the first global position,
/// or `None` when the head was not at `at`.
pub(super) async fn run(
    pool: &Pool,
    stream: &StreamKey,
    at: u64,
    envelopes: &Vec<Vec<u8>>,
) -> Result<Option<u64>, PostgresError> {
    let doing = "append";
    let failed = |e: tokio_postgres::Error| PostgresError::statement(doing, &e);
    let client = pool.get().await?;
    let count = envelopes.len() as i64;
    let (stream, position) = (stream.as_str(), at as i64);
    let first_global: Option<i64> = match envelopes.as_slice() {
        [envelope] => {
            let sql = if at == 0 {
                APPEND_ONE_NEW
            } else {
                APPEND_ONE_AT
            };
            let statement = client.prepare_cached(sql).await.map_err(failed)?;
            let params: [&(dyn ToSql + Sync); 4] = [&stream, &position, &count, envelope];
            let row = client
                .query_opt(&statement, &params)
                .await
                .map_err(failed)?;
            row.map(|row| row.get(0))
        }
        _ => {
            let sql = if at == 0 { APPEND_NEW } else { APPEND_AT };
            let statement = client.prepare_cached(sql).await.map_err(failed)?;
            let params: [&(dyn ToSql + Sync); 4] = [&stream, &position, &count, envelopes];
            let row = client
                .query_one(&statement, &params)
                .await
                .map_err(failed)?;
            row.get(0)
        }
    };
    Ok(first_global.map(|global| global as u64))
}

/// Makes every append acknowledged before the call durable.
pub(super) async fn flush(shared: &Shared) -> Result<()> {
    let started = Instant::now();
    let flushed = async {
        let client = shared.durable.get().await?;
        client
            .execute(FLUSH, &[])
            .await
            .map_err(|e| PostgresError::statement("flush", &e))?;
        Ok(())
    };
    shared.availability.observe(flushed.await)?;
    shared.counters.flushed(started.elapsed());
    Ok(())
}
