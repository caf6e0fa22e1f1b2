//! What an append asks and what it answers: the position a writer
//! expects, when the append is acknowledged, where it landed, and the
//! refusals every store makes the same way before it writes.
//!
//! Owns: [`ExpectedPosition`], [`Durability`], [`AppendOutcome`], the
//! bound on one append ([`MAX_RECORDS_PER_APPEND`]) and its checks. Must
//! never: write or read a store, or let one engine refuse what another
//! accepts (every store calls [`check_append`] first).

use crate::error::{LedgerError, Result};
use crate::record::{self, NewRecord, Record};

/// Most records one append may carry.
pub const MAX_RECORDS_PER_APPEND: usize = 1024;

/// What the caller believes the stream's next position to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpectedPosition {
    /// The append succeeds only if the stream holds exactly this many
    /// records (0: the stream must be new).
    Exactly(u64),
    /// Append at whatever the end is.
    Any,
}

/// When an append is acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// After the records, and every append acknowledged before them, are
    /// on stable storage.
    Durable,
    /// As soon as the records are visible to readers; they become durable
    /// with the next durable append or flush, never out of order.
    Buffered,
}

/// Where an append landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendOutcome {
    /// Position of the first appended record.
    pub first_position: u64,
    /// The stream's next position after the append (its record count).
    pub next_position: u64,
    /// Global position of the first appended record.
    pub first_global_position: u64,
}

/// Refuses an append no store may take: no records, too many, or a
/// payload past [`record::MAX_PAYLOAD_BYTES`]. Every store calls it
/// before anything else, so the refusal is the same on every engine.
pub fn check_append(records: &[NewRecord]) -> Result<()> {
    check_batch_size(records.len())?;
    if let Some(big) = records
        .iter()
        .find(|r| r.payload.len() > record::MAX_PAYLOAD_BYTES)
    {
        return Err(LedgerError::PayloadTooLarge {
            len: big.payload.len(),
            max: record::MAX_PAYLOAD_BYTES,
        });
    }
    Ok(())
}

/// Refuses an append of no records or of more than
/// [`MAX_RECORDS_PER_APPEND`].
fn check_batch_size(len: usize) -> Result<()> {
    if len == 0 || len > MAX_RECORDS_PER_APPEND {
        return Err(LedgerError::BatchSize {
            len,
            max: MAX_RECORDS_PER_APPEND,
        });
    }
    Ok(())
}

/// What a store's `append_copies` writes of each copied record (kind,
/// payload, timestamp), once the batch's size is checked.
pub fn copied_fields(records: &[Record]) -> Result<impl Iterator<Item = (u16, &[u8], u64)> + '_> {
    check_batch_size(records.len())?;
    Ok(records
        .iter()
        .map(|record| (record.kind(), record.payload(), record.timestamp_ms())))
}
