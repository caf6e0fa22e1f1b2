//! Damage below the records: what sled, the storage engine under the log,
//! reports or trips over, named for an operator with what to do.
//!
//! Owns: recognising a damaged sled snapshot file (`snap.*`, a derivable
//! index sled rebuilds from its data file) by its own checksum, setting
//! such a file aside, and wording damage sled reports in its data file.
//! Must never: touch the data file, or set aside a snapshot whose
//! checksum holds.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Where snapshots set aside go, inside the store directory.
pub const DISCARDED_DIR: &str = "discarded";

/// Damage to the files sled keeps, as an operator reads it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Damage {
    #[error(
        "sled's snapshot file {} is damaged (its checksum does not match); it holds nothing the data file does not: move it out of the store directory and run `ledgerwire log verify` again (`ledgerwire serve` sets it aside by itself)",
        file.display()
    )]
    Snapshot { file: PathBuf },
    #[error(
        "sled cannot read its data file ({detail}); the store is damaged: restore it from a backup"
    )]
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

/// CRC-32 (IEEE), the checksum sled puts on its snapshot files.
fn crc32(bytes: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut table = [0u32; 256];
        let mut n = 0;
        while n < 256 {
            let mut c = n as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
                k += 1;
            }
            table[n] = c;
            n += 1;
        }
        table
    };
    let mut crc = !0u32;
    for &byte in bytes {
        crc = TABLE[((crc ^ u32::from(byte)) & 0xFF) as usize] ^ (crc >> 8);
    }
    !crc
}

/// Whether the bytes of a sled snapshot file pass sled's own check: the
/// body, then 8 bytes of length and 4 of CRC-32 over the body.
pub fn snapshot_intact(bytes: &[u8]) -> bool {
    let Some(body_len) = bytes.len().checked_sub(12).filter(|len| *len > 0) else {
        return false;
    };
    let stored = &bytes[bytes.len() - 4..];
    stored == crc32(&bytes[..body_len]).to_le_bytes()
}

/// sled's snapshot files in `dir` (`snap.*`, not those being written).
fn snapshot_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name.starts_with("snap.") && !name.ends_with(".generating") && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// sled's snapshot files in `dir` that fail sled's check.
pub fn damaged_snapshots(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut damaged = Vec::new();
    for file in snapshot_files(dir)? {
        if !snapshot_intact(&fs::read(&file)?) {
            damaged.push(file);
        }
    }
    Ok(damaged)
}

/// Whether a sled error says its files are damaged (rather than that the
/// disk or the process failed).
pub fn is_damage(error: &sled::Error) -> bool {
    matches!(error, sled::Error::Corruption { .. })
}

/// The damage a failed or panicked sled open in `dir` reveals: a damaged
/// snapshot file when there is one, the data file otherwise.
pub fn of_failed_open(dir: &Path, detail: String) -> Damage {
    match damaged_snapshots(dir)
        .ok()
        .and_then(|mut files| files.pop())
    {
        Some(file) => Damage::Snapshot { file },
        None => Damage::DataFile { detail },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_is_crc32_ieee() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        let mut file = b"snapshot body".to_vec();
        let crc = crc32(&file);
        file.extend_from_slice(&13u64.to_le_bytes());
        file.extend_from_slice(&crc.to_le_bytes());
        assert!(snapshot_intact(&file));
        file[2] ^= 1;
        assert!(!snapshot_intact(&file));
        assert!(!snapshot_intact(&[0; 12]));
    }
}
