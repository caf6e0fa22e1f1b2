//! Errors of the ledger, one variant per thing a caller can act on, the
//! same for every store. Must never: name an engine's own error type
//! (a store words its failures into these).
//!
//! Owns: [`LedgerError`] and [`Corruption`], their sentences and which
//! are transient.

/// What is wrong with one stored record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Corruption {
    #[error("the record is torn: {len} bytes do not match the lengths in its header")]
    Truncated { len: usize },
    #[error("checksum mismatch: stored crc32c {stored:#010x}, computed {computed:#010x}")]
    Checksum { stored: u32, computed: u32 },
    #[error("the record carries format version {format_version}, which this build cannot read")]
    UnknownFormat { format_version: u8 },
    #[error("the record says it is {found_stream} #{found_position}, not what its key says")]
    Misplaced {
        found_stream: String,
        found_position: u64,
    },
    #[error("position gap: expected position {expected}, found {found}")]
    Gap { expected: u64, found: u64 },
    #[error("global position {global} is out of order (after {previous} in the same stream)")]
    GlobalOrder { global: u64, previous: u64 },
    #[error("global position {global} is used by two records")]
    GlobalDuplicate { global: u64 },
    #[error("global position {global} has no record: a record is missing")]
    GlobalMissing { global: u64 },
    #[error("an unreadable key in the log tree")]
    BadKey,
    #[error("the storage engine cannot read this part of its data file ({detail})")]
    Storage { detail: String },
    #[error("the entry pointing at the record in the journal is damaged ({detail})")]
    Pointer { detail: String },
    #[error("the journal file holding the record cannot be read ({detail})")]
    Journal { detail: String },
}

/// Errors of the ledger.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("invalid stream key {key:?}: {reason}")]
    InvalidStreamKey { key: String, reason: &'static str },

    #[error(
        "append conflict on stream {stream}: expected position {expected}, but the stream is at {actual}; re-read the stream and retry"
    )]
    Conflict {
        stream: String,
        expected: u64,
        actual: u64,
    },

    #[error("record too large: {len} bytes of payload, at most {max} allowed")]
    PayloadTooLarge { len: usize, max: usize },

    #[error("an append must carry between 1 and {max} records, got {len}")]
    BatchSize { len: usize, max: usize },

    #[error(
        "stream {stream} is corrupt at position {position}: {corruption}; run `ledgerwire log verify` and restore the store from a backup"
    )]
    Corrupt {
        stream: String,
        position: u64,
        corruption: Corruption,
    },

    #[error("stream {stream} cannot be folded at position {position}: {reason}")]
    Fold {
        stream: String,
        position: u64,
        reason: String,
    },

    #[error(
        "the ledger stopped accepting writes after a failed flush ({reason}); restart the server"
    )]
    Poisoned { reason: String },

    #[error("the ledger is shut down")]
    Closed,

    /// The store cannot be reached or failed an operation it may finish
    /// later (a database restarting, an I/O error); nothing was applied.
    #[error("the store is unavailable ({reason}); retry later")]
    Unavailable { reason: String },

    #[error("cannot decode record payload: {0}")]
    Payload(#[from] postcard::Error),
}

impl LedgerError {
    /// Whether the same call may succeed later without anyone acting:
    /// only an unavailable store. A conflict needs a new decision, damage
    /// and poison an operator.
    pub fn is_transient(&self) -> bool {
        matches!(self, LedgerError::Unavailable { .. })
    }
}

pub type Result<T, E = LedgerError> = std::result::Result<T, E>;
