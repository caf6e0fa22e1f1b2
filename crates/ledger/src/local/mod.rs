//! The local store, `serve`'s default: the ledger in one directory held by one
//! process, made durable by a group-committed journal (the truth) and indexed
//! in sled (derived). LOG-FORMAT.md and `docs/local-store.md` describe it.
//!
//! Owns: the data directory, appending, the open (replaying or rebuilding the
//! index), reading and watching streams, the integrity scan, the snapshots
//! tree. Must never: hand out a record whose checksum or position does not
//! check, acknowledge a durable append before its entry is synced, let two
//! appends extend one position, or let a sled or I/O error out unworded.

/// Stops the process when something the store decided and relies on does not
/// hold (TigerBeetle's rule): a wrong record must never reach the journal.
/// Never for damage found on disk, which is reported.
macro_rules! invariant {
    ($holds:expr, $($why:tt)+) => {
        if !$holds {
            $crate::local::stop(format_args!($($why)+))
        }
    };
}

mod contract;
mod entry;
mod error;
mod group_commit;
pub mod index;
mod indexer;
pub mod journal;
mod keys;
mod open;
mod read_threads;
mod reader;
mod recent;
mod scan;
mod stats;
mod storage;
#[cfg(feature = "test-hooks")]
pub mod testing;
mod watermark;
mod writer;

pub use contract::SCAN_PAGE_RECORDS;
pub use error::Damage;
pub use open::{MARKER_FILE, STORE_FORMAT};
pub(crate) use stats::Counters;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;

use itertools::Itertools;
use tokio::sync::{mpsc, oneshot, watch};

use crate::error::{Corruption, LedgerError};
use crate::record::{NewRecord, StreamKey, StreamMap};
use crate::verify::VerifyReport;
use crate::{AppendOutcome, Durability, ExpectedPosition};
pub use error::{LocalError, Result, StoreProblem};
pub use open::OpenMode;
pub use reader::StreamReader;

/// [`LocalStore::open`] as a [`Ledger`](crate::Ledger) (tools, tests).
pub fn open(path: impl AsRef<Path>, mode: OpenMode) -> Result<(crate::Ledger, VerifyReport)> {
    let (store, report) = LocalStore::open(path, mode)?;
    Ok((store.ledger(), report))
}

/// [`LocalStore::open_scrubbing`] as a [`Ledger`](crate::Ledger).
pub fn open_scrubbing(path: impl AsRef<Path>, mode: OpenMode) -> Result<crate::Ledger> {
    Ok(LocalStore::open_scrubbing(path, mode)?.ledger())
}
pub(crate) use index::stored_next_global;
use writer::{AppendRequest, Command, Reply, WritePath};

/// Streams watched past which a watch first drops the ended tails' senders.
pub const WATCHERS_PRUNE_AT: usize = 4096;

/// Appends waiting for the writer before callers are made to wait (backpressure).
pub const MAX_PENDING_APPENDS: usize = 8192;

/// State shared by the handle, the writer, the indexer and the readers.
pub(crate) struct Shared {
    path: PathBuf,
    /// The threads the contract's async reads run on.
    read_threads: read_threads::ReadThreads,
    db: sled::Db,
    log: sled::Tree,
    snapshots: sled::Tree,
    /// The journal file the writer appends to: what a commit syncs.
    journal_file: Mutex<Arc<journal::JournalFile>>,
    /// The journal files readers read records from.
    journal_files: journal::JournalFiles,
    /// The records appended last, per stream (reads skip sled for them).
    recent: recent::Recent,
    next_global_on_open: u64,
    /// Streams found corrupt: never read, folded or extended.
    corrupt: RwLock<HashMap<String, (u64, Corruption)>>,
    poisoned: Mutex<Option<String>>,
    watchers: Mutex<Watchers>,
    /// The integrity report, once a scan finished.
    scrub: Mutex<Option<VerifyReport>>,
    scrub_done: Condvar,
    /// Set when the last handle goes: the scrubber stops early.
    stopping: AtomicBool,
    stats: Counters,
    /// Where the rounds the indexer applied end (sled's readers stop there).
    applied_next_global: AtomicU64,
    /// Rounds journaled, on their way into sled.
    index_queue: indexer::IndexQueue,
    /// Where the rounds journaled end (a sync begun after covers them).
    journaled_next_global: AtomicU64,
    /// What the open found wrong with the index, if it rebuilt it.
    rebuilt: Option<index::Rebuilt>,
}

