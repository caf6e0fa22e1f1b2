//! Damage to the index and beside the records: a flipped byte in sled's
//! data file or its snapshot file costs nothing (the store rebuilds its
//! index from the journal; `log verify` and `serve` say so and serve every
//! record), a damaged record in the journal is refused by name (the
//! server answers its conversation with `conversation_damaged`, its
//! health routes say the store is damaged), and damaged fold snapshots
//! are discarded and rebuilt.

use std::path::Path;

use ledgerwire::ledger::local::{LocalStore, OpenMode};
use ledgerwire::ledger::probe::{Probe, ProbeFold};
use ledgerwire::ledger::{Durability, ExpectedPosition, FoldCache, NewRecord, Payload};
use ledgerwire::studio::auth::Principal;
use serde_json::{Value, json};

use crate::support::{
    ServerProcess, StudioClient, binary, ledgerwire_ok, open, open_local, quick_studio, scratch,
    start_stoppable_studio, stream,
};

/// A byte pattern that occurs nowhere else in a store, so a test can find
/// one record's bytes in sled's data file.
const MARKER: &[u8] = b"<<damage-me-here:0123456789abcdef>>";
/// Another such pattern, for the last record written.
const LAST_MARKER: &[u8] = b"<<damage-me-last:fedcba9876543210>>";

fn probe(n: u64, filler: Vec<u8>) -> NewRecord {
    Probe {
        writer: 0,
        n,
        filler,
    }
    .to_record()
}

/// Flips one bit in every copy of `needle` in sled's data file (sled may
/// hold older copies of a page); how many copies there were.
fn flip_in_data_file(dir: &Path, needle: &[u8]) -> usize {
    let path = dir.join("db");
    let mut bytes = std::fs::read(&path).unwrap();
    let mut at = Vec::new();
    let mut from = 0;
    while let Some(found) = bytes[from..]
        .windows(needle.len())
        .position(|w| w == needle)
    {
        at.push(from + found);
        from += found + needle.len();
    }
    for &offset in &at {
        bytes[offset + needle.len() / 2] ^= 0x04;
    }
    std::fs::write(&path, bytes).unwrap();
    at.len()
}

/// Damages, in sled's data file, the entry of `name` whose records hold
/// `needle`: sled's entries point at the records in the journal (store
/// format 4), so the entry's own bytes, unique to it, are what is flipped
/// (every copy); how many copies there were.
fn flip_entry_in_data_file(dir: &Path, name: &str, needle: &[u8]) -> usize {
    let value = {
        let db = crate::support::open_sled(dir);
        let log = db.open_tree("log").unwrap();
        let files = ledgerwire::ledger::local::testing::JournalFiles::new(dir);
        let key = stream(name);
        log.scan_prefix(ledgerwire::ledger::local::testing::stream_prefix(&key))
            .map(|entry| entry.unwrap().1)
            .find(|value| {
                ledgerwire::ledger::local::testing::envelopes(value.clone(), &files)
                    .any(|envelope| envelope.unwrap().windows(needle.len()).any(|w| w == needle))
            })
            .expect("an entry holding the needle")
    };
    flip_in_data_file(dir, &value)
}

/// `ledgerwire log verify` on `dir`: its exit code and output.
fn verify(dir: &Path) -> (Option<i32>, String) {
    let output = binary()
        .args(["log", "verify", "--data"])
        .arg(dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.code(), text)
}

/// Fills sled's log at `dir` with about `megabytes` MB of entries, in
/// streams of their own, so it spans several segments.
fn fill(dir: &Path, megabytes: u64) {
    fill_stream(dir, "f/fill", megabytes);
}

/// Single records appended to streams of one name's length, one entry
/// each, for a megabyte of sled's log.
const FILL_ENTRIES_PER_MB: u64 = 6_000;

