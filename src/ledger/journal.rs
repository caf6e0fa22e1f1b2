//! The journal: the durability point of the store. Every writer round is
//! written here, as one checksummed entry, before it is applied to sled;
//! a durable append is acknowledged once the journal file is synced
//! (`fdatasync`), one sync for the whole group waiting. sled is then the
//! index: it is flushed and synced only at a checkpoint, after which the
//! journal files it covers are deleted, and on open every journal entry
//! sled does not hold yet is applied to it again (replay).
//!
//! Owns: the `journal/` directory, its file and entry layout (see
//! `log-format/LOG-FORMAT.md`), writing, syncing and rotating journal
//! files, reading them back (telling a torn tail from damage), replaying
//! them into sled, deleting the ones a checkpoint covers.
//! Must never: delete a journal file before sled holds its rounds on
//! stable storage, write an entry after a failed write or sync (the
//! writer is poisoned), replay an entry that does not check, or take
//! damage to a synced entry for the torn end of a crash.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::ledger::damage::Damage;
use crate::ledger::error::{LedgerError, Result};
use crate::ledger::powerloss::Trace;
use crate::ledger::record::{self, NEXT_GLOBAL_KEY, Record};

/// The journal's directory, inside the store directory.
pub const JOURNAL_DIR: &str = "journal";

/// Size past which the writer starts a new journal file and a checkpoint
/// makes sled durable up to it, in bytes: it bounds the journal on disk
/// (about twice this) and what an open replays.
pub const JOURNAL_FILE_BYTES: u64 = 32 * 1024 * 1024;

/// The first bytes of every journal file.
const MAGIC: &[u8; 8] = b"LWJRNL01";

/// Bytes of a journal file's header: magic, base global position (u64),
/// reserved (u32, zero), CRC-32C of the 20 bytes before it.
pub const FILE_HEADER_BYTES: usize = 24;

/// Bytes before an entry's body: its length (u32) and CRC-32C (u32).
const ENTRY_HEADER_BYTES: usize = 8;

/// Bytes of an entry body before its records: first and next global
/// position (u64 each), the file offset known synced when the entry was
/// written (u64) and the record count (u32).
const BODY_HEADER_BYTES: usize = 28;

/// Largest entry body a reader accepts, in bytes: a round's bytes are
/// bounded by what the writer takes into one round
/// (`writer::MAX_ROUND_BYTES`, 64 MiB) plus one append (at most
/// `MAX_RECORDS_PER_APPEND` records of `MAX_PAYLOAD_BYTES`, 1 GiB).
pub const MAX_ENTRY_BYTES: usize = 1 << 31;

/// Largest entry buffer the writer keeps between rounds, in bytes.
const RETAINED_BUFFER_BYTES: usize = 4 * 1024 * 1024;

/// How far past the global position it expects a resynchronising reader
/// looks for the next entry, in records: an entry found beyond a damaged
/// one starts at most this far on (a file holds far fewer records).
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

fn header(base: u64) -> [u8; FILE_HEADER_BYTES] {
    let mut bytes = [0u8; FILE_HEADER_BYTES];
    bytes[..8].copy_from_slice(MAGIC);
    bytes[8..16].copy_from_slice(&base.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[..20]);
    bytes[20..].copy_from_slice(&crc.to_le_bytes());
    bytes
}

/// Makes a directory's entries (files created, renamed or deleted in it)
/// stable: `fsync` of the directory itself.
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

/// One journal file being written: the writer thread appends to it, the
/// flusher syncs it. It knows how many bytes were written and how many
/// are known synced.
pub struct JournalFile {
    path: PathBuf,
    file: File,
    /// Bytes written (header included); set after each entry's write.
    written: AtomicU64,
    /// Bytes known on stable storage: a sync that began after they were
    /// written has returned.
    synced: AtomicU64,
    trace: Option<Arc<Trace>>,
}

