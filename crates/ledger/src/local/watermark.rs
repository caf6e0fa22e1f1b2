//! The durable watermark: a global position below which every record was
//! on disk, kept in a small file of its own beside sled's.
//!
//! sled recovers its log by reading it until a message fails its checksum,
//! and takes that for the torn end of a crash; damage in the middle of its
//! data file then silently drops every record after it. A crash never
//! loses a durable record, so a store that opens with fewer records than
//! the watermark says were durable has lost them to damage, and says so.
//!
//! Owns: the `DURABLE` file (its format, reading it, writing it after a
//! flush). Must never: claim a position that was not durable when written
//! (it is written only after the flush that made it so).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

/// The watermark's file, in the store directory.
pub const WATERMARK_FILE: &str = "DURABLE";

/// Least time between two writes of the watermark while the store is busy,
/// in milliseconds (one small write and sync per interval).
pub const WATERMARK_INTERVAL_MS: u64 = 1_000;

fn line(position: u64) -> String {
    let digits = position.to_string();
    format!("{digits} {:08x}\n", crc32c::crc32c(digits.as_bytes()))
}

/// The watermark stored in `dir`; `None` without one or when it does not
/// read back whole (a torn write only costs the check).
pub fn read(dir: &Path) -> Option<u64> {
    let mut text = String::new();
    File::open(dir.join(WATERMARK_FILE))
        .and_then(|mut file| file.read_to_string(&mut text))
        .ok()?;
    let (digits, crc) = text.trim_end().split_once(' ')?;
    let position = digits.parse::<u64>().ok()?;
    (line(position).trim_end() == format!("{digits} {crc}")).then_some(position)
}

/// The open watermark file.
pub struct Watermark {
    file: File,
    written: u64,
}

impl Watermark {
    /// Opens (or creates) the watermark file in `dir`.
    pub fn open(dir: &Path) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join(WATERMARK_FILE))?;
        Ok(Self {
            written: read(dir).unwrap_or(0),
            file,
        })
    }

    /// Records that every record below `position` is durable, if that is
    /// news; the caller has just made them so.
    pub fn advance(&mut self, position: u64) -> io::Result<()> {
        if position <= self.written {
            return Ok(());
        }
        let text = line(position);
        self.file.seek(SeekFrom::Start(0))?;
        self.file.write_all(text.as_bytes())?;
        self.file.set_len(text.len() as u64)?;
        self.file.sync_data()?;
        self.written = position;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watermark_reads_back_and_a_damaged_one_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()), None);
        let mut watermark = Watermark::open(dir.path()).unwrap();
        watermark.advance(1_234).unwrap();
        watermark.advance(99).unwrap();
        assert_eq!(read(dir.path()), Some(1_234));
        std::fs::write(dir.path().join(WATERMARK_FILE), "1235 00000000\n").unwrap();
        assert_eq!(read(dir.path()), None);
    }
}
