//! Reading the journal back: each file's entries checked one by one, a torn
//! tail told from damage, and the rounds sled lacks replayed into it.
//!
//! Owns: scanning files, `replay`. Must never: replay an entry that does not
//! check, or take damage to a synced entry for the torn end of a crash.

use super::*;
use crate::local::entry::{Extent, Run, cut};

/// One entry read back: a round of records.
pub struct Entry {
    pub first: u64,
    pub next: u64,
    /// Bytes of its file known synced when it was written.
    pub synced_before: u64,
    /// Where it starts in its file, and where the bytes after it start.
    pub offset: u64,
    pub end: u64,
    pub records: Vec<Record>,
}

/// Damage in a journal file: synced bytes (or a file) that no longer check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalDamage {
    pub file: PathBuf,
    pub offset: u64,
    pub detail: String,
    /// The global position due where the damaged bytes begin, if known.
    pub from_global: Option<u64>,
    /// Where reading picked up again after it, if anything follows.
    pub resumes_at: Option<u64>,
}

impl JournalDamage {
    pub fn new(file: &Path, offset: u64, from_global: Option<u64>, detail: String) -> Self {
        let (file, resumes_at) = (file.to_path_buf(), None);
        Self {
            file,
            offset,
            detail,
            from_global,
            resumes_at,
        }
    }
}

/// `damage` as the store's, with the journal's watermark in `store`.
pub fn journal_damage(damage: JournalDamage, store: &Path) -> Damage {
    let watermark = crate::local::watermark::read(store);
    Damage::Journal { damage, watermark }
}

/// What reading one journal file found.
#[derive(Default)]
pub struct FileScan {
    pub path: PathBuf,
    /// The base its header names (`None`: stopped while being created).
    pub base: Option<u64>,
    /// Its header says it was written ahead (`WRITTEN_AHEAD`).
    pub written_ahead: bool,
    /// Where reading began (the header's or the index's end), and its position.
    pub start: u64,
    pub start_global: Option<u64>,
    /// The entries that check, in order.
    pub entries: Vec<Entry>,
    /// Where a crash's torn end begins (unsynced bytes: none acknowledged).
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
    /// No whole header and plausible length: the end written, or damage.
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
        match Record::from_envelope(bytes::Bytes::copy_from_slice(envelope)) {
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
        end: (start + body_len) as u64,
        records,
    };
    Ok((entry, ENTRY_HEADER_BYTES + body_len))
}

/// The first entry after `from` that checks, at `expected` or past it.
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

/// Reads a journal file, from the header or from `from` (an entry's offset and
/// global position); `last`: it is the newest, the only one a crash can leave
/// torn (each older one was synced whole before the next was created).
///
/// Bytes that do not check at offset X are damage if a later entry that checks
/// says its file was synced past X; otherwise they are a crash's torn end
/// (pages reach the disk in any order), where nothing was acknowledged. Zeros
/// to the end are preallocated space: a clean end.
pub fn scan_file_from(path: &Path, last: bool, from: Option<(u64, u64)>) -> io::Result<FileScan> {
    let (bytes, used) =
        storage::read_file(path, FILE_HEADER_BYTES, from.map(|(offset, _)| offset))?;
    let from = from.filter(|_| used);
    let mut scan = FileScan {
        path: path.to_path_buf(),
        start: FILE_HEADER_BYTES as u64,
        ..FileScan::default()
    };
    let damage = |offset: usize, from_global: Option<u64>, detail: String| {
        JournalDamage::new(path, offset as u64, from_global, detail)
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
        scan.written_ahead = u32_at(&bytes, 16).is_some_and(|flags| flags & WRITTEN_AHEAD != 0);
        if named != Some(base) {
            scan.damage.push(damage(
                8,
                Some(base),
                format!("the header names base global position {base}, the file's name another"),
            ));
        }
        match from {
            Some((offset, global)) => (offset as usize, global),
            None => (FILE_HEADER_BYTES, base),
        }
    } else {
        // A bad header is a torn creation, unless entries follow it.
        let Some((entry, _)) = resync(&bytes, 0, named.unwrap_or(0)) else {
            if last {
                scan.torn_at = Some(0);
            } else {
                scan.damage
                    .push(damage(0, named, "the file's header does not check".into()));
            }
            return Ok(scan);
        };
        scan.base = named;
        scan.damage.push(damage(
            0,
            named,
            "the file's header does not check, and entries follow it".into(),
        ));
        (entry.offset as usize, entry.first)
    };
    scan.start = at as u64;
    scan.start_global = Some(expected);
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
                    Some(expected),
                    format!(
                        "an entry of global position {} where {expected} was due",
                        entry.first
                    ),
                ));
                expected = entry.next;
                scan.entries.push(entry);
                at += len;
            }
            Err(_) if bytes[at..].iter().all(|&byte| byte == 0) => return Ok(scan),
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
                    scan.damage
                        .push(damage(at, Some(expected), detail.to_owned()));
                    return Ok(scan);
                };
                scan.damage.push(damage(
                    at,
                    Some(expected),
                    format!(
                        "{detail}, and the entry after it (at byte {}) was written after the file was synced past it",
                        later.offset
                    ),
                ));
                // The entries after still count: sled may hold what it held.
                at = later.offset as usize;
                expected = later.first;
            }
        }
    }
    Ok(scan)
}

