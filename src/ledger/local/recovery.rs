//! What opening a store does before it serves, and what a checkpoint
//! does: sled brought up to the journal (the rounds it lost applied
//! again), sled's files made durable, the watermark checked against what
//! sled holds.
//!
//! Owns: `recover`, `sled_durable`, `check_watermark` and reading the
//! stored next global position. Must never: let sled point at journal
//! bytes that are not on stable storage, or serve a store holding fewer
//! records than its watermark says were durable.

use std::fs::File;
use std::path::Path;

use super::{damage, journal, powerloss, watermark};
use crate::ledger::local::error::{LocalError, Result};
use crate::ledger::local::keys::NEXT_GLOBAL_KEY;

/// Brings sled up to date with the journal (every round it holds that
/// sled lost, as entries pointing into it), makes sled hold all of it on
/// stable storage, and opens the journal for the writer: the newest file
/// where it ends, or a new file where the records end.
pub(super) fn recover(
    path: &Path,
    db: &sled::Db,
    log: &sled::Tree,
    next_global: u64,
    hooks: &powerloss::TestHooks,
) -> Result<(u64, journal::JournalWriter)> {
    let replayed = journal::replay(path, log, next_global)?;
    if replayed.rounds > 0 {
        tracing::info!(
            rounds = replayed.rounds,
            records = replayed.records,
            "journal rounds sled had not kept applied again"
        );
    }
    finish_recovery(path, db, hooks, replayed)
}

/// The rest of [`recover`] once the journal was replayed into sled.
pub(super) fn finish_recovery(
    path: &Path,
    db: &sled::Db,
    hooks: &powerloss::TestHooks,
    replayed: journal::Replayed,
) -> Result<(u64, journal::JournalWriter)> {
    for damage in &replayed.covered_damage {
        tracing::warn!(
            file = %damage.file.display(),
            offset = damage.offset,
            detail = %damage.detail,
            "a damaged journal entry sled already points past: the integrity scan names the records lost there"
        );
    }
    // Even without a replay: what sled recovered may sit in the page cache
    // only (a killed process).
    sled_durable(db, &File::open(path.join("db"))?, path, hooks)?;
    let journal = match &replayed.tail {
        Some(tail) if tail.next == replayed.next_global => journal::JournalWriter::resume(
            path,
            tail,
            hooks.journal_file_bytes,
            hooks.trace.clone(),
        )?,
        _ => journal::JournalWriter::create(
            path,
            replayed.next_global,
            hooks.journal_file_bytes,
            hooks.trace.clone(),
        )?,
    };
    Ok((replayed.next_global, journal))
}

/// Makes sled hold every write applied to it on stable storage (a
/// checkpoint). What sled 0.34's `flush` does (read in its source,
/// `pagecache/iobuf.rs`): it seals the current I/O buffer and waits until
/// every buffer up to the highest reserved log sequence number has been
/// written, each with `pwrite` and then `sync_file_range(WAIT_BEFORE |
/// WRITE | WAIT_AFTER)` over its range of `db`. That starts and awaits
/// writeback of those pages only: it persists neither the file's size
/// (sled's log grows the file) nor any metadata, and it sends no cache
/// flush to the device, so on its own it does not survive a power loss.
/// sled writes values too big for a segment to `blobs/<lsn>` files with a
/// plain `write`, never synced. Hence, after the flush: `fdatasync` of
/// `db` (size, and the device's write cache), `fdatasync` of every blob
/// file and `fsync` of `blobs/` and of the store directory (new files'
/// entries). sled's own snapshot files (`snap.*`) are written with
/// `sync_all`, and are derivable anyway.
pub(super) fn sled_durable(
    db: &sled::Db,
    data_file: &File,
    path: &Path,
    hooks: &powerloss::TestHooks,
) -> Result<()> {
    db.flush()?;
    data_file.sync_data()?;
    let blobs = path.join("blobs");
    if blobs.is_dir() {
        for entry in std::fs::read_dir(&blobs)? {
            let entry = entry?;
            match File::open(entry.path()) {
                Ok(blob) => blob.sync_data()?,
                // sled collected it meanwhile.
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => return Err(error.into()),
            }
        }
        journal::sync_dir(&blobs)?;
    }
    journal::sync_dir(path)?;
    if let Some(trace) = &hooks.trace {
        trace.checkpoint(path);
    }
    Ok(())
}

/// Refuses a store that holds fewer records than its watermark says were
/// durable: damage made sled's recovery stop early.
pub(super) fn check_watermark(path: &Path, next_global: u64) -> Result<()> {
    match watermark::read(path) {
        Some(durable) if durable > next_global => {
            Err(LocalError::Damaged(damage::Damage::LostRecords {
                durable,
                found: next_global,
            }))
        }
        _ => Ok(()),
    }
}

/// Reads the next global position stored beside the records.
pub(crate) fn stored_next_global(log: &sled::Tree) -> Result<u64> {
    Ok(match log.get(NEXT_GLOBAL_KEY)? {
        Some(bytes) if bytes.len() == 8 => {
            let mut word = [0u8; 8];
            word.copy_from_slice(&bytes);
            u64::from_be_bytes(word)
        }
        _ => 0,
    })
}
