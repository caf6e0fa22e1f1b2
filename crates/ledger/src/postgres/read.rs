//! Reads of one stream and of the stream list, each one statement on the
//! buffered pool, and the check every stored record passes before it is
//! handed out.
//!
//! Owns: [`stored_record`], the one place a row becomes a [`Record`]: its
//! envelope checked (length, CRC32C, version, stream and position), then
//! given the row's global position and checksummed again.
//! Must never: hand out a record that did not pass that check, or skip a
//! position of a stream.

use bytes::Bytes;

use super::Shared;
use super::error::PostgresError;
use crate::error::{Corruption, LedgerError, Result};
use crate::record::{CRC_BYTES, Record, StreamKey};

const READ_HEAD: &str = "SELECT head FROM ledgerwire_streams WHERE stream = $1";

const READ: &str = "SELECT position, global, envelope FROM ledgerwire_records
WHERE stream = $1 AND position >= $2 ORDER BY position LIMIT $3";

const STREAMS: &str =
    "SELECT stream FROM ledgerwire_streams WHERE stream > $1 ORDER BY stream LIMIT $2";

/// Byte offset of the global position in an envelope (LOG-FORMAT.md).
const GLOBAL_AT: usize = 16;

/// The stream's head row, 0 for a stream without one.
pub(super) async fn head(shared: &Shared, stream: &StreamKey) -> Result<u64> {
    let doing = "read a stream's head";
    let read = async {
        let client = shared.buffered.get().await?;
        let statement = client
            .prepare_cached(READ_HEAD)
            .await
            .map_err(|e| PostgresError::statement(doing, &e))?;
        let row = client
            .query_opt(&statement, &[&stream.as_str()])
            .await
            .map_err(|e| PostgresError::statement(doing, &e))?;
        Ok(row.map_or(0, |row| row.get::<_, i64>(0) as u64))
    };
    shared.availability.observe(read.await)
}

/// Up to `max_records` records of `stream` from `from`.
pub(super) async fn read(
    shared: &Shared,
    stream: &StreamKey,
    from: u64,
    max_records: usize,
) -> Result<Vec<Record>> {
    shared.check_not_damaged(stream)?;
    if max_records == 0 {
        return Ok(Vec::new());
    }
    let doing = "read a stream";
    let rows = async {
        let client = shared.buffered.get().await?;
        let statement = client
            .prepare_cached(READ)
            .await
            .map_err(|e| PostgresError::statement(doing, &e))?;
        client
            .query(
                &statement,
                &[&stream.as_str(), &(from as i64), &(max_records as i64)],
            )
            .await
            .map_err(|e| PostgresError::statement(doing, &e))
    };
    let rows = shared.availability.observe(rows.await)?;
    let mut records = Vec::with_capacity(rows.len());
    for (row, expected) in rows.into_iter().zip(from..) {
        let position = row.get::<_, i64>(0) as u64;
        let checked = if position == expected {
            stored_record(stream.as_str(), position, row.get(1), row.get(2))
        } else {
            Err(Corruption::Gap {
                expected,
                found: position,
            })
        };
        match checked {
            Ok(record) => records.push(record),
            Err(corruption) => {
                return Err(shared.damaged(stream.as_str(), expected, corruption));
            }
        }
    }
    Ok(records)
}

/// Up to `max` stream keys after `after`, in byte order.
pub(super) async fn streams(
    shared: &Shared,
    after: Option<&StreamKey>,
    max: usize,
) -> Result<Vec<StreamKey>> {
    let doing = "list streams";
    let rows = async {
        let client = shared.buffered.get().await?;
        let statement = client
            .prepare_cached(STREAMS)
            .await
            .map_err(|e| PostgresError::statement(doing, &e))?;
        let after = after.map_or("", StreamKey::as_str);
        client
            .query(&statement, &[&after, &(max as i64)])
            .await
            .map_err(|e| PostgresError::statement(doing, &e))
    };
    let rows = shared.availability.observe(rows.await)?;
    rows.iter()
        .map(|row| StreamKey::new(row.get::<_, String>(0)))
        .collect::<Result<Vec<_>, LedgerError>>()
}

/// A stored row as a record: its envelope checked as stored (global
/// position 0), then given the row's global position with a fresh CRC32C,
/// so the record handed out has the local store's bytes.
pub(super) fn stored_record(
    stream: &str,
    position: u64,
    global: i64,
    envelope: Vec<u8>,
) -> Result<Record, Corruption> {
    let stored = Record::decode(Bytes::from(envelope), stream, position)?;
    if stored.global_position() != 0 {
        return Err(Corruption::Storage {
            detail: format!(
                "the stored envelope carries global position {} where this store writes 0",
                stored.global_position()
            ),
        });
    }
    let mut header = *stored.header();
    header.global_position = global as u64;
    let mut bytes = stored.bytes().to_vec();
    bytes[GLOBAL_AT..GLOBAL_AT + 8].copy_from_slice(&header.global_position.to_le_bytes());
    let body = bytes.len() - CRC_BYTES;
    let crc = crc32c::crc32c(&bytes[..body]);
    bytes[body..].copy_from_slice(&crc.to_le_bytes());
    Ok(Record::encoded(Bytes::from(bytes), header))
}
