//! TEST-ONLY: a power-loss simulation (what LazyFS does, without a FUSE
//! file system). Never enable it on a store that matters.
//!
//! With [`TRACE_ENV`] set to a directory when a ledger opens (the variable
//! is read once, at open), the ledger records in it what a power loss
//! would keep:
//! - at each journal sync, after `fdatasync` returned and before any
//!   append it covers is acknowledged, the file's name and the length it
//!   synced (a line of `synced`);
//!
//! [`roll_back`] then turns a store whose process was killed into what a
//! power loss at that moment could leave: every journal file cut to the
//! length last synced (a file never synced removed), and sled's files
//! gone (sled's files are never synced: they are the index, derived from
//! the journal, and the worst a power loss can leave of them is nothing).
//! Everything written and not `fdatasync`ed is dropped. An append acknowledged before the sync that
//! covers it would not be in the trace and would be lost by the roll-back,
//! which is what makes the test able to fail (see the unit test below).
//!
//! [`JOURNAL_FILE_BYTES_ENV`] makes journal files rotate after that many bytes instead of `journal::JOURNAL_FILE_BYTES`,
//! so a short test crosses many checkpoints.
//!
//! Owns: the trace's layout, taking it, and rolling a store back by it.
//! Must never: be read by anything but tests; change what the ledger
//! writes or when it acknowledges.

#[cfg(feature = "test-hooks")]
use std::collections::HashMap;
#[cfg(feature = "test-hooks")]
use std::fs;
use std::fs::File;
#[cfg(feature = "test-hooks")]
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::Path;
#[cfg(feature = "test-hooks")]
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

#[cfg(feature = "test-hooks")]
use crate::ledger::local::journal;
use crate::ledger::local::journal::JOURNAL_FILE_BYTES;

#[cfg(feature = "test-hooks")]
/// TEST-ONLY: the directory a ledger writes its power-loss trace into.
pub const TRACE_ENV: &str = "LEDGERWIRE_TEST_POWER_LOSS_TRACE";

#[cfg(feature = "test-hooks")]
/// TEST-ONLY: the journal's rotation size, in bytes (default
/// `journal::JOURNAL_FILE_BYTES`).
pub const JOURNAL_FILE_BYTES_ENV: &str = "LEDGERWIRE_TEST_JOURNAL_FILE_BYTES";

#[cfg(feature = "test-hooks")]
/// The list of syncs in a trace directory: `<journal file name> <length>`.
const SYNCED_FILE: &str = "synced";

/// What the tests switch on, read once when a ledger opens.
#[derive(Clone)]
pub struct TestHooks {
    pub trace: Option<Arc<Trace>>,
    /// Size past which the journal rotates, in bytes.
    pub journal_file_bytes: u64,
}

impl Default for TestHooks {
    fn default() -> Self {
        Self {
            trace: None,
            journal_file_bytes: JOURNAL_FILE_BYTES,
        }
    }
}

impl TestHooks {
    /// The hooks the environment asks for (none, in production).
    /// The hooks the environment asks for: only in a build with the
    /// `test-hooks` feature (the tests'); a release build reads no
    /// `LEDGERWIRE_TEST_*` variable.
    #[cfg(not(feature = "test-hooks"))]
    pub fn from_env() -> Self {
        Self {
            trace: None,
            journal_file_bytes: JOURNAL_FILE_BYTES,
        }
    }

    /// The hooks the environment asks for (a `test-hooks` build).
    #[cfg(feature = "test-hooks")]
    pub fn from_env() -> Self {
        let trace = std::env::var_os(TRACE_ENV).map(|dir| {
            tracing::warn!("TEST-ONLY power-loss trace enabled ({TRACE_ENV})");
            match Trace::new(Path::new(&dir)) {
                Ok(trace) => Arc::new(trace),
                Err(error) => fail("start the power-loss trace", &error),
            }
        });
        let journal_file_bytes = std::env::var(JOURNAL_FILE_BYTES_ENV)
            .ok()
            .and_then(|bytes| bytes.parse().ok())
            .unwrap_or(JOURNAL_FILE_BYTES);
        Self {
            trace,
            journal_file_bytes,
        }
    }
}

