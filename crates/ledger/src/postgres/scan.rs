//! The global-order scan: every record below a horizon fixed when the
//! scan starts, in global position order, never passing a record that
//! can still commit.
//!
//! A record's global position is its transaction's id (shifted) plus its
//! offset in its append. The scan takes the `xmax` of a snapshot at its
//! start (every transaction that committed before the call has a smaller
//! id) as its horizon, then waits, at most [`SCAN_HORIZON_WAIT_MS`],
//! until the `xmin` of a later snapshot reaches it: from then on no
//! transaction below the horizon can still commit, so the pages read
//! below it are final. LOG-FORMAT.md ("Global order on PostgreSQL") has
//! the argument.
//!
//! Owns: the scan's horizon and its paging below it.
//!
//! Must never: read past a transaction id some open transaction may
//! still commit under, or wait without a bound.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::stream::BoxStream;

use super::Shared;
use super::append::GLOBAL_OFFSET_BITS;
use super::error::PostgresError;
use super::read::stored_record;
use crate::error::{LedgerError, Result};
use crate::record::Record;

/// Records one page of a global scan reads at a time.
pub const SCAN_PAGE_RECORDS: usize = 256;

/// Longest a scan waits for the transactions below its horizon to end
/// before it gives up as unavailable, naming the oldest one's process.
pub const SCAN_HORIZON_WAIT_MS: u64 = 10_000;

/// Longest pause between two looks at the oldest open transaction.
const HORIZON_POLL_MAX_MS: u64 = 50;

const SNAPSHOT_XMAX: &str = "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::int8";
const SNAPSHOT_XMIN: &str = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::int8";
const OLDEST_TRANSACTION: &str = "SELECT pid, coalesce(datname, ''), coalesce(state, ''),
    coalesce(extract(epoch FROM now() - xact_start)::int8, 0)
FROM pg_stat_activity WHERE backend_xid IS NOT NULL ORDER BY age(backend_xid) DESC LIMIT 1";
const PAGE: &str = "SELECT stream, position, global, envelope FROM ledgerwire_records
WHERE global >= $1 AND global < $2 ORDER BY global LIMIT $3";

pub(super) fn scan_global(shared: Arc<Shared>, from: u64) -> BoxStream<'static, Result<Record>> {
    Box::pin(async_stream::stream! {
        let horizon = match settle(&shared).await {
            Ok(horizon) => horizon,
            Err(error) => {
                yield Err(error);
                return;
            }
        };
        let end = horizon << GLOBAL_OFFSET_BITS;
        let mut next = from.min(i64::MAX as u64) as i64;
        loop {
            let rows = match page(&shared, next, end).await {
                Ok(rows) => rows,
                Err(error) => {
                    yield Err(error);
                    return;
                }
            };
            let full = rows.len() == SCAN_PAGE_RECORDS;
            for (stream, position, global, envelope) in rows {
                next = global + 1;
                let position = position as u64;
                // Damage is reported and the scan goes on past it.
                yield stored_record(&stream, position, global, envelope)
                    .map_err(|corruption| shared.damaged(&stream, position, corruption));
            }
            if !full {
                return;
            }
        }
    })
}

/// Fixes the horizon (a transaction id) and waits until no transaction
/// below it is open.
async fn settle(shared: &Shared) -> Result<i64> {
    let doing = "fix the horizon of a global scan";
    let failed = |e: tokio_postgres::Error| PostgresError::statement(doing, &e);
    let client = shared
        .availability
        .observe(shared.buffered.get().await.map_err(PostgresError::from))?;
    let horizon: i64 = shared
        .availability
        .observe(client.query_one(SNAPSHOT_XMAX, &[]).await.map_err(failed))?
        .get(0);
    let deadline = Instant::now() + Duration::from_millis(SCAN_HORIZON_WAIT_MS);
    let mut pause = Duration::from_millis(1);
    loop {
        let oldest_open: i64 = shared
            .availability
            .observe(client.query_one(SNAPSHOT_XMIN, &[]).await.map_err(failed))?
            .get(0);
        if oldest_open >= horizon {
            return Ok(horizon);
        }
        if Instant::now() >= deadline {
            let holder = client
                .query_opt(OLDEST_TRANSACTION, &[])
                .await
                .map_err(failed)?;
            let holder = holder.map_or_else(
                || "an open transaction".to_owned(),
                |row| {
                    format!(
                        "the transaction of PostgreSQL process {} (database {:?}, {}, open {} s)",
                        row.get::<_, i32>(0),
                        row.get::<_, String>(1),
                        row.get::<_, String>(2),
                        row.get::<_, i64>(3)
                    )
                },
            );
            return Err(LedgerError::Unavailable {
                reason: format!(
                    "{holder} has stayed open for over {SCAN_HORIZON_WAIT_MS} ms below the global scan's horizon, and records it may still commit would be skipped; end it (pg_terminate_backend) or retry later"
                ),
            });
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(HORIZON_POLL_MAX_MS));
    }
}

/// One page of rows below `end` from `next`.
async fn page(shared: &Shared, next: i64, end: i64) -> Result<Vec<(String, i64, i64, Vec<u8>)>> {
    let doing = "read a page of the global order";
    let rows = async {
        let client = shared.buffered.get().await?;
        let statement = client
            .prepare_cached(PAGE)
            .await
            .map_err(|e| PostgresError::statement(doing, &e))?;
        client
            .query(&statement, &[&next, &end, &(SCAN_PAGE_RECORDS as i64)])
            .await
            .map_err(|e| PostgresError::statement(doing, &e))
    };
    let rows = shared.availability.observe(rows.await)?;
    Ok(rows
        .into_iter()
        .map(|row| (row.get(0), row.get(1), row.get(2), row.get(3)))
        .collect())
}