impl JournalFile {
    /// Makes every byte written so far stable: one `fdatasync` (which
    /// persists the data and the file's size, and flushes the device's
    /// write cache). Nothing to do if a sync already covered them.
    pub fn sync(&self) -> io::Result<()> {
        let written = self.written.load(Ordering::Acquire);
        if self.synced.load(Ordering::Acquire) >= written {
            return Ok(());
        }
        self.file.sync_data()?;
        self.synced.fetch_max(written, Ordering::AcqRel);
        // Test-only: before any acknowledgement, like the sync itself.
        if let Some(trace) = &self.trace {
            trace.synced(&self.path, written);
        }
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
    buf: Vec<u8>,
    trace: Option<Arc<Trace>>,
}

impl JournalWriter {
    /// Starts a new, empty journal file whose first entry will hold
    /// global position `base`; the file, its header and its directory
    /// entry are on stable storage when this returns.
    pub fn create(store: &Path, base: u64, trace: Option<Arc<Trace>>) -> io::Result<Self> {
        let dir = store.join(JOURNAL_DIR);
        let fresh_dir = !dir.exists();
        fs::create_dir_all(&dir)?;
        if fresh_dir {
            sync_dir(store)?;
        }
        let path = dir.join(file_name(base));
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        file.write_all(&header(base))?;
        file.sync_all()?;
        sync_dir(&dir)?;
        if let Some(trace) = &trace {
            trace.synced(&path, FILE_HEADER_BYTES as u64);
        }
        let len = FILE_HEADER_BYTES as u64;
        Ok(Self {
            store: store.to_path_buf(),
            current: Arc::new(JournalFile {
                path,
                file,
                written: AtomicU64::new(len),
                synced: AtomicU64::new(len),
                trace: trace.clone(),
            }),
            base,
            buf: Vec::new(),
            trace,
        })
    }

    /// The file the flusher syncs.
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

    /// Writes one round (the envelopes of global positions `first ..
    /// next`) as one entry, with one `write`; not synced. A failed write
    /// leaves the file in an unknown state: the caller poisons the ledger.
    pub fn append<'a>(
        &mut self,
        first: u64,
        next: u64,
        envelopes: impl ExactSizeIterator<Item = &'a [u8]>,
    ) -> io::Result<()> {
        self.buf.clear();
        self.buf.extend_from_slice(&[0u8; ENTRY_HEADER_BYTES]);
        self.buf.extend_from_slice(&first.to_le_bytes());
        self.buf.extend_from_slice(&next.to_le_bytes());
        // What a reader needs to tell damage from a torn tail: every byte
        // below this offset was synced before this entry was written.
        self.buf
            .extend_from_slice(&self.current.synced_len().to_le_bytes());
        self.buf
            .extend_from_slice(&(envelopes.len() as u32).to_le_bytes());
        for envelope in envelopes {
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
        (&self.current.file).write_all(&self.buf)?;
        self.current
            .written
            .fetch_add(self.buf.len() as u64, Ordering::AcqRel);
        // A round far above the usual size should not pin its buffer.
        if self.buf.capacity() > RETAINED_BUFFER_BYTES {
            self.buf = Vec::new();
        }
        Ok(())
    }

    /// Syncs the current file and starts the next one at `base`: every
    /// entry written so far is on stable storage before the new file
    /// exists, so only the newest file can ever end torn.
    pub fn rotate(&mut self, base: u64) -> io::Result<()> {
        self.current.sync()?;
        let next = Self::create(&self.store, base, self.trace.clone())?;
        *self = next;
        Ok(())
    }
}

/// Deletes the journal files older than the one starting at `keep_from`
/// (the newest file is always kept): the caller has made sled hold every
/// record below `keep_from` on stable storage.
pub fn delete_before(store: &Path, keep_from: u64) -> io::Result<usize> {
    let mut deleted = 0;
    let files = files(store)?;
    for window in files.windows(2) {
        let ((_, path), (next_base, _)) = (&window[0], &window[1]);
        if *next_base <= keep_from {
            fs::remove_file(path)?;
            deleted += 1;
        }
    }
    if deleted > 0 {
        sync_dir(&store.join(JOURNAL_DIR))?;
    }
    Ok(deleted)
}

/// Deletes every journal file: sled holds all their rounds durably.
pub fn delete_all(store: &Path) -> io::Result<()> {
    let files = files(store)?;
    for (_, path) in &files {
        fs::remove_file(path)?;
    }
    if !files.is_empty() {
        sync_dir(&store.join(JOURNAL_DIR))?;
    }
    Ok(())
}

/// One entry read back: a round of records.
pub struct Entry {
    pub first: u64,
    pub next: u64,
    /// Bytes of its file known synced when it was written.
    pub synced_before: u64,
    /// Where it starts in its file.
    pub offset: u64,
    pub records: Vec<Record>,
}

/// Damage found in a journal file: bytes that were synced (or a whole
/// file that was) and no longer check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalDamage {
    pub file: PathBuf,
    pub offset: u64,
    pub detail: String,
    /// The global position where reading picked up again after it (the
    /// next entry that checks, or the base of the next file); `None` if
    /// nothing follows it. Records below it that sled does not hold are
    /// lost.
    pub resumes_at: Option<u64>,
}

impl JournalDamage {
    fn into_damage(self) -> Damage {
        Damage::Journal {
            file: self.file,
            offset: self.offset,
            detail: self.detail,
        }
    }
}