/// A trace the simulation cannot take makes the test meaningless: stop.
fn fail(what: &str, error: &io::Error) -> ! {
    eprintln!("power-loss trace: cannot {what}: {error}");
    std::process::abort()
}

/// The power-loss trace being taken.
pub struct Trace {
    synced: Mutex<File>,
}

impl Trace {
    #[cfg(feature = "test-hooks")]
    pub fn new(dir: &Path) -> io::Result<Self> {
        fs::create_dir_all(dir)?;
        let synced = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(SYNCED_FILE))?;
        Ok(Self {
            synced: Mutex::new(synced),
        })
    }

    /// The journal file `path` is on stable storage up to `len` bytes.
    pub fn synced(&self, path: &Path, len: u64) {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("?");
        let line = format!("{name} {len}\n");
        let mut file = self.synced.lock().unwrap_or_else(|p| p.into_inner());
        // One write of a short line to an append-only file: a kill never
        // leaves half of it.
        if let Err(error) = file.write_all(line.as_bytes()) {
            fail("record a sync", &error);
        }
    }
}

#[cfg(feature = "test-hooks")]
/// sled's files in `dir`, relative to it: `conf`, `db`, `snap.*` (not one
/// being generated) and everything in `blobs/`.
fn sled_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        let Some(name) = name.to_str() else { continue };
        let snapshot = name.starts_with("snap.") && !name.ends_with(".generating");
        if name == "conf" || name == "db" || snapshot {
            found.push(PathBuf::from(name));
        }
    }
    let blobs = dir.join("blobs");
    if blobs.is_dir() {
        found.push(PathBuf::from("blobs"));
        for entry in fs::read_dir(&blobs)? {
            found.push(Path::new("blobs").join(entry?.file_name()));
        }
    }
    Ok(found)
}

#[cfg(feature = "test-hooks")]
/// The lengths the trace says each journal file was synced to.
fn synced_lengths(trace: &Path) -> io::Result<HashMap<String, u64>> {
    let text = match fs::read_to_string(trace.join(SYNCED_FILE)) {
        Err(error) if error.kind() == io::ErrorKind::NotFound => String::new(),
        text => text?,
    };
    let mut lengths = HashMap::new();
    for line in text.lines() {
        if let Some((name, len)) = line.split_once(' ')
            && let Ok(len) = len.parse::<u64>()
        {
            let longest = lengths.entry(name.to_owned()).or_insert(0);
            *longest = len.max(*longest);
        }
    }
    Ok(lengths)
}

#[cfg(feature = "test-hooks")]
/// Turns `store`, whose process was killed, into what a power loss could
/// have left by the trace in `trace`: journal files zeroed past what was
/// synced, sled's files as of the last checkpoint.
pub fn roll_back(store: &Path, trace: &Path) -> io::Result<RolledBack> {
    let lengths = synced_lengths(trace)?;
    let mut rolled = RolledBack::default();
    for (_, path) in journal::files(store)? {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        match lengths.get(&name) {
            Some(&synced) => {
                // What was not synced reads back as the zeros the file was
                // preallocated with; its size stays what it was.
                let bytes = fs::read(&path)?;
                let written = bytes.iter().rposition(|&b| b != 0).map_or(0, |at| at + 1);
                let len = bytes.len() as u64;
                if len > synced {
                    let file = OpenOptions::new().write(true).open(&path)?;
                    file.set_len(synced)?;
                    file.set_len(len)?;
                    rolled.journal_bytes_dropped += (written as u64).saturating_sub(synced);
                }
            }
            None => {
                rolled.journal_bytes_dropped += fs::metadata(&path)?.len();
                fs::remove_file(&path)?;
            }
        }
    }
    for relative in sled_files(store)? {
        let path = store.join(relative);
        if path.is_dir() {
            fs::remove_dir_all(&path)?;
        } else if path.exists() {
            fs::remove_file(&path)?;
        }
        rolled.sled_removed = true;
    }
    Ok(rolled)
}