/// Reads every journal file of `store`, oldest first, with damage between.
pub fn scan(store: &Path) -> io::Result<Vec<FileScan>> {
    scan_from(store, 0, None)
}

/// Where the index's rounds end in the journal (file, offset, global position),
/// stored with each indexer batch: an open reads the journal on from there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JournalEnd {
    pub file: u64,
    pub offset: u64,
    pub next_global: u64,
}

impl JournalEnd {
    /// The stored value: the three numbers, u64 big-endian each.
    pub fn encode(&self) -> [u8; 24] {
        let mut bytes = [0u8; 24];
        bytes[..8].copy_from_slice(&self.file.to_be_bytes());
        bytes[8..16].copy_from_slice(&self.offset.to_be_bytes());
        bytes[16..].copy_from_slice(&self.next_global.to_be_bytes());
        bytes
    }

    /// A stored value; `None` if not one (a hint: the file is read whole).
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let word = |at: usize| Some(u64::from_be_bytes(bytes.get(at..at + 8)?.try_into().ok()?));
        (bytes.len() == 24).then_some(())?;
        Some(Self {
            file: word(0)?,
            offset: word(8)?,
            next_global: word(16)?,
        })
    }

    /// The value `log` holds, if any.
    pub fn stored(log: &sled::Tree) -> Option<Self> {
        log.get(keys::JOURNAL_END_KEY)
            .ok()
            .flatten()
            .and_then(|value| Self::decode(&value))
    }
}

/// [`scan`] of the files that can hold global position `from` or later; with
/// `known`, its file from where the index's rounds end.
pub fn scan_from(store: &Path, from: u64, known: Option<JournalEnd>) -> io::Result<Vec<FileScan>> {
    let mut files = files(store)?;
    let known = known
        .filter(|end| end.next_global <= from && files.iter().any(|(base, _)| *base == end.file));
    let first = match known {
        Some(end) => files.iter().position(|(base, _)| *base == end.file),
        None => files.iter().rposition(|(base, _)| *base <= from),
    }
    .unwrap_or(0);
    files.drain(..first);
    let count = files.len();
    let mut scans: Vec<FileScan> = Vec::with_capacity(count);
    for (i, (base, path)) in files.iter().enumerate() {
        let start = known
            .filter(|end| end.file == *base)
            .map(|end| (end.offset, end.next_global));
        let mut file = scan_file_from(path, i + 1 == count, start)?;
        let previous_end = scans.last().and_then(|before| {
            let end = before
                .entries
                .last()
                .map(|e| e.next)
                .or(before.start_global)?;
            (before.damage.is_empty() && before.torn_at.is_none()).then_some(end)
        });
        if let (Some(end), Some(base)) = (previous_end, file.base)
            && end != base
        {
            let detail = format!(
                "the file begins at global position {base}, but the one before it ends at {end}"
            );
            file.damage
                .push(JournalDamage::new(path, 0, Some(end), detail));
        }
        scans.push(file);
    }
    // Where reading resumed after each damage: the next entry, or file.
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

/// What a replay did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replayed {
    /// The next global position after the replay.
    pub next_global: u64,
    /// Rounds applied to sled (those it did not hold yet).
    pub rounds: u64,
    pub records: u64,
    /// Damage whose records sled held (the integrity scan names their streams).
    pub covered_damage: Vec<JournalDamage>,
    /// The newest journal file, if the writer may go on in it.
    pub tail: Option<Tail>,
}

/// The newest journal file after a replay: entries synced, then zeros.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tail {
    pub path: PathBuf,
    pub base: u64,
    /// Where its last entry ends, in bytes.
    pub end: u64,
    /// The global position after its last entry.
    pub next: u64,
    /// Its header says it was written ahead (`WRITTEN_AHEAD`).
    pub written_ahead: bool,
}

/// An entry's records in runs of one stream, as the writer grouped them (a
/// replay removes the other keys its entries cover, so it need not).
fn runs_of(file: u64, entry: &Entry) -> Result<Vec<Run>> {
    let mut written: Vec<(record::StreamKey, Vec<Record>)> = Vec::new();
    for record in &entry.records {
        match written.last_mut() {
            Some((stream, run)) if stream.as_str() == record.stream() => run.push(record.clone()),
            _ => written.push((
                record::StreamKey::new(record.stream())?,
                vec![record.clone()],
            )),
        }
    }
    let extents = Extent::of_runs(file, entry.offset, &written);
    Ok(written
        .into_iter()
        .zip(extents)
        .map(|((stream, records), extent)| Run {
            stream,
            records,
            extents: vec![extent],
        })
        .collect())
}

