//! Power-loss simulation (what LazyFS does, without a FUSE file system):
//! the real binary appends durably from several concurrent writers with
//! the TEST-ONLY trace on (`ledger::local::testing`: each journal sync's
//! length, written before any append it covers is acknowledged), and
//! with journal files small enough to
//! rotate every few hundred records. It is SIGKILLed at a random moment;
//! the store is then rolled back to what a power loss at that moment could
//! leave (journal files cut to their synced length, sled's files, never
//! synced, gone: every write not `fdatasync`ed dropped), opened (which
//! rebuilds the index from the journal), and must hold every
//! acknowledged append at its position and global position, with exactly
//! the bytes written, and verify clean.
//!
//! The test fails if an append were acknowledged before the sync covering
//! it: its bytes would lie past the synced length and be cut away (the
//! last test below shows a roll-back dropping appends acknowledged
//! without a sync).

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use ledgerwire::ledger::kinds::Payload;
use ledgerwire::ledger::local::testing::{
    self, Faults, JOURNAL_FILE_BYTES_ENV, SYNCED_FILE, TRACE_ENV,
};
use ledgerwire::ledger::probe::Probe;
use rand::{Rng, SeedableRng, rngs::StdRng};

use crate::support::{binary, ledgerwire_ok, open_local, scratch, stream};

/// Kills (each followed by a roll-back) across the test.
const POWER_LOSSES: usize = 12;
const WRITERS: u32 = 8;
const FILLER_BYTES: usize = 300;
/// Journal rotation size for the test, in bytes: a new file every
/// couple of hundred records.
const TEST_JOURNAL_FILE_BYTES: u64 = 64 * 1024;
/// Most acknowledgements awaited before a kill.
const MAX_ACKS_BEFORE_KILL: u64 = 1_500;

/// Parses `ack <writer> <position> <global position>`.
fn parse_ack(line: &str) -> Option<(u32, u64, u64)> {
    let mut words = line.split_whitespace();
    (words.next()? == "ack").then_some(())?;
    Some((
        words.next()?.parse().ok()?,
        words.next()?.parse().ok()?,
        words.next()?.parse().ok()?,
    ))
}

