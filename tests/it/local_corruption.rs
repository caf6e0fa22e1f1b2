//! The corruption campaign: single-byte flips, truncations and missing
//! files at random places of every file of a local store written by real
//! traffic (Studio conversations and concurrent appends over several
//! journal files). Damage to the index (sled's files) must cost nothing:
//! the store rebuilds it from the journal and serves every acknowledged
//! record with its bytes. Damage to the journal must be named (file and
//! byte) or met as a refused stream, the other streams served. Never a
//! wrong record, never a panic. Bounded in trials and time; the seed is
//! printed, and `LEDGERWIRE_CAMPAIGN_SEED` runs one again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ledgerwire::ledger::local::testing::{Faults, install};
use ledgerwire::ledger::local::{LocalError, LocalStore, OpenMode};
use ledgerwire::ledger::probe::Probe;
use ledgerwire::ledger::{Durability, ExpectedPosition, LedgerError, Payload};
use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::golden::copy_dir;
use crate::support::{StudioClient, quick_studio, scratch, start_stoppable_studio, stream};

/// Trials per run, at most.
const MAX_TRIALS: usize = 64;

/// Time the trials may take, at most, in seconds (a slow host runs fewer).
const MAX_CAMPAIGN_SECS: u64 = 120;

/// Journal files rotate past this many bytes here, so the store has several.
const CAMPAIGN_JOURNAL_FILE_BYTES: u64 = 192 * 1024;

/// A record as compared: everything its checksum covers, and the checksum.
type Seen = (u16, u64, u64, u64, Vec<u8>, u32);

/// Every stream's records, as the store serves them.
type Served = BTreeMap<String, Vec<Seen>>;

fn seen(record: &ledgerwire::ledger::Record) -> Seen {
    (
        record.kind(),
        record.position(),
        record.global_position(),
        record.timestamp_ms(),
        record.payload().to_vec(),
        record.crc(),
    )
}

/// Writes the store the campaign damages: Studio conversations through
/// the real routes, then four threads appending to streams of their own,
/// durable and buffered, closed and opened again between rounds.
fn written_store(dir: &Path) {
    install(dir, Faults::journal_file_bytes(CAMPAIGN_JOURNAL_FILE_BYTES));
    {
        let (store, _) = LocalStore::open(dir, OpenMode::CreateIfMissing).expect("open");
        let runtime = tokio::runtime::Runtime::new().expect("a runtime");
        runtime.block_on(async {
            let (addr, server) = start_stoppable_studio(store.ledger(), quick_studio()).await;
            let client = StudioClient::new(addr, "operator");
            for n in 0..6 {
                let body = json!({"kind": "turn.request", "conversation_id": format!("c{n}"), "message": "hello"});
                let frames = client.stream("/api/studio/turn", &body).await;
                assert_eq!(frames.last().expect("frames")["event"], "done");
            }
            server.stop().await;
        });
    }
    for round in 0..3u64 {
        let (store, _) = LocalStore::open(dir, OpenMode::MustExist).expect("open");
        std::thread::scope(|scope| {
            for writer in 0..4u32 {
                let store = store.clone();
                scope.spawn(move || {
                    for n in 0..150u64 {
                        let key = stream(&format!("w/{writer}/{}", n % 5));
                        let filler = vec![(n % 251) as u8; 40 + (n as usize * 37) % 700];
                        let probe = Probe {
                            writer,
                            n: round * 1000 + n,
                            filler,
                        };
                        let durability = if n % 7 == 0 {
                            Durability::Durable
                        } else {
                            Durability::Buffered
                        };
                        store
                            .append_blocking(
                                &key,
                                ExpectedPosition::Any,
                                vec![probe.to_record()],
                                durability,
                            )
                            .expect("append");
                    }
                });
            }
        });
        store.flush_blocking().expect("flush");
    }
}

