//! The index: sled's files, derived from the journal. Opening them, bringing
//! them up to the journal, and when they cannot be used setting them aside and
//! rebuilding them from the journal, the one truth.
//!
//! Owns: the replay at open, the stored next global position, telling index
//! damage from journal damage, `discarded/index-<unix ms>/`, the rebuild and
//! its log lines. Must never: delete what it sets aside, or rebuild from a
//! journal that is damaged or does not start at global position 0 (before
//! format 4, older records live in sled alone: there the index is truth).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::error::{DISCARDED_DIR, Damage};
use super::error::{LocalError, Result, StoreProblem};
use super::keys::NEXT_GLOBAL_KEY;
use super::open::{self as opening, OpenMode};
use super::{journal, storage};

/// Written when a read finds the index damaged: the next open rebuilds it.
pub const INDEX_DAMAGED_FILE: &str = "INDEX-DAMAGED";

/// Notes, for the next open, that a read found the index damaged.
pub(super) fn mark_damaged(path: &Path, found: &str) {
    let marker = path.join(INDEX_DAMAGED_FILE);
    if marker.exists() {
        return;
    }
    match std::fs::write(&marker, found) {
        Ok(()) => tracing::error!(
            %found,
            "the index (sled's files) is damaged: the stream is refused until the next open rebuilds the index from the journal (restart, or `ledgerwire log repair`)"
        ),
        Err(error) => {
            tracing::error!(%found, %error, "the index is damaged, and the note for the next open could not be written: run `ledgerwire log repair`")
        }
    }
}

/// Whether a record failing its checks blames the index, not the journal.
pub(super) fn blames_the_index(corruption: &crate::error::Corruption) -> bool {
    use crate::error::Corruption::*;
    matches!(
        corruption,
        Pointer { .. } | Storage { .. } | BadKey | Gap { .. } | Misplaced { .. }
    )
}

/// sled's files in the store directory: the index.
const INDEX_FILES: [&str; 3] = ["conf", "db", "blobs"];

/// What a rebuild of the index found and did.
#[derive(Clone, Debug)]
pub struct Rebuilt {
    /// Why the index was set aside.
    pub found: String,
    /// Where its files went (none when there were none).
    pub set_aside: Option<PathBuf>,
    pub rounds: u64,
    pub records: u64,
    /// Bytes of journal entries read.
    pub journal_bytes: u64,
    pub elapsed: Duration,
}

/// sled open as the index.
pub(super) struct Index {
    pub db: sled::Db,
    pub log: sled::Tree,
    /// What the open found wrong with it, if it rebuilt it.
    pub rebuilt: Option<Rebuilt>,
}

/// The index open and up to date with the journal.
pub(super) struct Opened {
    pub index: Index,
    pub next_global: u64,
    pub journal: journal::JournalWriter,
}

/// Why the index as found cannot be used.
enum Refused {
    /// It is damaged: rebuild it.
    Damaged(String),
    /// Anything else (locked, a disk failure): the open fails with it.
    Failed(LocalError),
}

/// Opens the index of the store in `path` (created if `mode` allows), rebuilt
/// when it cannot be used or `rebuild` gives a reason (`log repair`).
pub(super) fn open(path: &Path, mode: OpenMode, rebuild: Option<&str>) -> Result<Opened> {
    opening::prepare_directory(path, mode)?;
    let marked = std::fs::read_to_string(path.join(INDEX_DAMAGED_FILE)).ok();
    let found = match (rebuild, marked) {
        (Some(reason), _) => reason.to_owned(),
        (None, Some(found)) => format!("a read found it damaged: {found}"),
        (None, None) => match use_as_found(path) {
            Ok(opened) => return Ok(opened),
            Err(Refused::Failed(error)) => return Err(error),
            Err(Refused::Damaged(found)) => found,
        },
    };
    announce_rebuild(&found);
    match derivable(path, None)? {
        Ok(files) => {
            let opened = rebuild_from(path, found, &files)?;
            match std::fs::remove_file(path.join(INDEX_DAMAGED_FILE)) {
                Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error.into()),
                _ => Ok(opened),
            }
        }
        Err(damage) => {
            let cause = Box::new(damage);
            Err(LocalError::Damaged(Damage::Index { found, cause }))
        }
    }
}

