//! The file-system calls the journal's durability and reads rest on (reading
//! a file, reading and writing at an offset, `fdatasync`, the rotation size):
//! the one seam tests reach the engine through. A `test-hooks` build first
//! applies the faults a test set (`faults`); a release build has the calls.
//!
//! Owns: those calls. Must never: hold state, or change what a call does
//! in a build without `test-hooks`.

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

#[cfg(feature = "test-hooks")]
pub mod faults;
#[cfg(feature = "test-hooks")]
use faults::faults_for;

/// The journal file at `path`: all, or (`from` in it, past `head`) the head and
/// the bytes from `from` (the rest zeros, never paged in); whether `from` was.
pub fn read_file(path: &Path, head: usize, from: Option<u64>) -> io::Result<(Vec<u8>, bool)> {
    #[cfg(feature = "test-hooks")]
    let faults = faults_for(path);
    #[cfg(feature = "test-hooks")]
    if let Some(faults) = &faults {
        faults.before_read();
    }
    let file = File::open(path)?;
    let len = file.metadata()?.len();
    let read = match from.filter(|from| (head as u64..=len).contains(from)) {
        None => (fs::read(path)?, false),
        Some(from) => {
            let start = usize::try_from(from).map_err(io::Error::other)?;
            let mut bytes = vec![0u8; usize::try_from(len).map_err(io::Error::other)?];
            file.read_exact_at(&mut bytes[..head], 0)?;
            file.read_exact_at(&mut bytes[start..], from)?;
            (bytes, true)
        }
    };
    #[cfg(feature = "test-hooks")]
    if let Some(faults) = &faults {
        return Ok(faults.after_read(path, read));
    }
    Ok(read)
}

/// Reads `buf.len()` bytes at `offset` of `file` (at `path`).
pub fn read_at(file: &File, path: &Path, buf: &mut [u8], offset: u64) -> io::Result<()> {
    #[cfg(feature = "test-hooks")]
    if let Some(faults) = faults_for(path) {
        faults.before_read();
    }
    let _ = path;
    file.read_exact_at(buf, offset)
}

/// Writes `bytes` at `offset` of `file`, whole (no sync).
pub fn write_at(file: &File, bytes: &[u8], offset: u64) -> io::Result<()> {
    file.write_all_at(bytes, offset)
}

/// `fdatasync` of the journal file `file` (at `path`, `len` bytes written).
pub fn sync(file: &File, path: &Path, len: u64) -> io::Result<()> {
    #[cfg(feature = "test-hooks")]
    let faults = faults_for(path);
    #[cfg(feature = "test-hooks")]
    if let Some(faults) = &faults {
        faults.before_sync();
    }
    file.sync_data()?;
    #[cfg(feature = "test-hooks")]
    if let Some(faults) = &faults {
        // Before any acknowledgement, like the sync itself.
        faults.synced(path, len);
    }
    let _ = (path, len);
    Ok(())
}

/// The journal's rotation size in `store`: `default`, unless a test set one.
pub fn journal_file_bytes(store: &Path, default: u64) -> u64 {
    #[cfg(feature = "test-hooks")]
    if let Some(bytes) = faults_for(store).and_then(|faults| faults.journal_file_bytes) {
        return bytes;
    }
    let _ = store;
    default
}