impl Shared {
    /// The scrubber: a full integrity scan that marks corrupt streams.
    fn scrub(&self) {
        lower_this_threads_priority();
        let started = std::time::Instant::now();
        let report = match scan::verify_live(&self.log, &self.journal_files, &self.stopping) {
            Ok(Some(report)) => report,
            Ok(None) => return,
            Err(error) => {
                tracing::error!(%error, "integrity scan failed");
                return;
            }
        };
        for problem in &report.problems {
            if index::blames_the_index(&problem.corruption) {
                let stream = problem.stream.as_deref().unwrap_or("?");
                let found = format!("stream {stream}: {}", problem.problem);
                index::mark_damaged(&self.path, &found);
            }
            tracing::error!(
                stream = problem.stream.as_deref().unwrap_or("?"),
                position = problem.position,
                problem = %problem.problem,
                "corrupt record: the stream is refused"
            );
        }
        {
            let mut corrupt = self.corrupt.write().unwrap_or_else(|p| p.into_inner());
            for (stream, found) in report.corrupt_streams() {
                corrupt.entry(stream).or_insert(found);
            }
        }
        let (records, problems) = (report.records, report.problems.len());
        *lock(&self.scrub) = Some(report);
        self.scrub_done.notify_all();
        tracing::info!(
            records,
            problems,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "integrity scan finished"
        );
    }

    /// Makes every journaled round durable (older files were synced already).
    fn make_durable(&self) -> Result<()> {
        let journaled = self.journaled_next_global.load(Ordering::Acquire);
        let file = Arc::clone(&lock(&self.journal_file));
        file.sync()?;
        self.index_queue.note_durable(journaled);
        Ok(())
    }

    fn poison(&self, reason: String) {
        tracing::error!(%reason, "ledger refuses further writes");
        lock(&self.poisoned).get_or_insert(reason);
        self.index_queue.interrupt();
    }

    fn poisoned(&self) -> Option<String> {
        lock(&self.poisoned).clone()
    }

    fn check_not_corrupt(&self, stream: &StreamKey) -> Result<()> {
        let corrupt = self.corrupt.read().unwrap_or_else(|p| p.into_inner());
        match corrupt.get(stream.as_str()) {
            None => Ok(()),
            Some((position, found)) => Err(corrupt_error(stream, *position, found.clone())),
        }
    }

    /// Refuses `stream` from now on (first bad at `position`); the error.
    fn refuse(&self, stream: &StreamKey, position: u64, corruption: Corruption) -> LocalError {
        let mut corrupt = self.corrupt.write().unwrap_or_else(|p| p.into_inner());
        corrupt
            .entry(stream.to_string())
            .or_insert((position, corruption.clone()));
        corrupt_error(stream, position, corruption)
    }

    fn notify_watchers(&self, heads: &StreamMap<u64>) {
        let mut guard = lock(&self.watchers);
        let watchers = &mut guard.senders;
        if watchers.is_empty() {
            return;
        }
        for (stream, &head) in heads {
            if let Some(sender) = watchers.get(stream) {
                if sender.receiver_count() == 0 {
                    watchers.remove(stream);
                } else {
                    sender.send_replace(head);
                }
            }
        }
    }
}

/// The senders tails listen to, per stream.
struct Watchers {
    senders: StreamMap<watch::Sender<u64>>,
    /// Size of the next prune (twice what survives: O(1) a watch).
    prune_at: usize,
}

impl Default for Watchers {
    fn default() -> Self {
        Self {
            senders: StreamMap::default(),
            prune_at: WATCHERS_PRUNE_AT,
        }
    }
}

