//! TEST-ONLY (a `test-hooks` build): the faults the storage calls apply, set
//! by the environment (the real binary under a test: [`TRACE_ENV`] and below)
//! or by [`install`] for the stores under a directory: the power-loss trace
//! (after each journal `fdatasync`, before an append it covers is acknowledged,
//! `<file name> <length>` in `<dir>/synced`: what a power loss would keep),
//! another rotation size, the first journal read held until a FIFO is written
//! to, syncs held at a gate, a file read back with zeros from an offset.
//!
//! Owns: the faults and their registry. Must never: change what the store
//! writes or when it acknowledges, but as a fault a test asked for.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use crate::local::lock;

/// The directory the power-loss trace is written into.
pub const TRACE_ENV: &str = "LEDGERWIRE_TEST_POWER_LOSS_TRACE";
/// The journal's rotation size, in bytes.
pub const JOURNAL_FILE_BYTES_ENV: &str = "LEDGERWIRE_TEST_JOURNAL_FILE_BYTES";
/// A FIFO the first read of a journal file reads to its end first.
pub const READ_GATE_ENV: &str = "LEDGERWIRE_TEST_READ_GATE";
/// `<journal file name>:<offset>`: that file reads back as zeros from
/// the offset on (whole-file reads; a read at an offset sees the disk).
pub const STALE_READ_ENV: &str = "LEDGERWIRE_TEST_STALE_READ";

/// The list of syncs in a trace directory: `<journal file name> <length>`.
pub const SYNCED_FILE: &str = "synced";

/// What a test sets on a store.
#[derive(Default)]
pub struct Faults {
    trace: Option<Mutex<File>>,
    pub journal_file_bytes: Option<u64>,
    read_gate: Option<PathBuf>,
    read_gate_passed: AtomicBool,
    stale: Option<(String, u64)>,
    gate: Mutex<SyncGate>,
    gate_changed: Condvar,
}

#[derive(Default)]
struct SyncGate {
    held: bool,
    /// Syncs waiting at the gate.
    waiting: usize,
}

impl Faults {
    /// Faults that only set the journal's rotation size.
    pub fn journal_file_bytes(bytes: u64) -> Self {
        Self {
            journal_file_bytes: Some(bytes),
            ..Self::default()
        }
    }

    /// Faults that take the power-loss trace into `dir`.
    pub fn trace(dir: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let synced = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(SYNCED_FILE))?;
        Ok(Self {
            trace: Some(Mutex::new(synced)),
            ..Self::default()
        })
    }

    /// The faults the environment asks for, if any.
    fn from_env() -> Option<Self> {
        let var = |name| std::env::var(name).ok();
        let mut faults = match var(TRACE_ENV) {
            Some(dir) => {
                tracing::warn!("TEST-ONLY power-loss trace enabled ({TRACE_ENV})");
                Self::trace(Path::new(&dir)).unwrap_or_else(|e| fail("start the trace", &e))
            }
            None => Self::default(),
        };
        faults.journal_file_bytes = var(JOURNAL_FILE_BYTES_ENV).and_then(|b| b.parse().ok());
        faults.read_gate = var(READ_GATE_ENV).map(PathBuf::from);
        faults.stale = var(STALE_READ_ENV).and_then(|spec| {
            let (name, offset) = spec.rsplit_once(':')?;
            Some((name.to_owned(), offset.parse().ok()?))
        });
        let any = faults.trace.is_some()
            || faults.journal_file_bytes.is_some()
            || faults.read_gate.is_some()
            || faults.stale.is_some();
        any.then_some(faults)
    }

    /// Holds every sync of the store at the gate, or lets them go.
    pub fn hold_syncs(&self, held: bool) {
        lock(&self.gate).held = held;
        self.gate_changed.notify_all();
    }

    /// Waits (up to 10 s) until a sync waits at the gate; whether one did.
    pub fn wait_until_a_sync_waits(&self) -> bool {
        let gate = lock(&self.gate);
        let ten_seconds = Duration::from_secs(10);
        let (gate, _) = self
            .gate_changed
            .wait_timeout_while(gate, ten_seconds, |g| g.waiting == 0)
            .unwrap_or_else(|p| p.into_inner());
        gate.waiting > 0
    }

    pub(super) fn before_sync(&self) {
        let mut gate = lock(&self.gate);
        gate.waiting += 1;
        self.gate_changed.notify_all();
        let mut gate = self
            .gate_changed
            .wait_while(gate, |g| g.held)
            .unwrap_or_else(|p| p.into_inner());
        gate.waiting -= 1;
    }

    /// The journal file `path` is on stable storage up to `len` bytes.
    pub(super) fn synced(&self, path: &Path, len: u64) {
        let Some(trace) = &self.trace else { return };
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("?");
        let mut file = lock(trace);
        // One write of a short line to an append-only file: a kill never
        // leaves half of it.
        if let Err(error) = file.write_all(format!("{name} {len}\n").as_bytes()) {
            fail("record a sync", &error);
        }
    }

    pub(super) fn before_read(&self) {
        let Some(gate) = &self.read_gate else { return };
        if !self.read_gate_passed.swap(true, Ordering::AcqRel) {
            let mut held = Vec::new();
            if let Err(error) = File::open(gate).and_then(|mut f| f.read_to_end(&mut held)) {
                fail("wait at the read gate", &error);
            }
        }
    }

    pub(super) fn after_read(
        &self,
        path: &Path,
        (mut bytes, from): (Vec<u8>, bool),
    ) -> (Vec<u8>, bool) {
        if let Some((name, offset)) = &self.stale
            && path.file_name().and_then(|n| n.to_str()) == Some(name.as_str())
            && let Ok(offset) = usize::try_from(*offset)
            && offset < bytes.len()
        {
            bytes[offset..].fill(0);
        }
        (bytes, from)
    }
}

/// A fault the test cannot take makes the test meaningless: stop.
fn fail(what: &str, error: &io::Error) -> ! {
    eprintln!("test faults: cannot {what}: {error}");
    std::process::abort()
}

type Registry = Mutex<Vec<(PathBuf, Arc<Faults>)>>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Registry::default)
}

/// Sets `faults` on every store under `dir` (before it opens).
pub fn install(dir: &Path, faults: Faults) -> Arc<Faults> {
    let faults = Arc::new(faults);
    let mut installed = lock(registry());
    installed.retain(|(at, _)| at != dir);
    installed.push((dir.to_path_buf(), faults.clone()));
    faults
}

/// The faults installed for a directory holding `path`, else the environment's.
pub(super) fn faults_for(path: &Path) -> Option<Arc<Faults>> {
    static FROM_ENV: OnceLock<Option<Arc<Faults>>> = OnceLock::new();
    let installed = lock(registry());
    let found = installed.iter().find(|(dir, _)| path.starts_with(dir));
    match found {
        Some((_, faults)) => Some(faults.clone()),
        None => FROM_ENV
            .get_or_init(|| Faults::from_env().map(Arc::new))
            .clone(),
    }
}
