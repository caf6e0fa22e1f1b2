//! The spare journal file: the next journal file, written full of zeros
//! and synced ahead of need, off the commit path.
//!
//! Why: ext4 (and most file systems) keep blocks given by `fallocate` as
//! "unwritten" until a write reaches them, and converting them is a
//! metadata change that the next `fdatasync` must commit too (a journal
//! commit of the file system, a second device flush). Measured here, a
//! sync after 20 KB written into such blocks took 200–240 µs against
//! 120–140 µs into blocks already written once; a group commit of 64
//! writers writes about that much per sync. A file whose every block was
//! written (with zeros) and synced before its first entry syncs data
//! only, and the journal's reader already takes zeros for a file's clean
//! end.
//!
//! Before its zeros, the thread drops from the page cache the journal
//! file finished two rotations back (see [`release_cached_pages`]), so
//! the zeros land in pages the kernel has just freed.
//!
//! Owns: `journal/spare` (complete, synced, zeros only) and
//! `journal/spare.partial` (being written), the thread that prepares the
//! spare, and handing it over as a new journal file.
//! Must never: let a file that is not all zeros and synced be named
//! `spare`; hand the spare over before its preparation finished; block
//! the writer while it is prepared (a rotation waits only for a
//! preparation already under way).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use super::sync_dir;

/// The spare's name in the journal directory; not a journal file's name
/// (those are `<base>.wal`), so nothing reads it as one.
pub const SPARE_FILE: &str = "spare";

/// The spare while it is written; renamed to [`SPARE_FILE`] once synced.
const PARTIAL_FILE: &str = "spare.partial";

/// Bytes a journal file holds before the next spare is prepared: early
/// enough to be ready before a rotation (preparing 33 MiB took about
/// 30 ms here synced once; synced a chunk at a time it takes longer, not
/// timed apart, and the (b) bench, which fills a file in about half a
/// second, kept its groups of 60–61 appends a flush), late enough that
/// a store written briefly (a test, a one-off command) never writes one.
pub const SPARE_AFTER_BYTES: u64 = 1024 * 1024;

/// Zeros written per `write` while preparing, in bytes; each chunk is
/// synced before the next is written (see [`prepare`]).
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
    /// Preparing it failed (logged); this file's rotation starts a file
    /// the usual way, and the next file tries again.
    Failed,
}

impl Spare {
    /// Starts preparing a spare of `len` bytes in `dir`, once per file,
    /// first dropping the cached pages of `release` (a finished, synced
    /// journal file) if given.
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

    /// Whether the spare is complete, without waiting for it.
    /// `Ready` if a whole spare of `len` bytes is in `dir` (one a
    /// process left: a `spare` exists only once written and synced),
    /// else `Absent`.
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

    /// Waits for a preparation under way to finish (a rotation, so that
    /// a half-written spare is never passed over for a slower file).
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

/// A writer closing waits for its spare: a thread left writing one could
/// still be renaming it when the store is opened again.
impl Drop for Spare {
    fn drop(&mut self) {
        self.wait();
    }
}

fn failed(error: &io::Error) -> Spare {
    tracing::warn!(%error, "the spare journal file was not prepared; the next file is allocated instead");
    Spare::Failed
}

/// Drops the page-cache copy of the finished journal file at `path`.
///
/// Why: journal files are never deleted, so without this the page cache
/// grows by every byte the ledger writes until the kernel reclaims it,
/// and each page the spare's zeros fill is one the kernel must find
/// free. On this project's virtual machine a page the guest had never
/// used cost about ten times the CPU to fill (33 MiB of zeros: 9 ms
/// into recycled pages, 94–103 ms into fresh ones), on the two vCPUs
/// the commits share. Dropping the file finished two rotations back
/// keeps the journal's cached pages to about three files (the one being
/// written, the one before, the spare) and hands the spare pages just
/// freed. The first read of older records goes to the disk. The file
/// is synced whole, so its pages are clean and nothing is lost; an
/// error only leaves the pages cached, so it is logged and ignored.
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

/// Writes `dir/spare`: `len` zeros, synced, then renamed into place and
/// the directory synced, so a spare that exists is always whole.
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
        // write cache, so one that comes while the spare's 33 MiB are on
        // their way waits for all of them. Written whole and synced once,
        // the spare made the slowest journal sync of a load run 25–100 ms;
        // a chunk at a time, 10 ms in most runs (docs/performance.md).
        file.sync_data()?;
        left -= n as u64;
    }
    file.sync_all()?;
    fs::rename(&partial, dir.join(SPARE_FILE))?;
    sync_dir(dir)
}

/// Takes the spare in `dir` to become the journal file `path`, if one of
/// exactly `len` bytes is there: `header` written over its first bytes
/// and synced, then renamed (the caller syncs the directory). A crash
/// before the rename leaves a spare whose header the next taker writes
/// again; the bytes after it stay zeros. A spare of another length (a
/// store opened with another rotation size) is deleted instead.
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