impl Watchers {
    /// An ended tail's sender stays until the stream's next append, if any.
    fn prune_if_due(&mut self) {
        if self.senders.len() < self.prune_at {
            return;
        }
        self.senders.retain(|_, sender| sender.receiver_count() > 0);
        self.prune_at = (self.senders.len() * 2).max(WATCHERS_PRUNE_AT);
    }
}

/// Stops the threads when the last handle goes: the lock is free after it.
struct Threads {
    shared: Arc<Shared>,
    commands: Option<mpsc::Sender<Command>>,
    handles: Vec<JoinHandle<()>>,
}

impl Drop for Threads {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::Relaxed);
        self.commands.take();
        self.shared.read_threads.close();
        // A read thread's job may drop the last clone: it cannot join itself.
        let current = std::thread::current().id();
        for handle in self.handles.drain(..) {
            if handle.thread().id() != current {
                let _ = handle.join();
            }
        }
        // The writer synced the journal as it stopped; sled's writes go to the
        // file system (unsynced: derived), so the next open replays little.
        if self.shared.poisoned().is_none()
            && let Err(error) = self.shared.db.flush()
        {
            tracing::warn!(%error, "sled's writes could not be flushed at close; the next open replays the journal");
        }
    }
}

/// An open local store; it closes when the last clone is dropped.
#[derive(Clone)]
pub struct LocalStore {
    shared: Arc<Shared>,
    threads: Arc<Threads>,
    snapshots: contract::LocalSnapshots,
}

impl LocalStore {
    /// Opens (or creates) the store in `path`; corrupt streams are reported.
    pub fn open(path: impl AsRef<Path>, mode: OpenMode) -> Result<(Self, VerifyReport)> {
        Self::open_checked(path.as_ref(), mode, None)
    }

    /// Opens with the index rebuilt from the journal (`log repair`).
    pub fn repair(path: impl AsRef<Path>) -> Result<(Self, VerifyReport)> {
        let why = "a rebuild was asked for (`log repair`)";
        Self::open_checked(path.as_ref(), OpenMode::MustExist, Some(why))
    }

    /// Opens the store and checks every record; records failing through an
    /// intact journal mean a damaged index: rebuilt and checked again.
    fn open_checked(
        path: &Path,
        mode: OpenMode,
        rebuild: Option<&str>,
    ) -> Result<(Self, VerifyReport)> {
        let path = path.to_path_buf();
        let files = journal::JournalFiles::new(&path);
        let mut opened = index::open(&path, mode, rebuild)?;
        let mut report = scan::verify(&opened.index.log, &files)?;
        if let Some(first) = report
            .problems
            .first()
            .filter(|_| opened.index.rebuilt.is_none())
            && let Ok(journal_files) = index::derivable(&path, Some(report.next_global))?
        {
            let found = format!(
                "{} records fail their checks through it while the journal is intact, the first: stream {} position {}: {}",
                report.problems.len(),
                first.stream.as_deref().unwrap_or("?"),
                first
                    .position
                    .map_or_else(|| "?".to_owned(), |p| p.to_string()),
                first.problem
            );
            drop(opened);
            index::announce_rebuild(&found);
            opened = index::rebuild_from(&path, found, &journal_files)?;
            report = scan::verify(&opened.index.log, &files)?;
        }
        watermark::check(&path, report.next_global.max(opened.next_global))?;
        let mut journal = opened.journal;
        if report.next_global != opened.next_global {
            // Records past the stored counter (damage): go on after them.
            let file_bytes = storage::journal_file_bytes(&path, journal::JOURNAL_FILE_BYTES);
            journal = journal::JournalWriter::create(&path, report.next_global, file_bytes)?;
        }
        let next_global = report.next_global;
        let store = Self::start(
            path,
            opened.index,
            next_global,
            journal,
            Some(report.clone()),
        )?;
        Ok((store, report))
    }