/// The index as sled recovers it, brought up to the journal's end.
fn use_as_found(path: &Path) -> Result<Opened, Refused> {
    let damaged = |error: &dyn std::fmt::Display| Refused::Damaged(error.to_string());
    let journaled = journal::files(path).map_err(|e| Refused::Failed(e.into()))?;
    if !path.join("db").exists() && !journaled.is_empty() {
        return Err(damaged(&"sled's data file is missing"));
    }
    let db = opening::open_sled_in(path).map_err(refused)?;
    let log = db.open_tree("log").map_err(|e| damaged(&e))?;
    let stored = stored_next_global(&log).map_err(|e| damaged(&e))?;
    match recover(path, &log, stored) {
        // Not read whole: damage a read meets has the next open rebuild.
        Ok((next_global, journal)) => Ok(Opened {
            index: Index {
                db,
                log,
                rebuilt: None,
            },
            next_global,
            journal,
        }),
        // sled failed or does not follow the journal: a rebuild tells who.
        Err(error) => Err(refused(error)),
    }
}

/// Damage or a sled failure asks for a rebuild; the rest fails the open.
fn refused(error: LocalError) -> Refused {
    match error {
        LocalError::Damaged(damage) => Refused::Damaged(damage.to_string()),
        LocalError::Sled(_)
        | LocalError::Store {
            problem: StoreProblem::Sled(_),
            ..
        } => Refused::Damaged(error.to_string()),
        error => Refused::Failed(error),
    }
}

/// The journal's files if the index can be derived from them: from global
/// position 0, each where the one before ended, no damage, reaching the
/// watermark and `index_end` (a torn end is damage if records past it were
/// acknowledged). Otherwise the damage that stops a rebuild.
pub(super) fn derivable(
    path: &Path,
    index_end: Option<u64>,
) -> Result<std::result::Result<Vec<PathBuf>, Damage>> {
    let files = journal::files(path)?;
    if files.first().map(|(base, _)| *base) != Some(0) {
        return Ok(Err(Damage::Underived {
            journal_starts_at: files.first().map(|(base, _)| *base),
        }));
    }
    let watermark = super::watermark::read(path);
    let mut end = 0;
    for (i, (_, file)) in files.iter().enumerate() {
        let newest = i + 1 == files.len();
        let scan = journal::scan_file_from(file, newest, None)?;
        let mut damage = scan.damage.first().cloned();
        if damage.is_none() && scan.base != Some(end) {
            let detail = format!(
                "the file begins at global position {:?}, but the one before it ends at {end}",
                scan.base
            );
            damage = Some(journal::JournalDamage::new(file, 0, Some(end), detail));
        }
        if let Some(found) = damage {
            return Ok(Err(journal::journal_damage(found, path)));
        }
        end = scan
            .entries
            .last()
            .map(|entry| entry.next)
            .or(scan.start_global)
            .unwrap_or(end);
        let reached = watermark.max(index_end).unwrap_or(0);
        if let Some(torn_at) = scan.torn_at.filter(|_| newest && reached > end) {
            let detail =
                "the bytes there do not make an entry, and records past them were acknowledged";
            let damage = journal::JournalDamage::new(file, torn_at, Some(end), detail.into());
            return Ok(Err(Damage::Journal { damage, watermark }));
        }
    }
    Ok(Ok(files.into_iter().map(|(_, file)| file).collect()))
}

/// Says, before the journal is read for it, that the index is rebuilt.
pub(super) fn announce_rebuild(found: &str) {
    tracing::warn!(
        %found,
        "the index (sled's files) cannot be used: rebuilding it from the journal; the store serves once it is done"
    );
}

/// Sets the index aside and rebuilds it from `files` ([`derivable`]).
pub(super) fn rebuild_from(path: &Path, found: String, files: &[PathBuf]) -> Result<Opened> {
    let started = Instant::now();
    let set_aside = set_aside(path)?;
    let db = opening::open_sled_in(path)?;
    let log = db.open_tree("log")?;
    let mut replayed = journal::Replayed::default();
    let (mut rounds, mut records, mut journal_bytes) = (0, 0, 0);
    for (i, file) in files.iter().enumerate() {
        let newest = i + 1 == files.len();
        let scan = journal::scan_file_from(file, newest, None)?;
        journal_bytes += scan.entries.last().map_or(0, |entry| entry.end);
        replayed = journal::replay_scans(path, &[scan], &log, replayed.next_global, newest)?;
        rounds += replayed.rounds;
        records += replayed.records;
    }
    let (next_global, journal) = finish_recovery(path, replayed)?;
    let rebuilt = Rebuilt {
        found,
        set_aside,
        rounds,
        records,
        journal_bytes,
        elapsed: started.elapsed(),
    };
    tracing::warn!(
        found = %rebuilt.found,
        set_aside = %rebuilt.set_aside.as_deref().map(Path::display).map(|p| p.to_string()).unwrap_or_default(),
        records,
        rounds,
        journal_bytes = rebuilt.journal_bytes,
        elapsed_ms = rebuilt.elapsed.as_millis() as u64,
        "the index (sled's files) was set aside and rebuilt from the journal: no record is lost"
    );
    Ok(Opened {
        index: Index {
            db,
            log,
            rebuilt: Some(rebuilt),
        },
        next_global,
        journal,
    })
}

