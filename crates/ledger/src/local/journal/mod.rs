//! The journal: the store's durability point and, since format 4, where
//! records live. Each writer round is one checksummed entry here before sled
//! gets it; a durable append is acknowledged once the file is synced (one
//! `fdatasync` a group). sled points into the files (`entry`); an open replays
//! what sled lacks.
//!
//! Owns: `journal/`, its file and entry layout (LOG-FORMAT.md), writing,
//! syncing and rotating files, reading them back, replaying them into sled.
//! Must never: delete or rewrite a synced entry (sled points at it), write
//! after a failed write or sync (the writer is poisoned), replay an entry that
//! does not check, or take damage to a synced entry for a torn end.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::local::error::Damage;
use crate::local::error::{LocalError, Result};
use crate::local::keys::{self, NEXT_GLOBAL_KEY};
use crate::local::storage;
use crate::record::{self, Record};

/// The journal's directory, inside the store directory.
pub const JOURNAL_DIR: &str = "journal";

/// Size past which the writer starts a new file: what an open may replay.
pub const JOURNAL_FILE_BYTES: u64 = 32 * 1024 * 1024;

/// Bytes allocated past the rotation size (the last round ends past it).
const PREALLOCATION_SLACK_BYTES: u64 = 1024 * 1024;

/// The first bytes of every journal file.
const MAGIC: &[u8; 8] = b"LWJRNL01";

/// Bytes of a file's header: magic, base (u64), flags (u32), CRC-32C of them.
pub const FILE_HEADER_BYTES: usize = 24;

/// Bytes before an entry's body: its length and CRC-32C (u32 each).
const ENTRY_HEADER_BYTES: usize = 8;

/// Bytes of an entry body before its records: first and next global position,
/// the offset known synced when written (u64 each), the record count (u32).
const BODY_HEADER_BYTES: usize = 28;

/// Where the first record (its length) of the entry at `entry_offset` starts.
pub fn records_offset(entry_offset: u64) -> u64 {
    entry_offset + (ENTRY_HEADER_BYTES + BODY_HEADER_BYTES) as u64
}

/// Largest entry body a reader accepts: a round's bytes plus one append.
pub const MAX_ENTRY_BYTES: usize = 1 << 31;

/// Largest entry buffer the writer keeps between rounds, in bytes.
const RETAINED_BUFFER_BYTES: usize = 4 * 1024 * 1024;

/// How far past the position due a resynchronising reader looks, in records.
const RESYNC_WINDOW_RECORDS: u64 = 1 << 32;

fn file_name(base: u64) -> String {
    format!("{base:020}.wal")
}

/// The base global position a journal file's name carries.
fn parse_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".wal")?;
    (digits.len() == 20).then_some(())?;
    digits.parse().ok()
}

/// Header flag: the file was the spare (its syncs flush data only).
pub const WRITTEN_AHEAD: u32 = 1;

fn header(base: u64, flags: u32) -> [u8; FILE_HEADER_BYTES] {
    let mut bytes = [0u8; FILE_HEADER_BYTES];
    bytes[..8].copy_from_slice(MAGIC);
    bytes[8..16].copy_from_slice(&base.to_le_bytes());
    bytes[16..20].copy_from_slice(&flags.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[..20]);
    bytes[20..].copy_from_slice(&crc.to_le_bytes());
    bytes
}

/// Makes a directory's entries (files created, renamed or deleted) stable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// The journal files in `store`, oldest first, with their base positions.
pub fn files(store: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    let dir = store.join(JOURNAL_DIR);
    let mut found = Vec::new();
    let entries = match fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(found),
        Err(error) => return Err(error),
    };
    for entry in entries {
        let path = entry?.path();
        if let Some(base) = path
            .file_name()
            .and_then(|name| name.to_str())
            .and_then(parse_name)
        {
            found.push((base, path));
        }
    }
    found.sort();
    Ok(found)
}

/// The journal file being written: the writer appends, a commit syncs.
pub struct JournalFile {
    path: PathBuf,
    file: File,
    /// Bytes written (header included).
    written: AtomicU64,
    /// Bytes a sync that began after they were written made stable.
    synced: AtomicU64,
}

impl JournalFile {
    /// Makes every byte written stable: one `fdatasync`, unless one covered it.
    pub fn sync(&self) -> io::Result<()> {
        let written = self.written.load(Ordering::Acquire);
        if self.synced.load(Ordering::Acquire) >= written {
            return Ok(());
        }
        storage::sync(&self.file, &self.path, written)?;
        self.synced.fetch_max(written, Ordering::AcqRel);
        Ok(())
    }

