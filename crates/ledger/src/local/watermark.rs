//! The journal's watermark: a global position below which every record was
//! synced, in a file of its own. The journal's checks cannot see a newest file
//! cut short at an entry's end or gone; a journal opening with fewer records
//! has lost acknowledged ones, and says how many (damage messages too).
//!
//! Owns: the `DURABLE` file (its format, reading it, writing it after a sync,
//! at most once per [`WATERMARK_INTERVAL_MS`]). Must never: claim a position
//! not durable when written, or delay an acknowledgement (one that cannot be
//! written only weakens the check).

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use super::error::{Damage, LocalError};

/// The watermark's file, in the store directory.
pub const WATERMARK_FILE: &str = "DURABLE";

/// Least time between two writes of the watermark, in milliseconds.
pub const WATERMARK_INTERVAL_MS: u64 = 1_000;

fn line(position: u64) -> String {
    let digits = position.to_string();
    format!("{digits} {:08x}\n", crc32c::crc32c(digits.as_bytes()))
}

/// The watermark in `dir`; `None` if absent or torn (only the check is lost).
pub fn read(dir: &Path) -> Option<u64> {
    let mut text = String::new();
    File::open(dir.join(WATERMARK_FILE))
        .and_then(|mut file| file.read_to_string(&mut text))
        .ok()?;
    let (digits, crc) = text.trim_end().split_once(' ')?;
    let position = digits.parse::<u64>().ok()?;
    (line(position).trim_end() == format!("{digits} {crc}")).then_some(position)
}

/// Refuses a journal with fewer records than the watermark: they are lost.
pub(super) fn check(path: &Path, next_global: u64) -> Result<(), LocalError> {
    match read(path) {
        Some(durable) if durable > next_global => Err(LocalError::Damaged(Damage::LostRecords {
            durable,
            found: next_global,
        })),
        _ => Ok(()),
    }
}

/// The open watermark file, kept by the writer.
pub struct Watermark {
    file: Option<File>,
    written: u64,
    at: Option<Instant>,
}

impl Watermark {
    /// Opens (or creates) the file in `dir`; without it, the check weakens.
    pub fn open(dir: &Path) -> Self {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join(WATERMARK_FILE))
            .inspect_err(|error| tracing::warn!(%error, "no durable watermark"));
        Self {
            written: read(dir).unwrap_or(0),
            file: file.ok(),
            at: None,
        }
    }

    /// [`Watermark::advance`] at most once per [`WATERMARK_INTERVAL_MS`].
    pub fn advance_now_and_then(&mut self, position: u64) {
        let interval = Duration::from_millis(WATERMARK_INTERVAL_MS);
        if self.at.is_none_or(|at| at.elapsed() >= interval) {
            self.at = Some(Instant::now());
            self.advance(position);
        }
    }

    /// Records that every record below `position` is durable (just made so).
    pub fn advance(&mut self, position: u64) {
        let Some(file) = self.file.as_mut().filter(|_| position > self.written) else {
            return;
        };
        let text = line(position);
        let written = file
            .seek(SeekFrom::Start(0))
            .and_then(|_| file.write_all(text.as_bytes()))
            .and_then(|()| file.set_len(text.len() as u64))
            .and_then(|()| file.sync_data());
        match written {
            Ok(()) => self.written = position,
            Err(error) => tracing::warn!(%error, "the durable watermark could not be written"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watermark_reads_back_and_a_damaged_one_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()), None);
        let mut watermark = Watermark::open(dir.path());
        watermark.advance(1_234);
        watermark.advance(99);
        assert_eq!(read(dir.path()), Some(1_234));
        std::fs::write(dir.path().join(WATERMARK_FILE), "1235 00000000\n").unwrap();
        assert_eq!(read(dir.path()), None);
    }
}