/// Everything the store serves, stream by stream: the records read
/// before a read failed, and the failure.
fn served(store: &LocalStore) -> (Served, BTreeMap<String, LedgerError>) {
    let mut records = Served::new();
    let mut failed = BTreeMap::new();
    for key in store.streams_blocking(None) {
        let key = key.expect("the stream keys list");
        let mut got = Vec::new();
        let read = store
            .read_blocking(&key, 0)
            .map_err(LedgerError::from)
            .and_then(|reader| {
                for record in reader {
                    got.push(seen(&record.map_err(LedgerError::from)?));
                }
                Ok(())
            });
        if let Err(error) = read {
            failed.insert(key.to_string(), error);
        }
        records.insert(key.to_string(), got);
    }
    (records, failed)
}

/// sled writes a snapshot file after a number of operations; a store this
/// small has none, so one is written as sled would.
#[allow(deprecated)] // sled's knob for when it writes a snapshot
fn with_sled_snapshot(dir: &Path) {
    let db = crate::support::sled_once_released(|| {
        sled::Config::new().path(dir).snapshot_after_ops(1).open()
    });
    let scratch = db.open_tree("test-scratch").expect("a tree");
    for n in 0..16u32 {
        scratch.insert(n.to_be_bytes(), &[0u8; 8]).expect("insert");
        db.flush().expect("flush");
    }
}

/// Whether `file` is one of the journal's.
fn in_journal(file: &Path) -> bool {
    file.components().any(|part| part.as_os_str() == "journal")
}

/// The store's files the campaign damages: sled's and the journal's.
fn targets(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for sub in ["", "blobs", "journal"] {
        let Ok(entries) = std::fs::read_dir(dir.join(sub)) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("an entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let sled =
                ["conf", "db"].contains(&name) || name.starts_with("snap.") || sub == "blobs";
            if path.is_file() && (sled || name.ends_with(".wal")) {
                files.push(path.strip_prefix(dir).expect("inside").to_path_buf());
            }
        }
    }
    files.sort();
    files
}

/// One kind of damage.
#[derive(Debug, Clone, Copy)]
enum Harm {
    Flip { at: u64, mask: u8 },
    Truncate { to: u64 },
    Remove,
}

fn harm(file: &Path, harm: Harm) {
    match harm {
        Harm::Flip { at, mask } => {
            let mut bytes = std::fs::read(file).expect("read");
            if let Some(byte) = bytes.get_mut(at as usize) {
                *byte ^= mask;
            }
            std::fs::write(file, bytes).expect("write");
        }
        Harm::Truncate { to } => {
            let opened = std::fs::OpenOptions::new().write(true).open(file);
            opened.and_then(|f| f.set_len(to)).expect("truncate");
        }
        Harm::Remove => std::fs::remove_file(file).expect("remove"),
    }
}

/// Checks what a damaged store serves against what the intact one did.
/// Index damage: everything, the same. Journal damage: whatever it
/// serves is the same, and a stream it stops serving is refused as
/// corrupt, named in the report.
fn judge(what: &str, journal: bool, expected: &Served, store: &LocalStore) {
    let report = store.wait_for_scrub();
    let (got, failed) = served(store);
    for (name, records) in &got {
        let want = expected
            .get(name)
            .unwrap_or_else(|| panic!("{what}: an unknown stream {name}"));
        assert!(
            want.starts_with(records),
            "{what}: stream {name} served a wrong record"
        );
        if records.len() < want.len() {
            assert!(journal, "{what}: index damage lost records of {name}");
            let error = failed.get(name);
            assert!(
                matches!(error, Some(LedgerError::Corrupt { .. })),
                "{what}: {name} ends early without being refused as corrupt: {error:?}"
            );
        }
    }
    let missing: Vec<_> = expected.keys().filter(|k| !got.contains_key(*k)).collect();
    assert!(
        missing.is_empty() || journal,
        "{what}: index damage lost streams {missing:?}"
    );
    if !journal {
        assert!(report.is_clean(), "{what}: {:?}", report.problems);
        assert!(failed.is_empty(), "{what}: {failed:?}");
    }
}