    /// Bytes known on stable storage.
    pub fn synced_len(&self) -> u64 {
        self.synced.load(Ordering::Acquire)
    }
}

/// The journal the writer thread owns: the current file and a buffer.
pub struct JournalWriter {
    store: PathBuf,
    current: Arc<JournalFile>,
    base: u64,
    /// The rotation size each new file is allocated for.
    file_bytes: u64,
    /// Whether the current file was the spare (its syncs flush data only).
    zeroed: bool,
    /// The next file, prepared ahead (`spare`).
    spare: Spare,
    /// The last file finished (kept cached), and the one before (dropped).
    previous: Option<PathBuf>,
    to_release: Option<PathBuf>,
    buf: Vec<u8>,
    /// The global position the next entry starts at.
    next_global: u64,
    /// Whether the file's first write was checked to land on unwritten bytes.
    clear_checked: bool,
}

impl JournalWriter {
    /// Starts a new, empty journal file based at `base` (the spare if there,
    /// else one allocated for `file_bytes`), stable with its directory entry.
    pub fn create(store: &Path, base: u64, file_bytes: u64) -> io::Result<Self> {
        let dir = store.join(JOURNAL_DIR);
        let fresh_dir = !dir.exists();
        fs::create_dir_all(&dir)?;
        if fresh_dir {
            sync_dir(store)?;
        }
        let path = dir.join(file_name(base));
        let (file, zeroed) = match spare::take(
            &dir,
            allocated_len(file_bytes),
            &header(base, WRITTEN_AHEAD),
            &path,
        )? {
            Some(file) => (file, true),
            None => (create_allocated(&path, base, file_bytes)?, false),
        };
        sync_dir(&dir)?;
        let end = FILE_HEADER_BYTES as u64;
        // Synced already: this tells the storage (a test's trace) so.
        storage::sync(&file, &path, end)?;
        let (next, written_ahead) = (base, zeroed);
        let tail = Tail {
            path,
            base,
            end,
            next,
            written_ahead,
        };
        Ok(Self::writing(store, &tail, file, file_bytes, Spare::Absent))
    }

    /// Goes on with the newest file a replay settled; an allocated one gives
    /// way to a ready spare (one the last process left is ready at once).
    pub fn resume(store: &Path, tail: &Tail, file_bytes: u64) -> io::Result<Self> {
        let file = OpenOptions::new().read(true).write(true).open(&tail.path)?;
        let spare = Spare::found(&store.join(JOURNAL_DIR), allocated_len(file_bytes));
        Ok(Self::writing(store, tail, file, file_bytes, spare))
    }

    /// The writer of `file`, synced up to `tail.end`.
    fn writing(store: &Path, tail: &Tail, file: File, file_bytes: u64, spare: Spare) -> Self {
        Self {
            store: store.to_path_buf(),
            current: Arc::new(JournalFile {
                path: tail.path.clone(),
                file,
                written: AtomicU64::new(tail.end),
                synced: AtomicU64::new(tail.end),
            }),
            base: tail.base,
            file_bytes,
            zeroed: tail.written_ahead,
            spare,
            previous: None,
            to_release: None,
            buf: Vec::new(),
            next_global: tail.next,
            clear_checked: false,
        }
    }

    /// Whether to rotate: full, or allocated (slow to sync) and a spare ready.
    pub fn wants_rotation(&mut self) -> bool {
        self.len() >= self.file_bytes || (!self.zeroed && !self.is_empty() && self.spare.is_ready())
    }

    /// Starts the next spare once this file holds `SPARE_AFTER_BYTES`.
    fn maybe_prepare_spare(&mut self) {
        if matches!(self.spare, Spare::Absent)
            && self.len() >= SPARE_AFTER_BYTES.min(self.file_bytes / 2)
        {
            let dir = self.store.join(JOURNAL_DIR);
            let release = self.to_release.take();
            self.spare
                .start(&dir, allocated_len(self.file_bytes), release);
        }
    }

    /// The file a commit syncs.
    pub fn file(&self) -> Arc<JournalFile> {
        Arc::clone(&self.current)
    }

    /// Bytes written to the current file.
    pub fn len(&self) -> u64 {
        self.current.written.load(Ordering::Acquire)
    }

