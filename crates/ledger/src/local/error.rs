//! Errors of the local store: what opening a directory can meet, and the
//! engine's own failures (sled's, the file system's) before they are
//! worded as the ledger's neutral errors at the store's edge.
//!
//! Owns: [`LocalError`], [`StoreProblem`] and their mapping into
//! [`LedgerError`]. Must never: let a sled or I/O error reach a caller of
//! the store contract unworded.

use std::path::PathBuf;

use crate::ledger::error::LedgerError;
use crate::ledger::local::damage::Damage;

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

impl From<postcard::Error> for LocalError {
    fn from(error: postcard::Error) -> Self {
        LocalError::Ledger(error.into())
    }
}

impl From<LocalError> for LedgerError {
    /// The store's failures as a caller of the contract meets them: the
    /// ledger's own errors as they are, anything else as the store being
    /// unavailable with the engine's sentence.
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