#[cfg(feature = "test-hooks")]
/// What [`roll_back`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RolledBack {
    /// Bytes of journal written but never synced, dropped.
    pub journal_bytes_dropped: u64,
    /// Whether sled's files were removed (the next open rebuilds them).
    pub sled_removed: bool,
}

#[cfg(feature = "test-hooks")]
/// Starts a fresh trace of `store` as it is now, every byte of it taken
/// for synced (a store closed cleanly): the point a later roll-back
/// cannot go behind.
pub fn baseline(store: &Path, trace: &Path) -> io::Result<()> {
    match fs::remove_dir_all(trace) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
        _ => {}
    }
    let recorder = Trace::new(trace)?;
    for (_, path) in journal::files(store)? {
        recorder.synced(&path, fs::metadata(&path)?.len());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::kinds::Payload;
    use crate::ledger::local::{LocalStore, OpenMode};
    use crate::ledger::probe::Probe;
    use crate::ledger::{Durability, ExpectedPosition, StreamKey};

    /// The simulation is able to fail: appends acknowledged before any
    /// sync (buffered ones, which is what acknowledging before the sync
    /// would make every append) do not survive it, durable ones do.
    #[test]
    fn a_roll_back_keeps_what_was_synced_and_drops_what_was_not() {
        let live = tempfile::tempdir().unwrap();
        let trace_dir = tempfile::tempdir().unwrap();
        let hooks = TestHooks {
            trace: Some(Arc::new(Trace::new(trace_dir.path()).unwrap())),
            journal_file_bytes: JOURNAL_FILE_BYTES,
        };
        let ledger = LocalStore::open_with(live.path(), OpenMode::CreateIfMissing, hooks)
            .unwrap()
            .0;
        let durable = StreamKey::new("probe/0").unwrap();
        let buffered = StreamKey::new("probe/1").unwrap();
        let writes = [
            (0, &durable, 50, Durability::Durable),
            (1, &buffered, 20, Durability::Buffered),
        ];
        for (writer, stream, count, durability) in writes {
            // The indexer would sync buffered appends within
            // `MAX_SYNC_WAIT_MS`; held back, it syncs none before the
            // "death" below.
            if durability == Durability::Buffered {
                ledger.shared.index_queue.pause(true);
            }
            for n in 0..count {
                let record = Probe::new(writer, n, 100).to_record();
                ledger
                    .append_blocking(
                        stream,
                        ExpectedPosition::Exactly(n),
                        vec![record],
                        durability,
                    )
                    .unwrap();
            }
        }
        // The process "dies" here: its files are copied as they are, and
        // it never closes.
        let crashed = tempfile::tempdir().unwrap();
        copy_tree(live.path(), crashed.path());
        std::mem::forget(ledger);
        let rolled = roll_back(crashed.path(), trace_dir.path()).unwrap();
        assert!(rolled.sled_removed);
        assert!(rolled.journal_bytes_dropped > 0, "{rolled:?}");
        let (ledger, report) = LocalStore::open(crashed.path(), OpenMode::MustExist).unwrap();
        assert!(report.is_clean(), "{:?}", report.problems);
        assert_eq!(ledger.head_blocking(&durable).unwrap(), 50);
        assert_eq!(ledger.head_blocking(&buffered).unwrap(), 0);
    }

    fn copy_tree(from: &Path, to: &Path) {
        for entry in fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                fs::create_dir_all(&target).unwrap();
                copy_tree(&entry.path(), &target);
            } else if entry.file_name() != "db.lock" {
                fs::copy(entry.path(), &target).unwrap();
            }
        }
    }
}