    /// Whether the current file holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == FILE_HEADER_BYTES as u64
    }

    /// The base global position of the current file.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Writes one round (global positions `first..next`) as one entry, one
    /// `write`, not synced; its offset. A failure poisons the ledger (caller).
    pub fn append<'a>(
        &mut self,
        first: u64,
        next: u64,
        envelopes: impl ExactSizeIterator<Item = &'a [u8]>,
    ) -> io::Result<u64> {
        let start = self.len();
        self.buf.clear();
        self.buf.extend_from_slice(&[0u8; ENTRY_HEADER_BYTES]);
        self.buf.extend_from_slice(&first.to_le_bytes());
        self.buf.extend_from_slice(&next.to_le_bytes());
        // Synced below here: how a reader tells damage from a torn tail.
        self.buf
            .extend_from_slice(&self.current.synced_len().to_le_bytes());
        self.buf
            .extend_from_slice(&(envelopes.len() as u32).to_le_bytes());
        invariant!(
            first == self.next_global && next == first + envelopes.len() as u64,
            "a journal entry of global positions {first}..{next} after {}",
            self.next_global
        );
        for (global, envelope) in (first..).zip(envelopes) {
            let header = crate::record::check_envelope(envelope);
            invariant!(
                header.as_ref().is_ok_and(|h| h.global_position == global),
                "the record due at global position {global} does not check: {header:?}"
            );
            self.buf
                .extend_from_slice(&(envelope.len() as u32).to_le_bytes());
            self.buf.extend_from_slice(envelope);
        }
        let body_len = self.buf.len() - ENTRY_HEADER_BYTES;
        if body_len > MAX_ENTRY_BYTES {
            return Err(io::Error::other(format!(
                "a journal entry of {body_len} bytes is over {MAX_ENTRY_BYTES}"
            )));
        }
        let crc = crc32c::crc32c(&self.buf[ENTRY_HEADER_BYTES..]);
        self.buf[..4].copy_from_slice(&(body_len as u32).to_le_bytes());
        self.buf[4..8].copy_from_slice(&crc.to_le_bytes());
        if !self.clear_checked {
            self.check_clear(start)?;
        }
        storage::write_at(&self.current.file, &self.buf, start)?;
        self.next_global = next;
        self.current
            .written
            .fetch_add(self.buf.len() as u64, Ordering::AcqRel);
        if self.buf.capacity() > RETAINED_BUFFER_BYTES {
            self.buf = Vec::new();
        }
        self.maybe_prepare_spare();
        Ok(start)
    }

    /// The first write into a file the writer did not fill must land on
    /// unwritten bytes, as the open decided: it would overwrite a record that
    /// may have been acknowledged.
    fn check_clear(&mut self, at: u64) -> io::Result<()> {
        let mut found = [0u8; ENTRY_HEADER_BYTES];
        let current = &self.current;
        storage::read_at(&current.file, &current.path, &mut found, at)?;
        invariant!(
            found == [0u8; ENTRY_HEADER_BYTES],
            "{} holds bytes at offset {at}, where the open found its end: the entry would overwrite them",
            current.path.display()
        );
        self.clear_checked = true;
        Ok(())
    }

    /// Syncs the file and starts the next at `base`: only the newest can tear.
    pub fn rotate(&mut self, base: u64) -> io::Result<()> {
        self.current.sync()?;
        self.spare.wait();
        let mut next = Self::create(&self.store, base, self.file_bytes)?;
        next.previous = Some(self.current.path.clone());
        next.to_release = self.previous.take();
        *self = next;
        Ok(())
    }
}

/// Bytes a new file is given ahead: its rotation size and some slack.
fn allocated_len(file_bytes: u64) -> u64 {
    file_bytes.saturating_add(PREALLOCATION_SLACK_BYTES.min(file_bytes))
}

/// A new file at `path`: its header, its blocks allocated, all synced.
fn create_allocated(path: &Path, base: u64, file_bytes: u64) -> io::Result<File> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    file.write_all(&header(base, 0))?;
    preallocate(&file, allocated_len(file_bytes))?;
    file.sync_all()?;
    Ok(file)
}

/// Gives `file` its blocks and size up to `len` ahead (`fallocate`; unwritten
/// blocks read as zeros, the file's end to a reader): a sync that also
/// persists a grown size was a quarter slower here. Without it, files grow.
fn preallocate(file: &File, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let len = libc::off_t::try_from(len).map_err(io::Error::other)?;
    // SAFETY: a plain system call on a descriptor `file` keeps open.
    let result = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) };
    if result == 0 {
        return Ok(());
    }
    let error = io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::EOPNOTSUPP) => Ok(()),
        _ => Err(error),
    }
}

