//! The journal: the durability point of the store. Every writer round is
//! written here, as one checksummed entry, before it is applied to sled;
//! a durable append is acknowledged once the journal file is synced
//! (`fdatasync`), one sync for the whole group waiting. sled is then the
//! index: it is flushed and synced only at a checkpoint, after which the
//! journal files it covers are deleted, and on open every journal entry
//! sled does not hold yet is applied to it again (replay).
//!
//! Owns: the `journal/` directory, its file and entry layout (see
//! `log-format/LOG-FORMAT.md`), writing and rotating journal files,
//! replaying them into sled, deleting the ones a checkpoint covers.
//! Must never: delete a journal file before sled holds its rounds on
//! stable storage, write an entry after a failed write (the writer is
//! poisoned), or replay an entry that does not check.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::ledger::damage::Damage;
use crate::ledger::error::{LedgerError, Result};
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
/// position (u64 each) and the record count (u32).
const BODY_HEADER_BYTES: usize = 20;

/// Largest entry body a reader accepts, in bytes: a round holds at most
/// `MAX_COMMANDS_PER_ROUND` appends of `MAX_RECORDS_PER_APPEND` records,
/// but its bytes are bounded by what the writer takes into one round
/// (`writer::MAX_ROUND_BYTES`) plus one append.
pub const MAX_ENTRY_BYTES: usize = 1 << 30;

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

fn sync_dir(dir: &Path) -> io::Result<()> {
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

/// The journal file being written: only the writer thread appends to it;
/// the flusher syncs it through [`JournalWriter::file`].
pub struct JournalWriter {
    store: PathBuf,
    file: Arc<File>,
    base: u64,
    len: u64,
    buf: Vec<u8>,
}

impl JournalWriter {
    /// Starts a new, empty journal file whose first entry will hold
    /// global position `base`; the file and its directory entry are on
    /// stable storage when this returns.
    pub fn create(store: &Path, base: u64) -> io::Result<Self> {
        let dir = store.join(JOURNAL_DIR);
        fs::create_dir_all(&dir)?;
        let path = dir.join(file_name(base));
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        file.write_all(&header(base))?;
        file.sync_all()?;
        sync_dir(&dir)?;
        Ok(Self {
            store: store.to_path_buf(),
            file: Arc::new(file),
            base,
            len: FILE_HEADER_BYTES as u64,
            buf: Vec::new(),
        })
    }

    /// The file the flusher syncs.
    pub fn file(&self) -> Arc<File> {
        Arc::clone(&self.file)
    }

    /// Bytes written to the current file.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the current file holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len == FILE_HEADER_BYTES as u64
    }

    /// The base global position of the current file.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Writes one round (the envelopes of global positions `first ..
    /// next`) as one entry, with one `write`; not synced.
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
        self.buf
            .extend_from_slice(&(envelopes.len() as u32).to_le_bytes());
        for envelope in envelopes {
            self.buf
                .extend_from_slice(&(envelope.len() as u32).to_le_bytes());
            self.buf.extend_from_slice(envelope);
        }
        let body_len = self.buf.len() - ENTRY_HEADER_BYTES;
        let crc = crc32c::crc32c(&self.buf[ENTRY_HEADER_BYTES..]);
        self.buf[..4].copy_from_slice(&(body_len as u32).to_le_bytes());
        self.buf[4..8].copy_from_slice(&crc.to_le_bytes());
        (&*self.file).write_all(&self.buf)?;
        self.len += self.buf.len() as u64;
        // A round far above the usual size should not pin its buffer.
        if self.buf.capacity() > 4 * 1024 * 1024 {
            self.buf = Vec::new();
        }
        Ok(())
    }

    /// Syncs the current file and starts the next one at `base`: every
    /// entry written so far is on stable storage when this returns.
    pub fn rotate(&mut self, base: u64) -> io::Result<()> {
        self.file.sync_data()?;
        let next = Self::create(&self.store, base)?;
        *self = next;
        Ok(())
    }
}

/// Deletes the journal files older than the one starting at `keep_from`:
/// the caller has made sled hold every record below `keep_from` on stable
/// storage.
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
    pub records: Vec<Record>,
}