/// One trial: the intact store copied, damaged, opened (alternately as
/// the tools open it and as `serve` does) and judged.
fn trial(base: &Path, expected: &Served, file: &Path, harm_done: Harm, scrubbing: bool) -> Outcome {
    let what = format!(
        "{} {harm_done:?} (serve's open: {scrubbing})",
        file.display()
    );
    let dir = scratch();
    copy_dir(base, dir.path());
    harm(&dir.path().join(file), harm_done);
    let journal = in_journal(file);
    let opened = std::panic::catch_unwind(|| {
        if scrubbing {
            LocalStore::open_scrubbing(dir.path(), OpenMode::MustExist)
        } else {
            LocalStore::open(dir.path(), OpenMode::MustExist).map(|(store, _)| store)
        }
    })
    .unwrap_or_else(|_| panic!("{what}: opening panicked"));
    let store = match opened {
        Ok(store) => store,
        Err(error) => {
            assert!(journal, "{what}: index damage refused the store: {error}");
            let text = error.to_string();
            assert!(
                matches!(error, LocalError::Damaged(_)) && text.contains("restore"),
                "{what}: {text}"
            );
            assert!(
                text.contains("journal"),
                "{what}: names the journal: {text}"
            );
            println!("{what}: refused: {text}");
            return Outcome::Refused;
        }
    };
    judge(&what, journal, expected, &store);
    let outcome = match (
        store.index_rebuilt().is_some(),
        store.corrupt_streams().is_empty(),
    ) {
        (true, _) => Outcome::Rebuilt,
        (false, false) => Outcome::StreamsRefused,
        (false, true) => Outcome::Served,
    };
    println!("{what}: {outcome:?}");
    drop(store);
    if !journal {
        // The rebuilt index is the store's from now on: it opens as found.
        let (again, report) = LocalStore::open(dir.path(), OpenMode::MustExist).expect("reopen");
        assert!(again.index_rebuilt().is_none(), "{what}: rebuilt twice");
        assert!(report.is_clean(), "{what}: {:?}", report.problems);
    }
    outcome
}

/// How a trial ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    /// The index was rebuilt; everything served.
    Rebuilt,
    /// Opened as found; everything served.
    Served,
    /// Journal damage: streams refused by name, the others served.
    StreamsRefused,
    /// Journal damage: the store refused, the damage named.
    Refused,
}

#[test]
fn local_store_index_damage_costs_nothing_and_journal_damage_is_named() {
    let base = scratch();
    written_store(base.path());
    let expected = {
        let (store, report) = LocalStore::open(base.path(), OpenMode::MustExist).expect("open");
        assert!(report.is_clean(), "{:?}", report.problems);
        let (served, failed) = served(&store);
        assert!(failed.is_empty());
        served
    };
    assert!(expected.len() > 20, "streams: {}", expected.len());
    with_sled_snapshot(base.path());
    let files = targets(base.path());
    let journals = files.iter().filter(|f| in_journal(f)).count();
    assert!(journals >= 3, "several journal files: {files:?}");
    assert!(
        files
            .iter()
            .any(|f| f.to_string_lossy().starts_with("snap.")),
        "{files:?}"
    );

    let seed = std::env::var("LEDGERWIRE_CAMPAIGN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random::<u64>());
    println!("campaign seed {seed} (LEDGERWIRE_CAMPAIGN_SEED={seed} runs it again)");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let started = Instant::now();
    let mut trials = 0;
    let mut outcomes = BTreeMap::<Outcome, usize>::new();
    while trials < MAX_TRIALS && started.elapsed() < Duration::from_secs(MAX_CAMPAIGN_SECS) {
        let file = &files[trials % files.len()];
        let len = std::fs::metadata(base.path().join(file))
            .expect("a file")
            .len();
        let harm_done = match rng.random_range(0..10) {
            0 if !in_journal(file) => Harm::Remove,
            0..=2 => Harm::Truncate {
                to: rng.random_range(0..len.max(1)),
            },
            _ => Harm::Flip {
                at: rng.random_range(0..len.max(1)),
                mask: 1 << rng.random_range(0..8),
            },
        };
        let outcome = trial(base.path(), &expected, file, harm_done, trials % 2 == 1);
        *outcomes.entry(outcome).or_default() += 1;
        trials += 1;
    }
    println!("{trials} trials in {:?}: {outcomes:?}", started.elapsed());
    assert!(
        trials >= files.len(),
        "every file was damaged at least once"
    );
}