mod read;
mod scan;
mod spare;
pub use read::JournalFiles;
pub use scan::*;
pub use spare::SPARE_AFTER_BYTES;
#[cfg(feature = "test-hooks")]
pub use spare::SPARE_FILE;
use spare::Spare;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{FORMAT_VERSION, Header, StreamKey, encode};

    fn scan_file(path: &Path, last: bool) -> io::Result<FileScan> {
        scan_file_from(path, last, None)
    }

    fn envelope(position: u64, global: u64) -> Vec<u8> {
        let header = Header {
            format_version: FORMAT_VERSION,
            kind: 1,
            position,
            global_position: global,
            timestamp_ms: 1,
        };
        encode(&header, &StreamKey::new("j/s").unwrap(), b"payload")
    }

    fn write(writer: &mut JournalWriter, position: u64, global: u64) {
        let e = envelope(position, global);
        writer
            .append(global, global + 1, [e.as_slice()].into_iter())
            .unwrap();
    }

    #[test]
    fn entries_read_back_up_to_a_torn_end() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = JournalWriter::create(dir.path(), 5, 4096).unwrap();
        let (a, b) = (envelope(0, 5), envelope(1, 6));
        writer
            .append(5, 7, [a.as_slice(), b.as_slice()].into_iter())
            .unwrap();
        let boundary = writer.len() as usize;
        write(&mut writer, 2, 7);
        let path = files(dir.path()).unwrap().pop().unwrap().1;
        // What was written, without the preallocated zeros after it.
        let whole = fs::read(&path).unwrap()[..writer.len() as usize].to_vec();
        // Nothing was synced: every cut short of the end is a torn tail
        // that loses the last entry, never more, and is never damage.
        for cut in (FILE_HEADER_BYTES..whole.len()).step_by(7) {
            fs::write(&path, &whole[..cut]).unwrap();
            let scan = scan_file(&path, true).unwrap();
            assert_eq!(scan.base, Some(5));
            assert!(scan.entries.len() <= 1);
            assert!(scan.damage.is_empty());
            let whole_entries = cut == FILE_HEADER_BYTES || cut == boundary;
            assert_eq!(scan.torn_at.is_none(), whole_entries);
        }
        let mut flipped = whole.clone();
        let last = flipped.len() - 3;
        flipped[last] ^= 1;
        fs::write(&path, &flipped).unwrap();
        let scan = scan_file(&path, true).unwrap();
        assert_eq!(scan.entries.len(), 1);
        assert_eq!(scan.entries[0].records.len(), 2);
        assert!(scan.damage.is_empty());
        fs::write(&path, &whole).unwrap();
        let scan = scan_file(&path, true).unwrap();
        assert_eq!(
            scan.entries
                .iter()
                .map(|e| (e.first, e.next))
                .collect::<Vec<_>>(),
            vec![(5, 7), (7, 8)]
        );
        assert_eq!(scan.torn_at, None);
    }

    #[test]
    fn a_preallocated_file_ends_cleanly_at_its_zeros_and_a_tear_before_them_shows() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = JournalWriter::create(dir.path(), 0, 4096).unwrap();
        write(&mut writer, 0, 0);
        let boundary = writer.len() as usize;
        write(&mut writer, 1, 1);
        let end = writer.len() as usize;
        let path = files(dir.path()).unwrap().pop().unwrap().1;
        let mut bytes = fs::read(&path).unwrap();
        assert!(
            bytes.len() as u64 > 4096,
            "allocated ahead: {}",
            bytes.len()
        );
        assert!(bytes[end..].iter().all(|&b| b == 0));
        let scan = scan_file(&path, true).unwrap();
        assert_eq!((scan.entries.len(), scan.torn_at), (2, None));
        assert!(scan.damage.is_empty());
        // The second entry's last bytes never reached the disk.
        bytes[end - 5..end].fill(0);
        fs::write(&path, &bytes).unwrap();
        let scan = scan_file(&path, true).unwrap();
        assert_eq!(scan.entries.len(), 1);
        assert_eq!(scan.torn_at, Some(boundary as u64));
        // In an older file (synced whole), the same bytes are damage.
        let scan = scan_file(&path, false).unwrap();
        assert_eq!(scan.damage.len(), 1);
    }

    #[test]
    fn a_bad_entry_that_was_synced_is_damage_and_an_unsynced_one_is_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = JournalWriter::create(dir.path(), 0, 4096).unwrap();
        write(&mut writer, 0, 0);
        let second = writer.len() as usize;
        write(&mut writer, 1, 1);
        // Not synced yet: the third entry says only the header is synced.
        write(&mut writer, 2, 2);
        let path = files(dir.path()).unwrap().pop().unwrap().1;
        let mut bytes = fs::read(&path).unwrap();
        bytes[second + 12] ^= 0xff;
        fs::write(&path, &bytes).unwrap();
        let scan = scan_file(&path, true).unwrap();
        assert_eq!(scan.entries.len(), 1);
        assert_eq!(scan.torn_at, Some(second as u64));
        assert!(scan.damage.is_empty());

        // The same bad bytes once a sync covered them, and an entry after.
        let dir = tempfile::tempdir().unwrap();
        let mut writer = JournalWriter::create(dir.path(), 0, 4096).unwrap();
        write(&mut writer, 0, 0);
        write(&mut writer, 1, 1);
        writer.file().sync().unwrap();
        write(&mut writer, 2, 2);
        let path = files(dir.path()).unwrap().pop().unwrap().1;
        let mut bytes = fs::read(&path).unwrap();
        bytes[second + 12] ^= 0xff;
        fs::write(&path, &bytes).unwrap();
        let scan = scan_file(&path, true).unwrap();
        assert_eq!(scan.damage.len(), 1, "{:?}", scan.damage);
        assert_eq!(scan.damage[0].offset, second as u64);
        assert_eq!(
            scan.entries.iter().map(|e| e.first).collect::<Vec<_>>(),
            vec![0, 2]
        );
        // In a file that is not the newest, anything bad is damage.
        write(&mut writer, 3, 3);
        let _ = fs::read(&path).unwrap();
        let scan = scan_file(&path, false).unwrap();
        assert_eq!(scan.damage.len(), 1);
    }

    #[test]
    fn replay_applies_what_sled_lacks_once_and_refuses_a_gap() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::Config::new().temporary(true).open().unwrap();
        let log = db.open_tree("log").unwrap();
        let mut writer = JournalWriter::create(dir.path(), 0, 4096).unwrap();
        for g in 0..4 {
            write(&mut writer, g, g);
        }
        let first = replay(dir.path(), &log, 0).unwrap();
        assert_eq!((first.next_global, first.rounds), (4, 4));
        // sled holds it all now: a second replay applies nothing.
        let again = replay(dir.path(), &log, 4).unwrap();
        assert_eq!((again.next_global, again.rounds), (4, 0));
        let partly = replay(dir.path(), &log, 2).unwrap();
        assert_eq!((partly.next_global, partly.rounds), (4, 2));
        // A journal starting past what sled holds: records are lost.
        fs::remove_dir_all(dir.path().join(JOURNAL_DIR)).unwrap();
        let mut writer = JournalWriter::create(dir.path(), 10, 4096).unwrap();
        write(&mut writer, 0, 10);
        assert!(matches!(
            replay(dir.path(), &log, 4),
            Err(LocalError::Damaged(Damage::JournalGap {
                expected: 4,
                found: 10
            }))
        ));
    }

    /// A round applied before as one sled entry per record (a format-2
    /// build, or a crash between inserts) is stored again as the indexer
    /// stores it: one entry, the single ones removed.
    #[test]
    fn replay_stores_a_round_as_the_indexer_does_whatever_sled_held() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::Config::new().temporary(true).open().unwrap();
        let log = db.open_tree("log").unwrap();
        let stream = StreamKey::new("j/s").unwrap();
        let round: Vec<Vec<u8>> = (0..3).map(|p| envelope(p, p)).collect();
        for (position, single) in round.iter().enumerate() {
            log.insert(
                keys::record_key(&stream, position as u64),
                single.as_slice(),
            )
            .unwrap();
        }
        let mut writer = JournalWriter::create(dir.path(), 0, 4096).unwrap();
        writer
            .append(0, 3, round.iter().map(Vec::as_slice))
            .unwrap();
        replay(dir.path(), &log, 0).unwrap();
        let entries = stored_entries(&log, &stream);
        assert_eq!(entries.len(), 1, "one entry for the round");
        assert_eq!(entries[0].0, keys::record_key(&stream, 0));
        assert_eq!(read_back(dir.path(), &entries[0].1), round.concat());
    }

    /// The envelopes a stored value holds or points at, end to end.
    fn read_back(store: &Path, value: &sled::IVec) -> Vec<u8> {
        let files = JournalFiles::new(store);
        crate::local::entry::envelopes(value.clone(), &files)
            .flat_map(|envelope| envelope.unwrap().to_vec())
            .collect()
    }

    /// The sled entries of `stream`, key and value, in key order.
    fn stored_entries(log: &sled::Tree, stream: &StreamKey) -> Vec<(sled::IVec, sled::IVec)> {
        log.scan_prefix(keys::stream_prefix(stream))
            .map(Result::unwrap)
            .collect()
    }

    /// sled may hold an entry the indexer joined across rounds (all of one
    /// batch, so it starts at or past the end sled recovered); a replay
    /// from its first round rewrites it round by round, and no entry
    /// overlaps another afterwards.
    #[test]
    fn replay_rewrites_an_entry_the_indexer_joined_across_rounds() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::Config::new().temporary(true).open().unwrap();
        let log = db.open_tree("log").unwrap();
        let stream = StreamKey::new("j/s").unwrap();
        let records: Vec<Vec<u8>> = (0..3).map(|p| envelope(p, p)).collect();
        log.insert(keys::record_key(&stream, 0), records.concat())
            .unwrap();
        let mut writer = JournalWriter::create(dir.path(), 0, 4096).unwrap();
        for (position, one) in (0u64..).zip(&records) {
            writer
                .append(position, position + 1, std::iter::once(one.as_slice()))
                .unwrap();
        }
        replay(dir.path(), &log, 0).unwrap();
        let entries = stored_entries(&log, &stream);
        assert_eq!(entries.len(), 3, "one entry per replayed round");
        for ((key, value), (position, one)) in entries.iter().zip((0u64..).zip(&records)) {
            assert_eq!(key.as_ref(), keys::record_key(&stream, position).as_slice());
            assert_eq!(read_back(dir.path(), value), one.as_slice());
        }
        let files = JournalFiles::new(dir.path());
        let report = crate::local::scan::verify(&log, &files).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert_eq!(report.records, 3);
    }

    #[test]
    fn rotation_keeps_every_file_and_a_replay_reads_from_the_one_holding_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = JournalWriter::create(dir.path(), 0, 4096).unwrap();
        for g in 0..10 {
            write(&mut writer, g, g);
        }
        writer.rotate(10).unwrap();
        for g in 10..20 {
            write(&mut writer, g, g);
        }
        writer.rotate(20).unwrap();
        let bases: Vec<u64> = files(dir.path())
            .unwrap()
            .into_iter()
            .map(|f| f.0)
            .collect();
        assert_eq!(bases, vec![0, 10, 20]);
        let read: Vec<Option<u64>> = scan_from(dir.path(), 15, None)
            .unwrap()
            .iter()
            .map(|s| s.base)
            .collect();
        assert_eq!(read, vec![Some(10), Some(20)]);
        let db = sled::Config::new().temporary(true).open().unwrap();
        let log = db.open_tree("log").unwrap();
        let replayed = replay(dir.path(), &log, 15).unwrap();
        assert_eq!((replayed.next_global, replayed.rounds), (20, 5));
        let tail = replayed.tail.expect("the newest file");
        assert_eq!((tail.base, tail.next), (20, 20));
        // The replay stored where its rounds end: the next open reads on
        // from there, and a stale position (older) only reads more.
        let stored = JournalEnd::stored(&log).expect("stored");
        assert_eq!((stored.file, stored.next_global), (10, 20));
        let scans = scan_from(dir.path(), 20, Some(stored)).unwrap();
        assert_eq!(scans[0].start, stored.offset);
        assert!(scans.iter().all(|s| s.entries.is_empty()));
        let stale = JournalEnd {
            file: 0,
            offset: FILE_HEADER_BYTES as u64,
            next_global: 0,
        };
        let scans = scan_from(dir.path(), 20, Some(stale)).unwrap();
        let read: usize = scans.iter().map(|s| s.entries.len()).sum();
        assert_eq!((scans.len(), read), (3, 20));
        // A position past a file's end (a file cut back by hand): the
        // whole file is read, not taken for empty.
        let beyond = JournalEnd {
            file: 0,
            offset: 1 << 40,
            next_global: 0,
        };
        let scans = scan_from(dir.path(), 5, Some(beyond)).unwrap();
        assert_eq!(scans[0].entries.len(), 10);
        log.insert(keys::JOURNAL_END_KEY, &stale.encode()).unwrap();
        let again = replay(dir.path(), &log, 20).unwrap();
        assert_eq!((again.next_global, again.rounds), (20, 0));
    }

    /// After a crash the newest file may end torn; a replay cuts the tear
    /// off, and the writer goes on after the last entry, so the file
    /// reads whole once another follows it.
    #[test]
    fn a_torn_newest_file_is_settled_and_written_on() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = JournalWriter::create(dir.path(), 0, 4096).unwrap();
        write(&mut writer, 0, 0);
        write(&mut writer, 1, 1);
        let end = writer.len();
        write(&mut writer, 2, 2);
        drop(writer);
        let path = files(dir.path()).unwrap().pop().unwrap().1;
        let mut bytes = fs::read(&path).unwrap();
        bytes[end as usize + 10] ^= 0xff;
        fs::write(&path, &bytes).unwrap();
        let db = sled::Config::new().temporary(true).open().unwrap();
        let log = db.open_tree("log").unwrap();
        let replayed = replay(dir.path(), &log, 0).unwrap();
        assert_eq!(replayed.next_global, 2);
        let tail = replayed.tail.clone().expect("the newest file");
        assert_eq!((tail.end, tail.next), (end, 2));
        let mut writer = JournalWriter::resume(dir.path(), &tail, 4096).unwrap();
        write(&mut writer, 2, 2);
        writer.rotate(3).unwrap();
        let scans = scan(dir.path()).unwrap();
        assert_eq!(scans.len(), 2);
        assert!(
            scans
                .iter()
                .all(|s| s.damage.is_empty() && s.torn_at.is_none())
        );
        assert_eq!(scans[0].entries.len(), 3);
        let again = replay(dir.path(), &log, 2).unwrap();
        assert_eq!((again.next_global, again.rounds), (3, 1));
    }

    /// Writes one-record entries until the file holds `len` bytes.
    fn fill_to(writer: &mut JournalWriter, len: u64, next: &mut u64) {
        while writer.len() < len {
            write(writer, *next, *next);
            *next += 1;
        }
    }

    #[test]
    fn a_spare_written_ahead_becomes_the_next_file_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join(JOURNAL_DIR);
        let file_bytes = 64 * 1024;
        let mut writer = JournalWriter::create(dir.path(), 0, file_bytes).unwrap();
        assert!(!writer.zeroed, "no spare yet: the first file is allocated");
        let mut next = 0;
        fill_to(&mut writer, file_bytes / 2 - 100, &mut next);
        assert!(
            matches!(writer.spare, Spare::Absent),
            "too early for a spare"
        );
        fill_to(&mut writer, file_bytes / 2, &mut next);
        writer.spare.wait();
        assert!(matches!(writer.spare, Spare::Ready));
        let spare = fs::read(journal.join(SPARE_FILE)).unwrap();
        assert_eq!(spare.len() as u64, allocated_len(file_bytes));
        assert!(spare.iter().all(|&b| b == 0));
        // An allocated file with entries gives way to a ready spare.
        assert!(writer.wants_rotation());
        writer.rotate(next).unwrap();
        assert!(writer.zeroed);
        assert!(!journal.join(SPARE_FILE).exists(), "the spare was taken");
        assert!(!writer.wants_rotation(), "a spare is kept until it is full");
        let first = next;
        fill_to(&mut writer, 4096, &mut next);
        let path = files(dir.path()).unwrap().pop().unwrap().1;
        assert_eq!(
            fs::metadata(&path).unwrap().len(),
            allocated_len(file_bytes)
        );
        let scan = scan_file(&path, true).unwrap();
        assert_eq!(scan.base, Some(first));
        assert_eq!(scan.entries.len() as u64, next - first);
        assert_eq!((scan.torn_at, scan.damage.len()), (None, 0));
        assert!(scan.written_ahead, "its header says it was the spare");
    }

    /// After an open, the writer goes on with the newest file: one that
    /// was the spare stays (its syncs flush data only); one that was only
    /// allocated gives way to a spare the last process left, at once.
    #[test]
    fn a_resumed_file_keeps_its_kind_and_takes_a_spare_left_behind() {
        let dir = tempfile::tempdir().unwrap();
        let file_bytes = 64 * 1024;
        let mut writer = JournalWriter::create(dir.path(), 0, file_bytes).unwrap();
        let mut next = 0;
        fill_to(&mut writer, file_bytes / 2, &mut next);
        writer.spare.wait();
        drop(writer);
        let db = sled::Config::new().temporary(true).open().unwrap();
        let log = db.open_tree("log").unwrap();
        let tail = replay(dir.path(), &log, 0).unwrap().tail.unwrap();
        assert!(!tail.written_ahead, "the first file was only allocated");
        let mut writer = JournalWriter::resume(dir.path(), &tail, file_bytes).unwrap();
        assert!(writer.wants_rotation(), "the spare left behind is ready");
        writer.rotate(next).unwrap();
        write(&mut writer, next, next);
        next += 1;
        drop(writer);
        let tail = replay(dir.path(), &log, next - 1).unwrap().tail.unwrap();
        assert!(tail.written_ahead);
        let mut writer = JournalWriter::resume(dir.path(), &tail, file_bytes).unwrap();
        assert!(writer.zeroed);
        assert!(!writer.wants_rotation(), "a written-ahead file is kept");
    }

    /// Pages of the file at `path` in the page cache (`mincore` on a
    /// mapping of it, which reads nothing in).
    fn cached_pages(path: &Path) -> usize {
        use std::os::fd::AsRawFd;
        let file = File::open(path).unwrap();
        let len = file.metadata().unwrap().len() as usize;
        // SAFETY: sysconf reads a constant of the system.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap();
        let mut resident = vec![0u8; len.div_ceil(page)];
        // SAFETY: a read-only shared mapping of a file kept open, unmapped
        // before return; `resident` has a byte for each page of it.
        unsafe {
            let map = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            );
            assert_ne!(map, libc::MAP_FAILED);
            assert_eq!(libc::mincore(map, len, resident.as_mut_ptr()), 0);
            libc::munmap(map, len);
        }
        resident.iter().filter(|&&b| b & 1 == 1).count()
    }

    #[test]
    fn the_spare_thread_drops_the_cached_pages_of_the_file_two_rotations_back() {
        let dir = tempfile::tempdir().unwrap();
        let file_bytes = 256 * 1024;
        let mut writer = JournalWriter::create(dir.path(), 0, file_bytes).unwrap();
        let mut next = 0;
        let mut finished = Vec::new();
        for _ in 0..2 {
            fill_to(&mut writer, file_bytes / 2, &mut next);
            writer.spare.wait();
            finished.push(writer.file().path.clone());
            writer.rotate(next).unwrap();
        }
        let [two_back, previous] = &finished[..] else {
            unreachable!()
        };
        assert!(cached_pages(two_back) > 16, "written, so cached at first");
        fill_to(&mut writer, file_bytes / 2, &mut next);
        writer.spare.wait();
        assert!(matches!(writer.spare, Spare::Ready));
        assert_eq!(cached_pages(two_back), 0, "dropped by the spare's thread");
        assert!(cached_pages(previous) > 16, "the file before is kept");
        // Only the cache: the records still read back from the disk.
        assert_eq!(scan_file(two_back, true).unwrap().base, Some(0));
    }

    #[test]
    fn a_spare_left_with_a_header_is_taken_whole_and_one_of_another_size_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join(JOURNAL_DIR);
        fs::create_dir_all(&journal).unwrap();
        // A crash between writing a taker's header and the rename.
        let mut left = vec![0u8; allocated_len(4096) as usize];
        left[..FILE_HEADER_BYTES].copy_from_slice(&header(99, WRITTEN_AHEAD));
        fs::write(journal.join(SPARE_FILE), &left).unwrap();
        let mut writer = JournalWriter::create(dir.path(), 7, 4096).unwrap();
        assert!(writer.zeroed);
        write(&mut writer, 0, 7);
        let scan = scan_file(&files(dir.path()).unwrap()[0].1, true).unwrap();
        assert_eq!((scan.base, scan.entries.len()), (Some(7), 1));
        // Prepared for another rotation size: deleted, not taken.
        fs::write(journal.join(SPARE_FILE), vec![0u8; 100]).unwrap();
        let writer = JournalWriter::create(dir.path(), 8, 4096).unwrap();
        assert!(!writer.zeroed);
        assert!(!journal.join(SPARE_FILE).exists());
    }
}