/// Brings sled up to the journal and opens the journal for the writer.
fn recover(
    path: &Path,
    log: &sled::Tree,
    next_global: u64,
) -> Result<(u64, journal::JournalWriter)> {
    let replayed = journal::replay(path, log, next_global)?;
    if replayed.rounds > 0 {
        tracing::info!(
            rounds = replayed.rounds,
            records = replayed.records,
            "journal rounds sled had not kept applied again"
        );
    }
    finish_recovery(path, replayed)
}

fn finish_recovery(
    path: &Path,
    replayed: journal::Replayed,
) -> Result<(u64, journal::JournalWriter)> {
    for damage in &replayed.covered_damage {
        tracing::warn!(
            file = %damage.file.display(),
            offset = damage.offset,
            detail = %damage.detail,
            "a damaged journal entry sled already points past: the integrity scan names the records lost there"
        );
    }
    let file_bytes = storage::journal_file_bytes(path, journal::JOURNAL_FILE_BYTES);
    let journal = match &replayed.tail {
        Some(tail) if tail.next == replayed.next_global => {
            journal::JournalWriter::resume(path, tail, file_bytes)?
        }
        _ => journal::JournalWriter::create(path, replayed.next_global, file_bytes)?,
    };
    Ok((replayed.next_global, journal))
}

/// Reads the next global position stored beside the records.
pub(crate) fn stored_next_global(log: &sled::Tree) -> Result<u64> {
    Ok(match log.get(NEXT_GLOBAL_KEY)? {
        Some(bytes) if bytes.len() == 8 => {
            let mut word = [0u8; 8];
            word.copy_from_slice(&bytes);
            u64::from_be_bytes(word)
        }
        _ => 0,
    })
}

/// Moves sled's files into `discarded/index-<unix ms>/`; where, if any.
fn set_aside(path: &Path) -> Result<Option<PathBuf>> {
    let mut names: Vec<std::ffi::OsString> = Vec::new();
    for entry in std::fs::read_dir(path)? {
        let name = entry?.file_name();
        let text = name.to_string_lossy();
        if INDEX_FILES.contains(&text.as_ref()) || text.starts_with("snap.") {
            names.push(name);
        }
    }
    if names.is_empty() {
        return Ok(None);
    }
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let to = path.join(DISCARDED_DIR).join(format!("index-{millis}"));
    std::fs::create_dir_all(&to)?;
    for name in names {
        std::fs::rename(path.join(&name), to.join(&name))?;
    }
    Ok(Some(to))
}

#[cfg(test)]
mod tests {
    use crate::local::{LocalStore, OpenMode, keys};
    use crate::{Durability, ExpectedPosition, NewRecord, StreamKey};

    /// A pointer that fails its check on a read while the store runs: the
    /// stream is refused then, the next open rebuilds the index and
    /// serves every record.
    #[test]
    fn a_pointer_failing_on_a_read_has_the_next_open_rebuild_the_index() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let stream = StreamKey::new("p/damaged").expect("a key");
        let records = (0..4u8).map(|n| NewRecord {
            kind: 1,
            payload: vec![n],
        });
        {
            let (store, _) = LocalStore::open(dir.path(), OpenMode::CreateIfMissing).unwrap();
            store
                .append_blocking(
                    &stream,
                    ExpectedPosition::Exactly(0),
                    records.collect(),
                    Durability::Durable,
                )
                .unwrap();
            store.wait_until_indexed();
            store.shared.recent.forget(stream.as_str());
            let key = keys::record_key(&stream, 0);
            let mut value = store.shared.log.get(&key).unwrap().unwrap().to_vec();
            let last = value.len() - 1;
            value[last] ^= 1;
            store.shared.log.insert(key, value).unwrap();
            let read: Result<Vec<_>, _> = store.read_blocking(&stream, 0).unwrap().collect();
            assert!(read.is_err(), "the damaged pointer is not read through");
            assert!(dir.path().join(super::INDEX_DAMAGED_FILE).exists());
        }
        let (store, report) = LocalStore::open(dir.path(), OpenMode::MustExist).unwrap();
        assert!(report.is_clean(), "{:?}", report.problems);
        let rebuilt = store.index_rebuilt().expect("rebuilt");
        assert!(rebuilt.found.contains("p/damaged"), "{}", rebuilt.found);
        assert_eq!(store.read_blocking(&stream, 0).unwrap().count(), 4);
        assert!(!dir.path().join(super::INDEX_DAMAGED_FILE).exists());
    }
}
