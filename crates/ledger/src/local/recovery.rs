//! What opening a store does before it serves, and what a checkpoint
//! does: sled brought up to the journal (the rounds it lost applied
//! again), sled's files made durable, the watermark checked against what
//! sled holds.
//!
//! Owns: `recover`, `sled_durable`, `check_watermark` and reading the
//! stored next global position. Must never: let sled point at journal
//! bytes that are not on stable storage, or serve a store holding fewer
//! records than its watermark says were durable.

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
    finish_recovery(path, hooks, replayed)
}

/// The rest of [`recover`] once the journal was replayed into sled.
pub(super) fn finish_recovery(
    path: &Path,
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