#[test]
fn every_acknowledged_append_survives_a_simulated_power_loss() {
    let seed: u64 = rand::rng().random();
    println!("power-loss test seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = scratch();
    let trace = scratch();
    // (writer, position) → global position, for every acknowledged append.
    let mut acknowledged: HashMap<(u32, u64), u64> = HashMap::new();
    let mut dropped_bytes = 0;
    for round in 0..POWER_LOSSES {
        let mut child = binary()
            .args(["log", "probe", "--writers", &WRITERS.to_string()])
            .args(["--count", "1000000", "--filler-bytes"])
            .arg(FILLER_BYTES.to_string())
            .arg("--data")
            .arg(dir.path())
            .env(TRACE_ENV, trace.path())
            .env(JOURNAL_FILE_BYTES_ENV, TEST_JOURNAL_FILE_BYTES.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn ledgerwire");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let acks_before_kill = rng.random_range(0..=MAX_ACKS_BEFORE_KILL);
        let mut record = |line: &str| {
            if let Some((writer, position, global)) = parse_ack(line) {
                acknowledged.insert((writer, position), global);
            }
        };
        for _ in 0..acks_before_kill {
            let Some(line) = lines.next() else {
                panic!("round {round}: the writer exited on its own");
            };
            record(&line.expect("read"));
        }
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
        for line in lines.map_while(Result::ok) {
            record(&line);
        }
        let rolled = roll_back(dir.path(), trace.path()).expect("roll back");
        dropped_bytes += rolled.journal_bytes_dropped;
        check_store(dir.path(), &acknowledged, round);
        // What the check's open and clean close left is all synced.
        baseline(dir.path(), trace.path()).expect("baseline");
    }
    println!(
        "{} acknowledged appends, {dropped_bytes} unsynced journal bytes dropped",
        acknowledged.len()
    );
    assert!(!acknowledged.is_empty(), "the test acknowledged nothing");
    ledgerwire_ok(&["log", "verify"], dir.path());
}

fn check_store(path: &std::path::Path, acknowledged: &HashMap<(u32, u64), u64>, round: usize) {
    let (ledger, report) = open_local(path);
    assert!(report.is_clean(), "round {round}: {:?}", report.problems);
    let mut by_writer: HashMap<u32, u64> = HashMap::new();
    for &(writer, position) in acknowledged.keys() {
        let count = by_writer.entry(writer).or_default();
        *count = (*count).max(position + 1);
    }
    for (&writer, &count) in &by_writer {
        let key = stream(&format!("probe/{writer}"));
        let records: Vec<_> = ledger
            .read_blocking(&key, 0)
            .expect("read")
            .map(|r| r.expect("a record that checks"))
            .collect();
        assert!(
            records.len() as u64 >= count,
            "round {round}: writer {writer} acknowledged {count} records, the store holds {}",
            records.len()
        );
        for (position, stored) in records.iter().enumerate() {
            let position = position as u64;
            assert_eq!(stored.position(), position);
            let expected = Probe::new(writer, position, FILLER_BYTES).to_record();
            assert_eq!(
                stored.payload(),
                expected.payload.as_slice(),
                "round {round}: writer {writer} position {position}: other bytes"
            );
            if let Some(&global) = acknowledged.get(&(writer, position)) {
                assert_eq!(
                    stored.global_position(),
                    global,
                    "round {round}: writer {writer} position {position}"
                );
            }
        }
    }
}

/// Copies a store as a killed process leaves it (its files as they are).
fn copy_store(from: &std::path::Path, to: &std::path::Path) {
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            std::fs::create_dir_all(&target).expect("mkdir");
            copy_store(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

#[test]
fn log_verify_names_a_damaged_journal_entry_by_file_and_offset() {
    use ledgerwire::ledger::local::testing as journal;
    use ledgerwire::ledger::{Durability, ExpectedPosition};
    let live = scratch();
    let (ledger, _) = open_local(live.path());
    // sled as a crash right after open leaves it (open made it durable).
    let crashed = scratch();
    copy_store(live.path(), crashed.path());
    let key = stream("probe/0");
    for n in 0..5 {
        ledger
            .append_blocking(
                &key,
                ExpectedPosition::Exactly(n),
                vec![Probe::new(0, n, FILLER_BYTES).to_record()],
                Durability::Durable,
            )
            .expect("append");
    }
    // A power loss: sled's files as they were synced at open, the journal
    // holding the five rounds, each synced before the next was written.
    copy_store(
        &live.path().join("journal"),
        &crashed.path().join("journal"),
    );
    drop(ledger);
    let scans = journal::scan(crashed.path()).expect("scan");
    let entry = &scans[0].entries[2];
    let (file, offset) = (scans[0].path.clone(), entry.offset);
    let mut bytes = std::fs::read(&file).expect("read");
    bytes[offset as usize + 40] ^= 0x10;
    std::fs::write(&file, bytes).expect("write");
    let output = binary()
        .args(["log", "verify", "--data"])
        .arg(crashed.path())
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!(
            "DAMAGED journal file={} offset={offset}:",
            file.display()
        )),
        "{text}"
    );
    assert!(text.contains("restore the store from a backup"), "{text}");
    // Nothing was deleted or replayed past the damage: the same finding again.
    let again = binary()
        .args(["log", "verify", "--data"])
        .arg(crashed.path())
        .output()
        .expect("run");
    assert_eq!(again.status.code(), Some(1));
}

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

/// What [`roll_back`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct RolledBack {
    /// Bytes of journal written but never synced, dropped.
    journal_bytes_dropped: u64,
    /// Whether sled's files were removed (the next open rebuilds them).
    sled_removed: bool,
}

/// Turns `store`, whose process was killed, into what a power loss could
/// have left by the trace in `trace`: journal files zeroed past what was
/// synced (a file never synced removed), and sled's files, never synced,
/// gone (the worst a power loss can leave of them).
fn roll_back(store: &Path, trace: &Path) -> io::Result<RolledBack> {
    let lengths = synced_lengths(trace)?;
    let mut rolled = RolledBack::default();
    for (_, path) in testing::files(store)? {
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

/// Starts a fresh trace of `store` as it is now, every byte of it taken
/// for synced (a store closed cleanly): the point a later roll-back
/// cannot go behind.
fn baseline(store: &Path, trace: &Path) -> io::Result<()> {
    match fs::remove_dir_all(trace) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
        _ => {}
    }
    fs::create_dir_all(trace)?;
    let mut lines = String::new();
    for (_, path) in testing::files(store)? {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("?");
        lines.push_str(&format!("{name} {}\n", fs::metadata(&path)?.len()));
    }
    fs::write(trace.join(SYNCED_FILE), lines)
}

/// The simulation is able to fail: appends acknowledged before any sync
/// (buffered ones, which is what acknowledging before the sync would make
/// every append) do not survive it, durable ones do.
#[test]
fn a_roll_back_keeps_what_was_synced_and_drops_what_was_not() {
    use ledgerwire::ledger::local::{LocalStore, OpenMode};
    use ledgerwire::ledger::{Durability, ExpectedPosition};
    let live = scratch();
    let trace = scratch();
    let faults = testing::install(live.path(), Faults::trace(trace.path()).expect("a trace"));
    let (ledger, _) = LocalStore::open(live.path(), OpenMode::CreateIfMissing).expect("open");
    let (durable, buffered) = (stream("probe/0"), stream("probe/1"));
    let append = |writer: u32, key, n, durability| {
        let record = Probe::new(writer, n, 100).to_record();
        ledger
            .append_blocking(key, ExpectedPosition::Exactly(n), vec![record], durability)
            .expect("append");
    };
    for n in 0..50 {
        append(0, &durable, n, Durability::Durable);
    }
    // From here no sync returns: the buffered appends are acknowledged
    // (written, never synced) before the process "dies".
    faults.hold_syncs(true);
    for n in 0..20 {
        append(1, &buffered, n, Durability::Buffered);
    }
    // Its files copied as they are; it never closes (its syncs stay held).
    let crashed = scratch();
    crate::golden::copy_dir(live.path(), crashed.path());
    std::mem::forget(ledger);
    let _ = fs::remove_file(crashed.path().join("db.lock"));
    let rolled = roll_back(crashed.path(), trace.path()).expect("roll back");
    assert!(rolled.sled_removed);
    assert!(rolled.journal_bytes_dropped > 0, "{rolled:?}");
    let (ledger, report) = open_local(crashed.path());
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!(ledger.head_blocking(&durable).expect("head"), 50);
    assert_eq!(ledger.head_blocking(&buffered).expect("head"), 0);
}
