//! Power-loss simulation: the real binary appends durably from several
//! concurrent writers with the TEST-ONLY trace on (`ledger::powerloss`:
//! each journal sync's length), and with journal files small enough to
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
//! library test `ledger::powerloss` shows a roll-back dropping appends
//! acknowledged without a sync).

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::Stdio;

use ledgerwire::ledger::kinds::Payload;
use ledgerwire::ledger::local::testing::{self as powerloss, JOURNAL_FILE_BYTES_ENV, TRACE_ENV};
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
        let rolled = powerloss::roll_back(dir.path(), trace.path()).expect("roll back");
        dropped_bytes += rolled.journal_bytes_dropped;
        check_store(dir.path(), &acknowledged, round);
        // What the check's open and clean close left is all synced.
        powerloss::baseline(dir.path(), trace.path()).expect("baseline");
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
