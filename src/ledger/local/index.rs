//! The index: sled's files, derived from the journal. Opening them, and
//! when they are damaged (sled refuses to open, a counter or a pointer
//! does not read, the records do not check through them) setting them
//! aside and building the index again from the journal, the one truth.
//!
//! Owns: telling index damage from journal damage at open, setting
//! sled's files aside (`discarded/index-<unix ms>/`), the rebuild and its
//! one log line. Must never: delete the files it sets aside, or rebuild
//! from a journal that is damaged or does not start at global position 0
//! (a store written before format 4 keeps its older records in sled
//! alone: there the index is truth, and its damage is reported).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::damage::{self, DISCARDED_DIR, Damage};
use super::entry::{self, Pointer};
use super::error::{LocalError, Result, StoreProblem};
use super::keys::{RECORD_KEY_TAG, parse_record_key};
use super::open::{self as opening, OpenMode};
use super::{journal, powerloss, recovery};

/// Journal rounds a rebuild applies to sled in one batch: a batch costs
/// sled two writebacks of its buffer whatever it holds, so a rebuild
/// applying rounds one by one would spend most of its time there.
pub const REBUILD_ROUNDS_PER_BATCH: usize = 1024;

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
    /// Something else (the store is locked, the disk failed, the journal
    /// is damaged): opening fails with it.
    Failed(LocalError),
}

/// Opens the index of the store in `path` (creating the store if `mode`
/// allows), rebuilding it from the journal when it is damaged, or always
/// when `rebuild` gives a reason (`log repair`).
pub(super) fn open(
    path: &Path,
    mode: OpenMode,
    hooks: &powerloss::TestHooks,
    rebuild: Option<&str>,
) -> Result<Opened> {
    opening::prepare_directory(path, mode)?;
    let found = match rebuild {
        Some(reason) => reason.to_owned(),
        None => match use_as_found(path, hooks) {
            Ok(opened) => return Ok(opened),
            Err(Refused::Failed(error)) => return Err(error),
            Err(Refused::Damaged(found)) => found,
        },
    };
    match derivable(path, None)? {
        Ok(scans) => rebuild_from(path, hooks, found, &scans),
        Err(damage) => Err(LocalError::Damaged(damage.with_index_finding(&found))),
    }
}

/// The index as sled recovers it, brought up to the journal's end.
fn use_as_found(path: &Path, hooks: &powerloss::TestHooks) -> Result<Opened, Refused> {
    let damaged = |error: &dyn std::fmt::Display| Refused::Damaged(error.to_string());
    if let Some(file) = damage::damaged_snapshots(path)
        .map_err(|error| Refused::Failed(error.into()))?
        .pop()
    {
        return Err(Refused::Damaged(format!(
            "sled's snapshot file {} fails its checksum",
            file.display()
        )));
    }
    let db = match opening::open_sled_in(path) {
        Ok(db) => db,
        Err(
            error @ (LocalError::Damaged(_)
            | LocalError::Sled(_)
            | LocalError::Store {
                problem: StoreProblem::Sled(_),
                ..
            }),
        ) => return Err(damaged(&error)),
        Err(error) => return Err(Refused::Failed(error)),
    };
    let log = db.open_tree("log").map_err(|e| damaged(&e))?;
    let stored = recovery::stored_next_global(&log).map_err(|e| damaged(&e))?;
    match recovery::recover(path, &log, stored, hooks) {
        Ok((next_global, journal)) => {
            check(&log, next_global).map_err(Refused::Damaged)?;
            Ok(Opened {
                index: Index {
                    db,
                    log,
                    rebuilt: None,
                },
                next_global,
                journal,
            })
        }
        // sled failed, or holds what the journal does not follow on from:
        // a rebuild tells whose fault (it refuses a damaged journal).
        Err(error @ (LocalError::Sled(_) | LocalError::Damaged(_))) => Err(damaged(&error)),
        Err(error) => Err(Refused::Failed(error)),
    }
}