    /// Opens the store with the integrity scan in the background while it
    /// serves (the scrubber): an open costs sled's recovery, not a read of
    /// every record; a stream found corrupt is refused from then on.
    pub fn open_scrubbing(path: impl AsRef<Path>, mode: OpenMode) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let opened = index::open(&path, mode, None)?;
        watermark::check(&path, opened.next_global)?;
        Self::start(path, opened.index, opened.next_global, opened.journal, None)
    }

    /// What the open found wrong with the index and rebuilt, if it did.
    pub fn index_rebuilt(&self) -> Option<&index::Rebuilt> {
        self.shared.rebuilt.as_ref()
    }

    /// Starts the threads (the scrubber if no scan at open gave a `report`).
    fn start(
        path: PathBuf,
        index: index::Index,
        next_global: u64,
        journal: journal::JournalWriter,
        report: Option<VerifyReport>,
    ) -> Result<Self> {
        let index::Index { db, log, rebuilt } = index;
        // sled starts its I/O thread pool the first time it writes a buffer
        // out, and the pool's seven threads spin on its queue until all have
        // started: flushed here, that happens at the open and not under the
        // first load (under callgrind it cost up to 640 thousand instructions
        // a conversation of a 400-conversation run). Not for durability.
        db.flush()?;
        let corrupt = report.as_ref().map(VerifyReport::corrupt_streams);
        let scrub = report.is_none();
        let shared = Arc::new(Shared {
            read_threads: read_threads::ReadThreads::default(),
            journal_files: journal::JournalFiles::new(&path),
            path,
            snapshots: db.open_tree("snapshots")?,
            db,
            log,
            journal_file: Mutex::new(journal.file()),
            recent: recent::Recent::default(),
            next_global_on_open: next_global,
            corrupt: RwLock::new(corrupt.unwrap_or_default()),
            poisoned: Mutex::new(None),
            watchers: Mutex::new(Watchers::default()),
            scrub: Mutex::new(report),
            scrub_done: Condvar::new(),
            stopping: AtomicBool::new(false),
            stats: Counters::default(),
            applied_next_global: AtomicU64::new(next_global),
            index_queue: indexer::IndexQueue::starting_at(next_global),
            journaled_next_global: AtomicU64::new(next_global),
            rebuilt,
        });
        let (commands, receiver) = mpsc::channel(MAX_PENDING_APPENDS);
        let write_path = WritePath::new(&shared, journal);
        let spawn = |name: &str, work: Box<dyn FnOnce(Arc<Shared>) + Send>| {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || work(shared))
        };
        let write = move |shared| writer::run_writer(shared, receiver, write_path);
        let mut handles = vec![
            spawn("ledger-writer", Box::new(write))?,
            spawn("ledger-indexer", Box::new(indexer::run_indexer))?,
        ];
        handles.extend(shared.read_threads.start()?);
        if scrub {
            handles.push(spawn("ledger-scrubber", Box::new(|shared| shared.scrub()))?);
        }
        let threads = Arc::new(Threads {
            shared: shared.clone(),
            commands: Some(commands),
            handles,
        });
        let snapshots = contract::LocalSnapshots {
            shared: shared.clone(),
        };
        Ok(Self {
            shared,
            threads,
            snapshots,
        })
    }

    /// The integrity report, once the scan has finished.
    pub fn scrub_report(&self) -> Option<VerifyReport> {
        lock(&self.shared.scrub).clone()
    }

    /// Why the ledger refuses writes after a failed write or sync, if it does.
    pub fn poisoned(&self) -> Option<String> {
        self.shared.poisoned()
    }

    /// Blocks until the integrity scan has finished and returns its report.
    pub fn wait_for_scrub(&self) -> VerifyReport {
        let scrub = lock(&self.shared.scrub);
        let done = self.shared.scrub_done.wait_while(scrub, |s| s.is_none());
        let report = done.unwrap_or_else(|p| p.into_inner()).clone();
        report.unwrap_or_default()
    }

    fn commands(&self) -> Result<&mpsc::Sender<Command>> {
        Ok(self.threads.commands.as_ref().ok_or(LedgerError::Closed)?)
    }

    /// This store behind the contract, as the doors and tools use it.
    pub fn ledger(&self) -> crate::Ledger {
        crate::Ledger::new(Arc::new(self.clone()))
    }

    /// The directory this store lives in.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// The writer's command for an append, once the records are checked.
    pub(super) fn append_command(
        stream: &StreamKey,
        expected: ExpectedPosition,
        records: Vec<NewRecord>,
        durability: Durability,
        timestamp_ms: Option<u64>,
    ) -> Result<impl FnOnce(Reply<AppendOutcome>) -> Command> {
        crate::check_append(&records)?;
        let stream = stream.clone();
        Ok(move |reply| {
            Command::Append(AppendRequest {
                stream,
                expected,
                records,
                durability,
                timestamp_ms,
                reply,
            })
        })
    }

    /// Sends the writer `command` built around a reply; waits for the reply.
    pub(super) async fn call<T>(&self, command: impl FnOnce(Reply<T>) -> Command) -> Result<T> {
        let (reply, receiver) = oneshot::channel();
        let sent = self.commands()?.send(command(reply)).await;
        sent.map_err(|_| LedgerError::Closed)?;
        receiver.await.map_err(|_| LedgerError::Closed)?
    }

    /// [`LocalStore::call`] for threads outside an async runtime.
    fn call_blocking<T>(&self, command: impl FnOnce(Reply<T>) -> Command) -> Result<T> {
        let (reply, receiver) = oneshot::channel();
        let sent = self.commands()?.blocking_send(command(reply));
        sent.map_err(|_| LedgerError::Closed)?;
        receiver.blocking_recv().map_err(|_| LedgerError::Closed)?
    }

    /// `LogStore::append` for threads outside an async runtime.
    pub fn append_blocking(
        &self,
        stream: &StreamKey,
        expected: ExpectedPosition,
        records: Vec<NewRecord>,
        durability: Durability,
    ) -> Result<AppendOutcome> {
        let command = Self::append_command(stream, expected, records, durability, None)?;
        self.call_blocking(command)
    }

    /// `LogStore::flush` for threads outside an async runtime.
    pub fn flush_blocking(&self) -> Result<()> {
        self.call_blocking(Command::Flush)
    }

    /// The stream's next position, read on this thread (it may read sled).
    pub fn head_blocking(&self, stream: &StreamKey) -> Result<u64> {
        self.shared.check_not_corrupt(stream)?;
        self.shared.read_head(stream)
    }

    /// Reads `stream` from `from` on the calling thread, every record checked.
    pub fn read_blocking(&self, stream: &StreamKey, from: u64) -> Result<StreamReader> {
        self.shared.check_not_corrupt(stream)?;
        Ok(match self.shared.recent.read(stream, from, usize::MAX) {
            Some(records) => StreamReader::held(records),
            None => StreamReader::sled(self.shared.clone(), stream.clone(), from),
        })
    }

    /// Blocks until every record appended before the call is in sled (a bench
    /// charging the indexer's work to its appends; reads never need it).
    pub fn wait_until_indexed(&self) {
        self.shared.index_queue.wait_until_applied();
    }

    /// Every stream key after `after`, in key order. Blocks.
    pub fn streams_blocking(
        &self,
        after: Option<&StreamKey>,
    ) -> impl Iterator<Item = Result<StreamKey>> + use<> {
        self.shared.index_queue.wait_until_applied();
        scan::stream_keys(self.shared.log.clone(), after)
    }

    /// Streams refused for a record failing its checks, and its position.
    pub fn corrupt_streams(&self) -> Vec<(String, u64)> {
        let corrupt = self
            .shared
            .corrupt
            .read()
            .unwrap_or_else(|p| p.into_inner());
        corrupt
            .iter()
            .map(|(s, (p, _))| (s.clone(), *p))
            .sorted()
            .collect()
    }
}