/// Reads the entries of one journal file, in order, up to the first that
/// does not check (the torn end of a crash, or damage the watermark and
/// the next file's base reveal). `None` for a file whose header does not
/// check (a crash while it was created, before any entry).
pub fn read_file(path: &Path) -> io::Result<Option<(u64, Vec<Entry>)>> {
    let bytes = fs::read(path)?;
    let Some(head) = bytes.get(..FILE_HEADER_BYTES) else {
        return Ok(None);
    };
    let crc = u32::from_le_bytes([head[20], head[21], head[22], head[23]]);
    if &head[..8] != MAGIC || crc32c::crc32c(&head[..20]) != crc {
        return Ok(None);
    }
    let base = u64::from_le_bytes(head[8..16].try_into().unwrap_or_default());
    let mut entries = Vec::new();
    let mut at = FILE_HEADER_BYTES;
    while let Some(entry) = entry_at(&bytes, at) {
        let (entry, len) = entry;
        entries.push(entry);
        at += len;
    }
    Ok(Some((base, entries)))
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// The entry at `at` and its length in bytes, if it is whole and checks.
fn entry_at(bytes: &[u8], at: usize) -> Option<(Entry, usize)> {
    let body_len = u32_at(bytes, at)? as usize;
    let crc = u32_at(bytes, at + 4)?;
    if !(BODY_HEADER_BYTES..=MAX_ENTRY_BYTES).contains(&body_len) {
        return None;
    }
    let start = at + ENTRY_HEADER_BYTES;
    let body = bytes.get(start..start.checked_add(body_len)?)?;
    if crc32c::crc32c(body) != crc {
        return None;
    }
    let first = u64_at(body, 0)?;
    let next = u64_at(body, 8)?;
    let count = u32_at(body, 16)? as usize;
    let mut records = Vec::with_capacity(count.min(body_len / 4));
    let mut offset = BODY_HEADER_BYTES;
    for _ in 0..count {
        let len = u32_at(body, offset)? as usize;
        offset += 4;
        let envelope = body.get(offset..offset.checked_add(len)?)?;
        offset += len;
        records.push(Record::from_envelope(sled::IVec::from(envelope)).ok()?);
    }
    let globals_agree = records
        .iter()
        .enumerate()
        .all(|(i, r)| r.global_position() == first + i as u64);
    (offset == body.len() && globals_agree && next == first + count as u64)
        .then_some((Entry { first, next, records }, ENTRY_HEADER_BYTES + body_len))
}

/// What a replay did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Replayed {
    /// The next global position after the replay.
    pub next_global: u64,
    /// Rounds applied to sled (those it did not hold yet).
    pub rounds: u64,
    pub records: u64,
}

/// Applies to `log` every journal round at or past `next_global` (what
/// sled recovered), in order. sled and the journal each hold a prefix of
/// the same sequence of rounds, so the store afterwards holds the longer
/// one. A round that would leave a gap is damage: records sled lost that
/// no journal file holds.
pub fn replay(store: &Path, log: &sled::Tree, next_global: u64) -> Result<Replayed> {
    let mut replayed = Replayed {
        next_global,
        ..Replayed::default()
    };
    for (_, path) in files(store)? {
        let Some((_, entries)) = read_file(&path)? else {
            tracing::warn!(file = %path.display(), "a journal file without a readable header holds nothing; skipped");
            continue;
        };
        for entry in entries {
            if entry.next <= replayed.next_global {
                continue;
            }
            if entry.first != replayed.next_global {
                return Err(LedgerError::Damaged(Damage::LostRecords {
                    durable: entry.first,
                    found: replayed.next_global,
                }));
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
    }
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

    #[test]
    fn entries_read_back_up_to_a_torn_end() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = JournalWriter::create(dir.path(), 5).unwrap();
        let (a, b) = (envelope(0, 5), envelope(1, 6));
        writer
            .append(5, 7, [a.as_slice(), b.as_slice()].into_iter())
            .unwrap();
        let c = envelope(2, 7);
        writer.append(7, 8, [c.as_slice()].into_iter()).unwrap();
        let path = files(dir.path()).unwrap().pop().unwrap().1;
        let whole = fs::read(&path).unwrap();
        // Every cut short of the end loses the last entry, never more.
        for cut in (FILE_HEADER_BYTES..whole.len()).step_by(7) {
            fs::write(&path, &whole[..cut]).unwrap();
            let (base, entries) = read_file(&path).unwrap().unwrap();
            assert_eq!(base, 5);
            assert!(entries.len() <= 1 || cut == whole.len());
        }
        let mut flipped = whole.clone();
        let last = flipped.len() - 3;
        flipped[last] ^= 1;
        fs::write(&path, &flipped).unwrap();
        let (_, entries) = read_file(&path).unwrap().unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].records.len(), 2);
        fs::write(&path, &whole).unwrap();
        let (_, entries) = read_file(&path).unwrap().unwrap();
        assert_eq!(
            entries.iter().map(|e| (e.first, e.next)).collect::<Vec<_>>(),
            vec![(5, 7), (7, 8)]
        );
    }

    #[test]
    fn rotation_and_deletion_keep_the_uncovered_files() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = JournalWriter::create(dir.path(), 0).unwrap();
        writer.rotate(10).unwrap();
        writer.rotate(20).unwrap();
        assert_eq!(delete_before(dir.path(), 15).unwrap(), 1);
        let bases: Vec<u64> = files(dir.path()).unwrap().into_iter().map(|f| f.0).collect();
        assert_eq!(bases, vec![10, 20]);
        delete_all(dir.path()).unwrap();
        assert!(files(dir.path()).unwrap().is_empty());
    }
}