/// [`fill`] into streams named `name` and five digits.
fn fill_stream(dir: &Path, name: &str, megabytes: u64) {
    let (ledger, _) = open_local(dir);
    for n in 0..megabytes * FILL_ENTRIES_PER_MB {
        ledger
            .append_blocking(
                &stream(&format!("{name}{n:05}")),
                ExpectedPosition::Any,
                vec![probe(n, vec![7; 8])],
                Durability::Buffered,
            )
            .unwrap();
    }
    ledger.flush_blocking().unwrap();
}

/// A store with the marked record in `d/b` between `d/a` and `d/c`. Each
/// record is an append of its own, so each stream spans many of sled's
/// leaves (a leaf holds up to 17 entries, an entry here up to 32 records),
/// and the leaf holding the marked record holds records of `d/b` only.
fn marked_store(dir: &Path) {
    let (ledger, _) = open_local(dir);
    for name in ["d/a", "d/b", "d/c"] {
        for n in 0..3_000 {
            let marked = name == "d/b" && n == 1_500;
            let record = probe(n, if marked { MARKER.to_vec() } else { vec![0; 24] });
            ledger
                .append_blocking(
                    &stream(name),
                    ExpectedPosition::Exactly(n),
                    vec![record],
                    Durability::Buffered,
                )
                .unwrap();
        }
    }
    ledger.flush_blocking().unwrap();
}

#[test]
fn a_damaged_page_of_the_index_is_rebuilt_and_verify_says_so() {
    // Damage in an older segment of sled's log, behind its snapshot.
    let dir = scratch();
    marked_store(dir.path());
    fill(dir.path(), 2);
    write_sled_snapshot(dir.path());
    assert!(
        flip_entry_in_data_file(dir.path(), "d/b", MARKER) >= 1,
        "the entry is in the data file"
    );
    let (code, text) = verify(dir.path());
    println!("{text}");
    assert_eq!(code, Some(0), "nothing is lost: {text}");
    assert!(text.contains("index: rebuilt from the journal"), "{text}");
    assert!(text.contains("ok: 21000 records"), "{text}");
    // The rebuilt index is the store's now.
    let (code, text) = verify(dir.path());
    assert_eq!(code, Some(0), "{text}");
    assert!(!text.contains("index: rebuilt"), "{text}");
}

#[tokio::test]
async fn damage_where_sled_recovers_from_costs_nothing_and_serve_starts() {
    // Damage in the segment sled recovers from: it stops reading there, as
    // at a torn write, and the journal gives back every later record.
    let dir = scratch();
    let path = dir.path().to_path_buf();
    tokio::task::spawn_blocking(move || {
        marked_store(&path);
        {
            let (ledger, _) = open_local(&path);
            ledger
                .append_blocking(
                    &stream("d/b"),
                    ExpectedPosition::Exactly(3_000),
                    vec![probe(3_000, LAST_MARKER.to_vec())],
                    Durability::Durable,
                )
                .unwrap();
        }
        assert!(flip_entry_in_data_file(&path, "d/b", LAST_MARKER) >= 1);
    })
    .await
    .unwrap();
    let server = ServerProcess::start(dir.path(), &["--agent", "minimal"]);
    let response = reqwest::get(format!("http://{}/healthz", server.addr));
    let health: Value = response.await.unwrap().json().await.unwrap();
    assert_eq!(health["store"], "intact", "{health}");
    server.kill();
    let (code, text) = verify(dir.path());
    println!("{text}");
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("ok: 9001 records in 3 streams"), "{text}");
}

