//! Damage to the store's files, worded for an operator with what to do:
//! the journal's (the truth: restore from a backup, naming the file, the
//! byte, the global positions and the watermark), and the index's when it
//! cannot be rebuilt.
//!
//! Owns: [`Damage`] and telling sled's damage from its other failures.
//! Must never: send an operator to a backup for damage a rebuild mends.

use std::path::{Path, PathBuf};

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
    #[error("{}", journal_text(file, *offset, detail, *from_global, *resumes_at, *watermark))]
    Journal {
        file: PathBuf,
        offset: u64,
        detail: String,
        /// The global position due where the damaged bytes begin.
        from_global: Option<u64>,
        /// The global position where the journal checks again.
        resumes_at: Option<u64>,
        /// The journal's watermark: records below it were acknowledged.
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

impl Damage {
    /// This damage, met while rebuilding an index found damaged.
    pub fn with_index_finding(self, found: &str) -> Self {
        Damage::Index {
            found: found.to_owned(),
            cause: Box::new(self),
        }
    }
}

/// The sentence for damage in the journal: where, which global positions
/// it held, and how many acknowledged records it can hold.
fn journal_text(
    file: &Path,
    offset: u64,
    detail: &str,
    from_global: Option<u64>,
    resumes_at: Option<u64>,
    watermark: Option<u64>,
) -> String {
    let mut text = format!(
        "the journal file {} is damaged at byte {offset}: {detail}",
        file.display()
    );
    if let Some(from) = from_global {
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

/// Whether a sled error says its files are damaged (rather than that the
/// disk or the process failed).
pub fn is_damage(error: &sled::Error) -> bool {
    matches!(error, sled::Error::Corruption { .. })
}