/// Reads the whole index, not the records it points at: every key and
/// entry reads back (sled meets no damage), every pointer checks, each
/// stream's entries follow on from each other, and they cover exactly
/// the `next_global` records of the store. Why not, if not.
fn check(log: &sled::Tree, next_global: u64) -> std::result::Result<(), String> {
    let mut covered: u64 = 0;
    let mut current: Option<(Vec<u8>, u64)> = None;
    for item in log.scan_prefix([RECORD_KEY_TAG]) {
        let (key, value) = item.map_err(|error| format!("sled cannot read it: {error}"))?;
        let Some((stream, position)) = parse_record_key(&key) else {
            return Err("a key that does not parse".into());
        };
        if let Some(Err(corruption)) = Pointer::decode(&value) {
            return Err(format!("stream {stream} position {position}: {corruption}"));
        }
        let span = entry::span(&value);
        let due = match &current {
            Some((name, next)) if name.as_slice() == stream.as_bytes() => *next,
            _ => 0,
        };
        if position != due {
            return Err(format!(
                "stream {stream}: an entry at position {position} where {due} was due"
            ));
        }
        current = Some((stream.as_bytes().to_vec(), position + span));
        covered += span;
    }
    if covered != next_global {
        return Err(format!(
            "it holds {covered} records where the journal holds {next_global}"
        ));
    }
    Ok(())
}

/// The whole journal read, if the index can be derived from it: it starts
/// at global position 0, holds no damage, and reaches every record
/// acknowledged (the watermark) and every record the index as found
/// reached (`index_end`, when it could tell): a newest file ending in
/// bytes that do not make an entry looks torn, and is damage if records
/// past it were acknowledged. Otherwise the damage that stops a rebuild.
pub(super) fn derivable(
    path: &Path,
    index_end: Option<u64>,
) -> Result<std::result::Result<Vec<journal::FileScan>, Damage>> {
    let scans = journal::scan_from(path, 0, None)?;
    let starts_at = scans.first().map(|scan| scan.base);
    if starts_at != Some(Some(0)) {
        return Ok(Err(Damage::Underived {
            journal_starts_at: starts_at.flatten(),
        }));
    }
    if let Some(found) = journal::damage_of(&scans).into_iter().next() {
        return Ok(Err(journal::journal_damage(found, path)));
    }
    let watermark = super::watermark::read(path);
    let reached = watermark.max(index_end).unwrap_or(0);
    if let Some(newest) = scans.last()
        && let Some(torn_at) = newest.torn_at
    {
        let end = newest
            .entries
            .last()
            .map(|entry| entry.next)
            .or(newest.start_global)
            .unwrap_or(0);
        if reached > end {
            return Ok(Err(Damage::Journal {
                file: newest.path.clone(),
                offset: torn_at,
                detail:
                    "the bytes there do not make an entry, and records past them were acknowledged"
                        .into(),
                from_global: Some(end),
                resumes_at: None,
                watermark,
            }));
        }
    }
    Ok(Ok(scans))
}

/// Sets the index aside and builds it again from the journal `scans`.
pub(super) fn rebuild_from(
    path: &Path,
    hooks: &powerloss::TestHooks,
    found: String,
    scans: &[journal::FileScan],
) -> Result<Opened> {
    let started = Instant::now();
    let set_aside = set_aside(path)?;
    let db = opening::open_sled_in(path)?;
    let log = db.open_tree("log")?;
    let replayed = journal::replay_scans(path, scans, &log, 0, REBUILD_ROUNDS_PER_BATCH)?;
    let (rounds, records) = (replayed.rounds, replayed.records);
    let (next_global, journal) = recovery::finish_recovery(path, hooks, replayed)?;
    let rebuilt = Rebuilt {
        found,
        set_aside,
        rounds,
        records,
        journal_bytes: scans
            .iter()
            .filter_map(|scan| scan.entries.last().map(|entry| entry.end))
            .sum(),
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

/// Moves sled's files (and its snapshot files) into
/// `discarded/index-<unix ms>/`; where they went, if there were any.
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