#[tokio::test]
async fn a_damaged_fold_snapshot_is_discarded_and_rebuilt() {
    let dir = scratch();
    let key = stream("t/snapshotted");
    let expected = {
        let (ledger, _) = open(dir.path());
        let records = (0..40).map(|n| probe(n, vec![0; 8])).collect();
        ledger
            .append(
                &key,
                ExpectedPosition::Exactly(0),
                records,
                Durability::Durable,
            )
            .await
            .unwrap();
        let cache = FoldCache::<ProbeFold>::with_limits(ledger.clone(), 8, 4);
        let state = cache.state(&key).await.unwrap().state.clone();
        ledger.flush().await.unwrap();
        state
    };
    // Damage every stored snapshot: one cut short, the others flipped.
    let damaged: Vec<Vec<u8>> = {
        let db = crate::support::open_sled(dir.path());
        let snapshots = db.open_tree("snapshots").unwrap();
        let mut damaged = Vec::new();
        for (i, entry) in snapshots.iter().enumerate() {
            let (key, value) = entry.unwrap();
            let mut bytes = value.to_vec();
            if i == 0 {
                bytes.truncate(bytes.len() / 2);
            } else {
                let middle = bytes.len() / 2;
                bytes[middle] ^= 0x01;
            }
            snapshots.insert(key, bytes.clone()).unwrap();
            damaged.push(bytes);
        }
        db.flush().unwrap();
        damaged
    };
    assert!(!damaged.is_empty(), "a snapshot was written");
    let (ledger, report) = open(dir.path());
    assert!(report.is_clean());
    let cache = FoldCache::<ProbeFold>::with_limits(ledger.clone(), 8, 4);
    assert_eq!(
        cache.state(&key).await.unwrap().state,
        expected,
        "folded from the records"
    );
    ledger.flush().await.unwrap();
    drop(cache);
    drop(ledger);
    let db = crate::support::open_sled(dir.path());
    let snapshots = db.open_tree("snapshots").unwrap();
    let now: Vec<Vec<u8>> = snapshots.iter().map(|e| e.unwrap().1.to_vec()).collect();
    assert!(now.iter().all(|value| !damaged.contains(value)), "rebuilt");
}

/// Writes a real sled snapshot file into the store at `dir` (sled writes
/// one after a number of operations; a store this small has none yet).
#[allow(deprecated)] // sled's knob for when it writes a snapshot
fn write_sled_snapshot(dir: &Path) -> std::path::PathBuf {
    {
        let db = crate::support::sled_once_released(|| {
            sled::Config::new().path(dir).snapshot_after_ops(1).open()
        });
        let scratch = db.open_tree("test-scratch").unwrap();
        for n in 0..64u32 {
            scratch.insert(n.to_be_bytes(), &[0u8; 8]).unwrap();
            db.flush().unwrap();
        }
    }
    let mut snaps: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("snap.") && !n.ends_with(".generating"))
        })
        .collect();
    snaps.sort();
    snaps.pop().expect("sled wrote a snapshot file")
}

fn turn(conversation: &str, message: &str) -> Value {
    json!({"kind": "turn.request", "conversation_id": conversation, "message": message})
}

#[tokio::test]
async fn a_damaged_sled_snapshot_costs_a_rebuild_of_the_index_and_nothing_else() {
    let dir = scratch();
    {
        let (ledger, _) = open_local(dir.path());
        let (addr, server) = start_stoppable_studio(ledger.ledger(), quick_studio()).await;
        let client = StudioClient::new(addr, "operator");
        let frames = client
            .stream("/api/studio/turn", &turn("kept", "hello"))
            .await;
        assert_eq!(frames.last().unwrap()["event"], "done");
        server.stop().await;
    }
    let snapshot = write_sled_snapshot(dir.path());
    let mut bytes = std::fs::read(&snapshot).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&snapshot, bytes).unwrap();

    let name = snapshot.file_name().unwrap().to_str().unwrap();
    let copy = scratch();
    crate::golden::copy_dir(dir.path(), copy.path());
    let (code, text) = verify(copy.path());
    println!("{text}");
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("index: rebuilt from the journal"), "{text}");
    let set_aside = std::fs::read_dir(copy.path().join("discarded"))
        .unwrap()
        .any(|entry| entry.unwrap().path().join(name).exists());
    assert!(
        set_aside,
        "the damaged snapshot file is set aside with the index"
    );

    // The server sets the index aside too, rebuilds it and serves the
    // store intact.
    let server = ServerProcess::start(dir.path(), &["--agent", "minimal"]);
    let health: Value = reqwest::get(format!("http://{}/healthz", server.addr))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["store"], "intact", "{health}");
    let client = StudioClient::new(server.addr, "operator");
    let (status, canvas) = client
        .json("/api/studio/stream", &json!({"conversation_id": "kept"}))
        .await;
    assert_eq!(status, 200, "{canvas}");
    server.kill();
    let set_aside = std::fs::read_dir(dir.path().join("discarded"))
        .unwrap()
        .map(|entry| entry.unwrap().path().join(name))
        .any(|path| path.exists());
    assert!(set_aside, "set aside, not deleted");
    let verified = ledgerwire_ok(&["log", "verify"], dir.path());
    assert!(verified.starts_with("ok:"), "{verified}");
}

