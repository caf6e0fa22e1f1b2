//! Errors of the local store: what opening a directory can meet, damage worded
//! for an operator with what to do (the journal's, the truth: restore from a
//! backup; the index's when it cannot be rebuilt), and sled's and the file
//! system's failures before the store's edge words them as the ledger's.
//!
//! Owns: [`LocalError`], [`StoreProblem`], [`Damage`] and their mapping into
//! [`LedgerError`]. Must never: let a sled or I/O error reach a caller of the
//! contract unworded, or send an operator to a backup for what a rebuild mends.

use std::path::PathBuf;

use super::journal::JournalDamage;

use crate::error::LedgerError;

/// Errors inside the local store and of opening it.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error(transparent)]
    Ledger(#[from] LedgerError),

    #[error("{path}: {problem}")]
    Store {
        path: PathBuf,
        problem: StoreProblem,
    },

    #[error("the store is damaged: {0}")]
    Damaged(Damage),

    #[error("storage error: {0}")]
    Sled(#[from] sled::Error),

    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

impl From<LocalError> for LedgerError {
    /// The ledger's errors as they are, the rest as the store unavailable.
    fn from(error: LocalError) -> Self {
        match error {
            LocalError::Ledger(error) => error,
            other => LedgerError::Unavailable {
                reason: other.to_string(),
            },
        }
    }
}

/// Why a data directory cannot be opened. Each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum StoreProblem {
    #[error("no ledgerwire store here; pass --data with the directory `ledgerwire serve` created")]
    Missing,
    #[error(
        "not a ledgerwire store (it has files but no LEDGERWIRE marker); point --data at an empty directory or an existing store"
    )]
    Foreign,
    #[error(
        "the LEDGERWIRE marker is unreadable ({0}); the directory is not a store this build understands"
    )]
    BadMarker(String),
    #[error(
        "written by a newer ledgerwire (store format {found}, this build reads up to {supported}); upgrade ledgerwire"
    )]
    NewerFormat { found: u32, supported: u32 },
    #[error(
        "in use by another ledgerwire process; stop that process, choose another --data directory, or read the running server with --url"
    )]
    Locked,
    #[error("not a directory")]
    NotADirectory,
    /// The operating system refused what opening needed to do there.
    #[error("cannot {action}: {error}")]
    Io {
        action: &'static str,
        error: std::io::Error,
    },
    /// sled could not open its files there.
    #[error("sled cannot open the store: {0}")]
    Sled(sled::Error),
}

pub type Result<T, E = LocalError> = std::result::Result<T, E>;

/// Where a damaged index is set aside, inside the store directory.
pub const DISCARDED_DIR: &str = "discarded";

/// Damage to the store's files, as an operator reads it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Damage {
    #[error("sled cannot read its data file ({detail})")]
    DataFile { detail: String },
    #[error(
        "the journal holds records only up to global position {found}, but its watermark (DURABLE) says records up to {durable} were acknowledged durable: at least {} acknowledged records are lost (the newest journal file ends early); restore the store from a backup (the whole directory, journal/ and DURABLE included)",
        durable - found
    )]
    LostRecords { durable: u64, found: u64 },
    /// With the journal's watermark: records below it were acknowledged.
    #[error("{}", journal_text(damage, *watermark))]
    Journal {
        damage: JournalDamage,
        watermark: Option<u64>,
    },
    #[error(
        "sled holds records up to global position {expected}, but the journal resumes only at {found}: the records between are lost; restore the store from a backup (the whole directory, journal/ included)"
    )]
    JournalGap { expected: u64, found: u64 },
    #[error(
        "the journal does not hold the store's oldest records ({}): they were written before store format 4 and live in the index alone; restore the store from a backup",
        journal_starts_at.map_or_else(|| "it holds no file that checks".to_owned(), |at| format!("its first file starts at global position {at}"))
    )]
    Underived { journal_starts_at: Option<u64> },
    #[error("the index (sled's files) is damaged ({found}) and cannot be rebuilt: {cause}")]
    Index { found: String, cause: Box<Damage> },
}

/// Where the journal is damaged, what it held, how much was acknowledged.
fn journal_text(damage: &JournalDamage, watermark: Option<u64>) -> String {
    let JournalDamage {
        file,
        offset,
        detail,
        from_global,
        resumes_at,
    } = damage;
    let mut text = format!(
        "the journal file {} is damaged at byte {offset}: {detail}",
        file.display()
    );
    if let Some(from) = *from_global {
        let to = resumes_at.map_or_else(|| "its end".to_owned(), |to| to.to_string());
        text.push_str(&format!(
            "; the damaged bytes held records from global position {from} up to {to}"
        ));
        if let Some(durable) = watermark {
            let acknowledged = resumes_at
                .unwrap_or(u64::MAX)
                .min(durable)
                .saturating_sub(from);
            text.push_str(&format!(
                ", of which {acknowledged} lie below the journal's watermark ({durable}: records acknowledged durable)"
            ));
        }
    }
    text.push_str("; the records there are lost (`ledgerwire log verify` names their streams and positions while the index can still tell; the other streams are served): restore the store from a backup (the whole directory, journal/ included)");
    text
}

/// Whether a sled error says its files are damaged (not the disk or process).
pub fn is_damage(error: &sled::Error) -> bool {
    matches!(error, sled::Error::Corruption { .. })
}
