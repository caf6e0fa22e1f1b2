//! The spare: the next journal file, zeros written and synced ahead of need,
//! off the commit path. `fallocate`d blocks stay "unwritten" until written,
//! and converting them is a metadata commit the next `fdatasync` pays (200–240
//! µs against 120–140 µs for 20 KB here); a file synced whole syncs data only.
//! The thread first drops the cached pages of the file two rotations back.
//!
//! Owns: `journal/spare` (complete, synced, zeros), `journal/spare.partial`,
//! the thread preparing it, handing it over as a journal file. Must never: name
//! `spare` a file not all zeros and synced, hand it over unfinished, or block
//! the writer while it is prepared.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use super::sync_dir;

/// The spare's name (not `<base>.wal`: nothing reads it as a journal file).
pub const SPARE_FILE: &str = "spare";

/// The spare while it is written; renamed to [`SPARE_FILE`] once synced.
const PARTIAL_FILE: &str = "spare.partial";

/// Bytes a journal file holds before the next spare is prepared: ready before
/// a rotation, yet never written for a store written briefly.
pub const SPARE_AFTER_BYTES: u64 = 1024 * 1024;

/// Zeros written per `write`, each chunk synced before the next ([`prepare`]).
const ZERO_CHUNK_BYTES: usize = 1024 * 1024;

/// Where the spare stands for the file being written.
#[derive(Debug, Default)]
pub enum Spare {
    /// None prepared for this file yet.
    #[default]
    Absent,
    /// A thread is writing it (its handle, taken when joined).
    Preparing(Option<JoinHandle<io::Result<()>>>),
    /// `journal/spare` is complete and synced.
    Ready,
    /// Failed (logged): this rotation allocates a file, the next tries again.
    Failed,
}

impl Spare {
    /// Starts preparing a spare of `len` bytes in `dir`, once per file.
    pub fn start(&mut self, dir: &Path, len: u64, release: Option<PathBuf>) {
        if !matches!(self, Spare::Absent) {
            return;
        }
        let dir = dir.to_path_buf();
        let spawned = std::thread::Builder::new()
            .name("ledger-spare".into())
            .spawn(move || {
                if let Some(path) = release {
                    release_cached_pages(&path);
                }
                prepare(&dir, len)
            });
        *self = match spawned {
            Ok(handle) => Spare::Preparing(Some(handle)),
            Err(error) => failed(&error),
        };
    }

    /// `Ready` if a spare of `len` bytes was left in `dir`, else `Absent`.
    pub fn found(dir: &Path, len: u64) -> Spare {
        match fs::metadata(dir.join(SPARE_FILE)) {
            Ok(meta) if meta.len() == len => Spare::Ready,
            _ => Spare::Absent,
        }
    }

    pub fn is_ready(&mut self) -> bool {
        if let Spare::Preparing(Some(handle)) = self
            && handle.is_finished()
        {
            self.wait();
        }
        matches!(self, Spare::Ready)
    }

    /// Waits for a preparation under way (never passed over for a slow file).
    pub fn wait(&mut self) {
        if let Spare::Preparing(handle) = self
            && let Some(handle) = handle.take()
        {
            *self = match handle.join() {
                Ok(Ok(())) => Spare::Ready,
                Ok(Err(error)) => failed(&error),
                Err(_) => failed(&io::Error::other("the thread preparing it panicked")),
            };
        }
    }
}

/// A closing writer waits: a thread still renaming could race the next open.
impl Drop for Spare {
    fn drop(&mut self) {
        self.wait();
    }
}

fn failed(error: &io::Error) -> Spare {
    tracing::warn!(%error, "the spare journal file was not prepared; the next file is allocated instead");
    Spare::Failed
}

/// Drops the cached pages of the finished journal file at `path` (best effort).
/// Journal files are never deleted, so the cache would grow by every byte
/// written, and a fresh page costs the spare about ten times a recycled one to
/// fill (33 MiB: 94–103 ms against 9 ms here). About three files stay cached.
fn release_cached_pages(path: &Path) {
    use std::os::fd::AsRawFd;
    let file = match File::open(path) {
        Ok(file) => file,
        Err(error) => {
            let path = path.display();
            tracing::debug!(%error, %path, "a finished journal file was not opened to drop its pages");
            return;
        }
    };
    // SAFETY: a plain system call on a descriptor `file` keeps open.
    let result = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if result != 0 {
        let error = io::Error::from_raw_os_error(result);
        let path = path.display();
        tracing::debug!(%error, %path, "the cached pages of a finished journal file stay");
    }
}

/// Writes `dir/spare`: `len` zeros synced, then renamed (so it is whole).
fn prepare(dir: &Path, len: u64) -> io::Result<()> {
    let partial = dir.join(PARTIAL_FILE);
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&partial)?;
    let zeros = vec![0u8; ZERO_CHUNK_BYTES];
    let mut left = len;
    while left > 0 {
        let n = usize::try_from(left).map_or(ZERO_CHUNK_BYTES, |l| l.min(ZERO_CHUNK_BYTES));
        file.write_all(&zeros[..n])?;
        // Synced chunk by chunk: a journal sync flushes the device's whole
        // write cache, and one behind 33 MiB of zeros took 25–100 ms; a chunk
        // at a time, about 10 ms (performance.md).
        file.sync_data()?;
        left -= n as u64;
    }
    file.sync_all()?;
    fs::rename(&partial, dir.join(SPARE_FILE))?;
    sync_dir(dir)
}

/// Takes a spare of `len` bytes in `dir` as `path`: `header` synced, renamed
/// (the caller syncs the directory); one of another length is deleted.
pub fn take(dir: &Path, len: u64, header: &[u8], path: &Path) -> io::Result<Option<File>> {
    let spare = dir.join(SPARE_FILE);
    let found = match fs::metadata(&spare) {
        Ok(meta) => meta.len(),
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    if found != len {
        fs::remove_file(&spare)?;
        return Ok(None);
    }
    let mut file = OpenOptions::new().read(true).write(true).open(&spare)?;
    file.write_all(header)?;
    file.sync_data()?;
    fs::rename(&spare, path)?;
    Ok(Some(file))
}
