//! Opening a data directory. Owns: the LEDGERWIRE marker, the store format,
//! sled's lock (waited for after a close). Must never: write into a directory
//! not recognised as a store (or created empty by itself).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::local::error::{Damage, LocalError, Result, StoreProblem, is_damage};

/// Version of the whole store, bumped only when old code would misread a new
/// one (LOG-FORMAT.md lists them). An older store's marker is upgraded on
/// open: its entries holding records read as they are.
pub const STORE_FORMAT: u32 = 4;

/// Name of the marker file at the root of every store.
pub const MARKER_FILE: &str = "LEDGERWIRE";

/// Whether opening may create a new, empty store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// Create the directory and the store if they do not exist (`serve`).
    CreateIfMissing,
    /// Only open a store that exists (`log verify`, `log dump`, `replay`).
    MustExist,
}

fn problem(path: &Path, problem: StoreProblem) -> LocalError {
    LocalError::Store {
        path: path.to_path_buf(),
        problem,
    }
}

/// How long opening waits for the lock, in milliseconds: a store just closed
/// holds it while sled's I/O threads finish (like SQLite's busy timeout).
pub const LOCK_WAIT_MS: u64 = 2_000;

/// sled's page cache, in bytes (1 GiB by default): it serves cold reads only.
pub const SLED_CACHE_BYTES: u64 = 64 * 1024 * 1024;

/// sled with its cache bounded and no flusher (the journal is durability).
fn sled_config(path: &Path) -> sled::Config {
    sled::Config::new()
        .path(path)
        .cache_capacity(SLED_CACHE_BYTES)
        .flush_every_ms(None)
}

/// Pause between two attempts to take the lock, in milliseconds.
const LOCK_RETRY_MS: u64 = 20;

/// Opens sled in a checked store directory, waiting out a just-closed store's
/// lock. Damage (an error, or a panic while recovering) is `Damaged`.
pub(super) fn open_sled_in(path: &Path) -> Result<sled::Db> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(LOCK_WAIT_MS);
    loop {
        // sled panics on some damage while recovering: not a bug to crash on.
        let opened =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sled_config(path).open()));
        match opened {
            Ok(Ok(db)) => return Ok(db),
            Ok(Err(sled::Error::Io(io))) if io.to_string().contains("could not acquire lock") => {
                if std::time::Instant::now() >= deadline {
                    return Err(problem(path, StoreProblem::Locked));
                }
                std::thread::sleep(std::time::Duration::from_millis(LOCK_RETRY_MS));
            }
            Ok(Err(error)) if is_damage(&error) => {
                return Err(LocalError::Damaged(Damage::DataFile {
                    detail: error.to_string(),
                }));
            }
            Ok(Err(error)) => return Err(problem(path, StoreProblem::Sled(error))),
            Err(panic) => {
                let detail = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "it stopped while recovering".to_owned());
                return Err(LocalError::Damaged(Damage::DataFile {
                    detail: format!("recovery failed: {detail}"),
                }));
            }
        }
    }
}

/// An I/O failure of opening, naming the path and what was being done.
fn io_problem(path: &Path, action: &'static str) -> impl FnOnce(std::io::Error) -> LocalError {
    move |error| problem(path, StoreProblem::Io { action, error })
}

pub(super) fn prepare_directory(path: &Path, mode: OpenMode) -> Result<()> {
    if !path.exists() {
        return match mode {
            OpenMode::MustExist => Err(problem(path, StoreProblem::Missing)),
            OpenMode::CreateIfMissing => {
                fs::create_dir_all(path).map_err(io_problem(path, "create the store directory"))?;
                write_marker(path)
            }
        };
    }
    if !path.is_dir() {
        return Err(problem(path, StoreProblem::NotADirectory));
    }
    let marker = path.join(MARKER_FILE);
    if marker.exists() {
        return check_marker(path, &marker);
    }
    let empty = fs::read_dir(path)
        .map_err(io_problem(path, "list the directory"))?
        .next()
        .is_none();
    match (empty, mode) {
        (true, OpenMode::CreateIfMissing) => write_marker(path),
        (true, OpenMode::MustExist) => Err(problem(path, StoreProblem::Missing)),
        (false, _) => Err(problem(path, StoreProblem::Foreign)),
    }
}

fn marker_text() -> String {
    format!("ledgerwire store\nformat = {STORE_FORMAT}\n")
}

fn write_marker(path: &Path) -> Result<()> {
    let marker: PathBuf = path.join(MARKER_FILE);
    let mut file = fs::File::create(&marker).map_err(io_problem(path, "write the marker file"))?;
    file.write_all(marker_text().as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(io_problem(path, "write the marker file"))
}

fn check_marker(path: &Path, marker: &Path) -> Result<()> {
    let text = fs::read_to_string(marker)
        .map_err(|e| problem(path, StoreProblem::BadMarker(e.to_string())))?;
    let mut lines = text.lines();
    if lines.next() != Some("ledgerwire store") {
        return Err(problem(
            path,
            StoreProblem::BadMarker("first line is not `ledgerwire store`".into()),
        ));
    }
    let format = lines
        .find_map(|line| line.strip_prefix("format = "))
        .and_then(|value| value.trim().parse::<u32>().ok())
        .ok_or_else(|| problem(path, StoreProblem::BadMarker("no `format = N` line".into())))?;
    if format > STORE_FORMAT {
        return Err(problem(
            path,
            StoreProblem::NewerFormat {
                found: format,
                supported: STORE_FORMAT,
            },
        ));
    }
    if format < STORE_FORMAT {
        upgrade_marker(path)?;
    }
    Ok(())
}

/// Rewrites the marker with this format: a synced new file renamed over it.
fn upgrade_marker(path: &Path) -> Result<()> {
    let fail = io_problem(path, "upgrade the marker file");
    let staged = path.join(format!("{MARKER_FILE}.new"));
    let written = fs::File::create(&staged).and_then(|mut file| {
        file.write_all(marker_text().as_bytes())?;
        file.sync_all()
    });
    written
        .and_then(|()| fs::rename(&staged, path.join(MARKER_FILE)))
        .and_then(|()| fs::File::open(path)?.sync_all())
        .map_err(fail)
}