/// What reading one journal file found.
pub struct FileScan {
    pub path: PathBuf,
    /// The base global position its header names (`None`: no header,
    /// the file was being created when the process stopped).
    pub base: Option<u64>,
    /// The entries that check, in order.
    pub entries: Vec<Entry>,
    /// Where the torn end of a crash begins, if the file has one: bytes
    /// written after the last sync that did not all reach the disk. No
    /// acknowledged append is there.
    pub torn_at: Option<u64>,
    pub damage: Vec<JournalDamage>,
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        bytes.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        bytes.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// Why the bytes at an offset are not an entry.
enum NotAnEntry {
    /// Not even a whole entry header and a plausible length: the end of
    /// what was written, or damage.
    Short,
    /// The length fits but the checksum or the contents do not.
    Bad(&'static str),
}

/// The entry at `at` and its length in bytes, if it is whole and checks.
fn entry_at(bytes: &[u8], at: usize) -> std::result::Result<(Entry, usize), NotAnEntry> {
    let (Some(body_len), Some(crc)) = (u32_at(bytes, at), u32_at(bytes, at + 4)) else {
        return Err(NotAnEntry::Short);
    };
    let body_len = body_len as usize;
    if !(BODY_HEADER_BYTES..=MAX_ENTRY_BYTES).contains(&body_len) {
        return Err(NotAnEntry::Bad("an impossible entry length"));
    }
    let start = at + ENTRY_HEADER_BYTES;
    let Some(body) = start
        .checked_add(body_len)
        .and_then(|end| bytes.get(start..end))
    else {
        return Err(NotAnEntry::Short);
    };
    if crc32c::crc32c(body) != crc {
        return Err(NotAnEntry::Bad("the entry's checksum does not match"));
    }
    let bad = NotAnEntry::Bad("the entry checks but its records do not");
    let (Some(first), Some(next), Some(synced_before), Some(count)) = (
        u64_at(body, 0),
        u64_at(body, 8),
        u64_at(body, 16),
        u32_at(body, 24),
    ) else {
        return Err(bad);
    };
    let count = count as usize;
    let mut records = Vec::with_capacity(count.min(body_len / 4));
    let mut offset = BODY_HEADER_BYTES;
    for _ in 0..count {
        let Some(len) = u32_at(body, offset) else {
            return Err(bad);
        };
        offset += 4;
        let Some(envelope) = offset
            .checked_add(len as usize)
            .and_then(|end| body.get(offset..end))
        else {
            return Err(bad);
        };
        offset += len as usize;
        match Record::from_envelope(sled::IVec::from(envelope)) {
            Ok(record) => records.push(record),
            Err(_) => return Err(bad),
        }
    }
    let globals_agree = records
        .iter()
        .enumerate()
        .all(|(i, r)| r.global_position() == first + i as u64);
    if offset != body.len() || !globals_agree || next != first + count as u64 {
        return Err(bad);
    }
    let entry = Entry {
        first,
        next,
        synced_before,
        offset: at as u64,
        records,
    };
    Ok((entry, ENTRY_HEADER_BYTES + body_len))
}

/// The first offset after `from` where an entry that checks starts and
/// holds global positions at or past `expected`: where a reader picks up
/// again after bytes that are not an entry. Only damage or a torn tail
/// gets here; the cheap checks (length, first global position) come
/// before the checksum, so few offsets cost one.
fn resync(bytes: &[u8], from: usize, expected: u64) -> Option<(Entry, usize)> {
    let window = expected..expected.saturating_add(RESYNC_WINDOW_RECORDS);
    (from..bytes.len()).find_map(|at| {
        let body_len = u32_at(bytes, at)? as usize;
        let fits = (BODY_HEADER_BYTES..=MAX_ENTRY_BYTES).contains(&body_len)
            && at + ENTRY_HEADER_BYTES + body_len <= bytes.len();
        let first = u64_at(bytes, at + ENTRY_HEADER_BYTES)?;
        if !fits || !window.contains(&first) {
            return None;
        }
        entry_at(bytes, at).ok()
    })
}

/// Reads a journal file. `last`: it is the newest file, the only one a
/// crash can leave torn (every older one was synced whole before the next
/// was created).
///
/// The rule for bytes that do not check, at offset X: every entry
/// records the offset its file was known synced to when it was written.
/// If an entry that checks is found after X and says its file was synced
/// past X, the bad bytes were on stable storage: damage. Otherwise they
/// were written after the last sync and are the torn end of a crash (the
/// kernel writes pages back in any order, so a later unsynced entry may
/// have reached the disk while an earlier one did not): the file ends at
/// X, and nothing there was acknowledged.
pub fn scan_file(path: &Path, last: bool) -> io::Result<FileScan> {
    let bytes = fs::read(path)?;
    let mut scan = FileScan {
        path: path.to_path_buf(),
        base: None,
        entries: Vec::new(),
        torn_at: None,
        damage: Vec::new(),
    };
    let damage = |offset: usize, detail: String| JournalDamage {
        file: path.to_path_buf(),
        offset: offset as u64,
        detail,
        resumes_at: None,
    };
    let head_checks = bytes.get(..FILE_HEADER_BYTES).is_some_and(|head| {
        &head[..8] == MAGIC && u32_at(head, 20) == Some(crc32c::crc32c(&head[..20]))
    });
    let named = path
        .file_name()
        .and_then(|name| name.to_str())
        .and_then(parse_name);
    let (mut at, mut expected) = if head_checks {
        let base = u64_at(&bytes, 8).unwrap_or_default();
        scan.base = Some(base);
        if named != Some(base) {
            scan.damage.push(damage(
                8,
                format!("the header names base global position {base}, the file's name another"),
            ));
        }
        (FILE_HEADER_BYTES, base)
    } else {
        // The header is written and synced before any entry: a file whose
        // header does not check is the torn end of its creation, unless an
        // entry follows it.
        let Some((entry, _)) = resync(&bytes, 0, named.unwrap_or(0)) else {
            if last {
                scan.torn_at = Some(0);
            } else {
                scan.damage
                    .push(damage(0, "the file's header does not check".into()));
            }
            return Ok(scan);
        };
        scan.base = named;
        scan.damage.push(damage(
            0,
            "the file's header does not check, and entries follow it".into(),
        ));
        (entry.offset as usize, entry.first)
    };
    while at < bytes.len() {
        match entry_at(&bytes, at) {
            Ok((entry, len)) if entry.first == expected => {
                expected = entry.next;
                scan.entries.push(entry);
                at += len;
                continue;
            }
            Ok((entry, len)) => {
                scan.damage.push(damage(
                    at,
                    format!(
                        "an entry of global position {} where {expected} was due",
                        entry.first
                    ),
                ));
                expected = entry.next;
                scan.entries.push(entry);
                at += len;
            }
            Err(why) => {
                let detail = match why {
                    NotAnEntry::Short => "the file ends inside an entry",
                    NotAnEntry::Bad(detail) => detail,
                };
                let later = resync(&bytes, at + 1, expected);
                let synced_past = later
                    .as_ref()
                    .is_some_and(|(entry, _)| entry.synced_before > at as u64);
                if last && !synced_past {
                    scan.torn_at = Some(at as u64);
                    return Ok(scan);
                }
                let Some((later, _)) = later else {
                    scan.damage.push(damage(at, detail.to_owned()));
                    return Ok(scan);
                };
                scan.damage.push(damage(
                    at,
                    format!(
                        "{detail}, and the entry after it (at byte {}) was written after the file was synced past it",
                        later.offset
                    ),
                ));
                // The entries after the damage still count: sled may hold
                // what the damaged bytes held.
                at = later.offset as usize;
                expected = later.first;
            }
        }
    }
    Ok(scan)
}

/// Reads every journal file of `store`, oldest first, and names the
/// damage between them too (a file whose base is not where the one
/// before it ended).
pub fn scan(store: &Path) -> io::Result<Vec<FileScan>> {
    let files = files(store)?;
    let count = files.len();
    let mut scans: Vec<FileScan> = Vec::with_capacity(count);
    for (i, (_, path)) in files.iter().enumerate() {
        let mut file = scan_file(path, i + 1 == count)?;
        let previous_end = scans.last().and_then(|before| {
            let end = before.entries.last().map(|e| e.next).or(before.base)?;
            (before.damage.is_empty() && before.torn_at.is_none()).then_some(end)
        });
        if let (Some(end), Some(base)) = (previous_end, file.base)
            && end != base
        {
            file.damage.push(JournalDamage {
                file: path.clone(),
                offset: 0,
                detail: format!(
                    "the file begins at global position {base}, but the one before it ends at {end}"
                ),
                resumes_at: None,
            });
        }
        scans.push(file);
    }
    // Where reading resumed after each damage: the next entry of its file
    // past it, or else the start of the next file.
    for i in 0..scans.len() {
        let next_base = scans
            .get(i + 1)
            .and_then(|next| next.entries.first().map(|e| e.first).or(next.base));
        let scan = &mut scans[i];
        for damage in &mut scan.damage {
            damage.resumes_at = scan
                .entries
                .iter()
                .find(|e| e.offset >= damage.offset)
                .map(|e| e.first)
                .or(next_base);
        }
    }
    Ok(scans)
}

/// Every damage in a journal scan, oldest first.
pub fn damage_of(scans: &[FileScan]) -> Vec<JournalDamage> {
    scans
        .iter()
        .flat_map(|s| s.damage.iter().cloned())
        .collect()
}

/// What a replay did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replayed {
    /// The next global position after the replay.
    pub next_global: u64,
    /// Rounds applied to sled (those it did not hold yet).
    pub rounds: u64,
    pub records: u64,
    /// Damage whose records sled holds anyway: nothing was lost.
    pub covered_damage: Vec<JournalDamage>,
}

/// Applies to `log` every journal round at or past `next_global` (what
/// sled recovered), in order; entries sled already holds (by global
/// position) are skipped, so a replay interrupted and run again applies
/// each round once. sled and the journal each hold a prefix of the same
/// sequence of rounds (sled since the store began, the journal since the
/// last checkpoint), so the store afterwards holds the longer one.
/// Damage in the journal is harmless where sled holds the records anyway;
/// otherwise (a round that would leave a gap, or damage nothing checks
/// after) records are lost, and the damage is reported.
pub fn replay(store: &Path, log: &sled::Tree, next_global: u64) -> Result<Replayed> {
    let scans = scan(store)?;
    let damage = damage_of(&scans);
    let refuse = |expected: u64, found: u64| {
        LedgerError::Damaged(match damage.first() {
            Some(culprit) => culprit.clone().into_damage(),
            None => Damage::JournalGap { expected, found },
        })
    };
    let mut replayed = Replayed {
        next_global,
        ..Replayed::default()
    };
    for entry in scans.iter().flat_map(|s| s.entries.iter()) {
        if entry.next <= replayed.next_global {
            continue;
        }
        if entry.first != replayed.next_global {
            return Err(refuse(replayed.next_global, entry.first));
        }
        let mut batch = sled::Batch::default();
        for record in &entry.records {
            let stream = record::StreamKey::new(record.stream())?;
            batch.insert(
                record::record_key(&stream, record.position()),
                record.bytes().clone(),
            );
        }
        batch.insert(NEXT_GLOBAL_KEY, &entry.next.to_be_bytes());
        log.apply_batch(batch)?;
        replayed.next_global = entry.next;
        replayed.rounds += 1;
        replayed.records += entry.records.len() as u64;
    }
    for found in &damage {
        match found.resumes_at {
            Some(resumed) if resumed <= replayed.next_global => {}
            _ => return Err(LedgerError::Damaged(found.clone().into_damage())),
        }
    }
    replayed.covered_damage = damage;
    Ok(replayed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::record::{FORMAT_VERSION, Header, StreamKey, encode};

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
        let mut writer = JournalWriter::create(dir.path(), 5, None).unwrap();
        let (a, b) = (envelope(0, 5), envelope(1, 6));
        writer
            .append(5, 7, [a.as_slice(), b.as_slice()].into_iter())
            .unwrap();
        let boundary = writer.len() as usize;
        write(&mut writer, 2, 7);
        let path = files(dir.path()).unwrap().pop().unwrap().1;
        let whole = fs::read(&path).unwrap();
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
    fn a_bad_entry_that_was_synced_is_damage_and_an_unsynced_one_is_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = JournalWriter::create(dir.path(), 0, None).unwrap();
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
        let mut writer = JournalWriter::create(dir.path(), 0, None).unwrap();
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
        let mut writer = JournalWriter::create(dir.path(), 0, None).unwrap();
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
        delete_all(dir.path()).unwrap();
        let mut writer = JournalWriter::create(dir.path(), 10, None).unwrap();
        write(&mut writer, 0, 10);
        assert!(matches!(
            replay(dir.path(), &log, 4),
            Err(LedgerError::Damaged(Damage::JournalGap {
                expected: 4,
                found: 10
            }))
        ));
    }

    #[test]
    fn rotation_and_deletion_keep_the_uncovered_files() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = JournalWriter::create(dir.path(), 0, None).unwrap();
        writer.rotate(10).unwrap();
        writer.rotate(20).unwrap();
        assert_eq!(delete_before(dir.path(), 15).unwrap(), 1);
        let bases: Vec<u64> = files(dir.path())
            .unwrap()
            .into_iter()
            .map(|f| f.0)
            .collect();
        assert_eq!(bases, vec![10, 20]);
        delete_all(dir.path()).unwrap();
        assert!(files(dir.path()).unwrap().is_empty());
    }
}