#[tokio::test]
async fn a_damaged_conversation_is_refused_by_name_and_the_health_routes_say_so() {
    let (dir, intact) = damaged_conversation_store().await;
    let ledger = LocalStore::open_scrubbing(dir.path(), OpenMode::MustExist).unwrap();
    assert!(ledger.index_rebuilt().is_none(), "the index is intact");
    serve_damaged(ledger, &intact).await;
}

/// A store with a conversation `damaged` whose first record is damaged
/// where it lives, in the journal, and an intact one.
async fn damaged_conversation_store() -> (tempfile::TempDir, String) {
    let dir = scratch();
    let damaged_key = format!(
        "studio/{}/damaged",
        Principal::of_token("operator").as_str()
    );
    let intact = "i".repeat(20);
    {
        let (ledger, _) = open_local(dir.path());
        let (addr, server) = start_stoppable_studio(ledger.ledger(), quick_studio()).await;
        let client = StudioClient::new(addr, "operator");
        for conversation in [intact.as_str(), "damaged"] {
            let frames = client
                .stream("/api/studio/turn", &turn(conversation, "hello"))
                .await;
            assert_eq!(frames.last().unwrap()["event"], "done");
        }
        server.stop().await;
    }
    let (file, offset) = crate::support::record_in_journal(dir.path(), &stream(&damaged_key), 0);
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[offset as usize + 40] ^= 0x20;
    std::fs::write(&file, bytes).unwrap();
    (dir, intact)
}

async fn serve_damaged(ledger: LocalStore, intact: &str) {
    ledger.wait_for_scrub();
    let (addr, _server) = start_stoppable_studio(ledger.ledger(), quick_studio()).await;
    let client = StudioClient::new(addr, "operator");
    for (path, body) in [
        ("/api/studio/turn", turn("damaged", "hello again")),
        ("/api/studio/stream", json!({"conversation_id": "damaged"})),
    ] {
        let (status, refusal) = client.json(path, &body).await;
        assert_eq!(status, 500, "{path}: {refusal}");
        assert_eq!(refusal["code"], "conversation_damaged", "{path}");
        assert_eq!(refusal["retry"], "do_not_retry");
        assert!(
            refusal["detail"].as_str().unwrap().contains("restore"),
            "{refusal}"
        );
    }
    let frames = client
        .stream("/api/studio/turn", &turn(intact, "hello again"))
        .await;
    assert_eq!(
        frames.last().unwrap()["event"],
        "done",
        "the others are served"
    );
    // Liveness reports the damage (a restart would not mend it); readiness
    // refuses traffic until an operator has looked.
    for (route, expected) in [("/healthz", 200), ("/readyz", 503)] {
        let response = reqwest::get(format!("http://{addr}{route}")).await.unwrap();
        assert_eq!(response.status(), expected, "{route}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["store"], "damaged", "{route}: {body}");
        let listed = body["damaged_streams"].as_array().unwrap();
        assert!(
            listed
                .iter()
                .any(|s| s["stream"].as_str().unwrap().ends_with("/damaged")),
            "{body}"
        );
    }
}