fn corrupt_error(stream: impl ToString, position: u64, corruption: Corruption) -> LocalError {
    let stream = stream.to_string();
    LedgerError::Corrupt {
        stream,
        position,
        corruption,
    }
    .into()
}

/// A lock's guard even if a holder panicked: what the store relies on is
/// checked where it is decided (`invariant!`), not by a lock's poison.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// Logs why an invariant failed and aborts before anything more is written.
#[cold]
pub(crate) fn stop(why: std::fmt::Arguments) -> ! {
    tracing::error!(%why, "an invariant of the local store failed: stopping before anything more is written");
    eprintln!("ledgerwire: an invariant of the local store failed: {why}");
    std::process::abort()
}

/// The scrubber's CPU priority (`nice`), the lowest: a full scan takes a core
/// for seconds beside `serve`'s first requests, and gets what they leave.
pub const SCRUBBER_NICE: libc::c_int = 19;

/// Lowers this thread's priority to [`SCRUBBER_NICE`]; best effort.
fn lower_this_threads_priority() {
    // SAFETY: plain system calls on the calling thread's own id.
    let result = unsafe {
        let thread = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, thread, SCRUBBER_NICE)
    };
    if result != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "the scrubber runs at normal priority");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record;

    impl LocalStore {
        /// Checks the whole store again through its files: every record
        /// appended before the call, none appended while it runs.
        pub(crate) fn verify_blocking(&self) -> Result<VerifyReport> {
            self.shared.index_queue.wait_until_applied();
            let files = &self.shared.journal_files;
            let report = scan::verify_live(&self.shared.log, files, &AtomicBool::new(false))?;
            Ok(report.expect("a scan nothing stops"))
        }
    }

    #[test]
    fn ended_tails_senders_are_dropped_once_the_map_is_due_and_live_ones_kept() {
        let mut watchers = Watchers::default();
        let mut live = Vec::new();
        for n in 0..WATCHERS_PRUNE_AT {
            let (sender, receiver) = watch::channel(0);
            if n % 1024 == 0 {
                live.push(receiver);
            }
            let key = StreamKey::new(format!("w/{n}")).expect("a key");
            watchers.senders.insert(key, sender);
        }
        watchers.prune_if_due();
        assert_eq!(watchers.senders.len(), live.len());
        assert_eq!(watchers.prune_at, WATCHERS_PRUNE_AT);
        // Below the mark nothing is scanned.
        drop(live);
        watchers.prune_if_due();
        assert_eq!(watchers.senders.len(), 4);
    }

    /// A live check sees the records the indexer published, not one it
    /// is inserting: a record past the published end (as if halfway
    /// through a round) is neither counted nor taken for a hole.
    #[test]
    fn a_live_verify_leaves_out_what_the_indexer_has_not_published() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let (ledger, _) = LocalStore::open(dir.path(), OpenMode::CreateIfMissing).expect("open");
        let stream = StreamKey::new("live/verify").expect("a key");
        let record = NewRecord {
            kind: 1,
            payload: vec![1],
        };
        ledger
            .append_blocking(
                &stream,
                ExpectedPosition::Any,
                vec![record],
                Durability::Durable,
            )
            .expect("append");
        assert!(
            ledger
                .verify_blocking()
                .expect("verify")
                .problems
                .is_empty()
        );
        let published = ledger.shared.applied_next_global();
        // A later round's second record, inserted before its first.
        let halfway = StreamKey::new("live/halfway").expect("a key");
        let header = record::Header {
            format_version: record::FORMAT_VERSION,
            kind: 1,
            position: 0,
            global_position: published + 1,
            timestamp_ms: 0,
        };
        let envelope = record::encode(&header, &halfway, b"x");
        ledger
            .shared
            .log
            .insert(keys::record_key(&halfway, 0), envelope)
            .expect("insert");
        let live = ledger.verify_blocking().expect("verify");
        assert!(live.problems.is_empty(), "{:?}", live.problems);
        assert_eq!(live.records, 1);
        // The whole-store scan (an offline `log verify`) sees the hole.
        let whole = scan::verify(&ledger.shared.log, &ledger.shared.journal_files).expect("verify");
        assert!(!whole.problems.is_empty());
    }
}