/// Makes the newest file end, synced, at its last entry that checks before
/// sled points into it: a torn tail is cut off, what a killed process left
/// unsynced is synced, a file whose header never made it is removed. Bad bytes
/// holding rounds sled has are damage, not a tear (the indexer applies only
/// synced rounds): left for the integrity scan; the writer starts a new file.
fn settle_tail(newest: &FileScan, sled_next_global: u64) -> io::Result<Option<Tail>> {
    let Some(base) = newest.base else {
        fs::remove_file(&newest.path)?;
        if let Some(dir) = newest.path.parent() {
            sync_dir(dir)?;
        }
        return Ok(None);
    };
    let end = newest.entries.last().map_or(newest.start, |e| e.end);
    let next = newest
        .entries
        .last()
        .map_or(newest.start_global.unwrap_or(base), |e| e.next);
    if newest.torn_at.is_some() && sled_next_global > next {
        return Ok(None);
    }
    let file = OpenOptions::new().write(true).open(&newest.path)?;
    if newest.torn_at.is_some() {
        let allocated = file.metadata()?.len();
        file.set_len(end)?;
        preallocate(&file, allocated.max(end))?;
        file.sync_all()?;
    }
    storage::sync(&file, &newest.path, end)?;
    Ok(Some(Tail {
        path: newest.path.clone(),
        base,
        end,
        next,
        written_ahead: newest.written_ahead,
    }))
}

/// Applies to `log`, in order, every journal round at or past `next_global`
/// (where sled stands; a replay run again applies each once), after settling
/// the newest file. Damage sled already points past is left to the integrity
/// scan; otherwise (a gap, or nothing checks after it) it is reported.
pub fn replay(store: &Path, log: &sled::Tree, next_global: u64) -> Result<Replayed> {
    let scans = scan_from(store, next_global, JournalEnd::stored(log))?;
    replay_scans(store, &scans, log, next_global, true)
}

/// Journal rounds a replay applies in one sled batch (a batch costs two buffer
/// writebacks whatever it holds); each stores where its rounds end.
pub const REPLAY_ROUNDS_PER_BATCH: usize = 1024;

/// [`replay`] of files already read (a rebuild's, one at a time); the newest
/// is settled only if `scans` end with it.
pub fn replay_scans(
    store: &Path,
    scans: &[FileScan],
    log: &sled::Tree,
    next_global: u64,
    holds_the_newest: bool,
) -> Result<Replayed> {
    let damage: Vec<_> = scans.iter().flat_map(|s| s.damage.clone()).collect();
    let refuse = |expected: u64, found: u64| {
        LocalError::Damaged(match damage.first() {
            Some(culprit) => journal_damage(culprit.clone(), store),
            None => Damage::JournalGap { expected, found },
        })
    };
    let tail = match scans.last() {
        Some(newest) if holds_the_newest && newest.damage.is_empty() => {
            settle_tail(newest, next_global)?
        }
        _ => None,
    };
    let mut replayed = Replayed {
        next_global,
        tail,
        ..Replayed::default()
    };
    let mut batch = sled::Batch::default();
    let mut batched = 0;
    for scan in scans {
        let Some(file) = scan
            .path
            .file_name()
            .and_then(|name| name.to_str())
            .and_then(parse_name)
        else {
            continue;
        };
        for entry in &scan.entries {
            if entry.next <= replayed.next_global {
                continue;
            }
            if entry.first != replayed.next_global {
                return Err(refuse(replayed.next_global, entry.first));
            }
            let runs = runs_of(file, entry)?;
            for stored in cut(&runs) {
                // The entry replaces any cut otherwise before (format 2).
                for covered in stored.covered_keys() {
                    batch.remove(covered);
                }
                batch.insert(stored.key, stored.value);
            }
            batch.insert(NEXT_GLOBAL_KEY, &entry.next.to_be_bytes());
            let end = JournalEnd {
                file,
                offset: entry.end,
                next_global: entry.next,
            };
            batch.insert(keys::JOURNAL_END_KEY, &end.encode());
            batched += 1;
            if batched >= REPLAY_ROUNDS_PER_BATCH {
                log.apply_batch(std::mem::take(&mut batch))?;
                batched = 0;
            }
            replayed.next_global = entry.next;
            replayed.rounds += 1;
            replayed.records += entry.records.len() as u64;
        }
    }
    if batched > 0 {
        log.apply_batch(batch)?;
    }
    for found in &damage {
        match found.resumes_at {
            Some(resumed) if resumed <= replayed.next_global => {}
            _ => return Err(LocalError::Damaged(journal_damage(found.clone(), store))),
        }
    }
    replayed.covered_damage = damage;
    Ok(replayed)
}
