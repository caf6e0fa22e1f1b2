//! The golden logs: stores written by store format 1 (log-format/golden/v1/,
//! records in sled's values) and store format 4 (golden/v4/, records in the
//! journal files and sled's entries pointing at them), the same records.
//! Every later build must open each cleanly, fold it to the committed state
//! and dump it to the committed JSON lines.
//!
//! The files are written once, when a format version is introduced, by
//! running this test with LEDGERWIRE_WRITE_GOLDEN=1 and the directory absent.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ledgerwire::ledger::local::OpenMode;
use ledgerwire::ledger::probe::{Probe, ProbeFold, ProbeTally};
use ledgerwire::ledger::{Durability, ExpectedPosition, Ledger, Payload};
use ledgerwire::studio::conversation::ConversationFold;

use crate::support::{scratch, stream};

const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/log-format/golden/v1");
const GOLDEN_V4: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/log-format/golden/v4");

/// The streams of the golden log and their records: (writer, filler bytes).
fn golden_streams() -> Vec<(&'static str, Vec<(u32, usize)>)> {
    vec![
        (
            "golden/alpha",
            vec![(1, 300), (1, 300), (1, 0), (1, 17), (1, 300)],
        ),
        ("golden/beta", vec![(2, 0), (2, 1), (3, 2)]),
        ("golden/γ unicode key", vec![(4, 1000), (4, 64)]),
    ]
}

async fn write_golden(dir: PathBuf) {
    let (ledger, _) =
        ledgerwire::ledger::local::open(dir.join("store"), OpenMode::CreateIfMissing).unwrap();
    // Interleave the streams so global positions interleave too.
    let streams = golden_streams();
    let longest = streams.iter().map(|(_, r)| r.len()).max().unwrap_or(0);
    for n in 0..longest {
        for (name, records) in &streams {
            if let Some(&(writer, filler)) = records.get(n) {
                let record = Probe::new(writer, n as u64, filler).to_record();
                ledger
                    .append(
                        &stream(name),
                        ExpectedPosition::Exactly(n as u64),
                        vec![record],
                        Durability::Durable,
                    )
                    .await
                    .unwrap();
            }
        }
    }
    let mut states: BTreeMap<&str, ProbeTally> = BTreeMap::new();
    for (name, _) in &streams {
        let folded = ledger.fold::<ProbeFold>(&stream(name)).await.unwrap();
        states.insert(*name, folded.state);
    }
    drop(ledger);
    let states = serde_json::to_string_pretty(&states).unwrap();
    std::fs::write(dir.join("expected-state.json"), states + "\n").unwrap();
    let mut dump = Vec::new();
    ledgerwire::log_commands::dump(&open_store(&dir.join("store")).await, None, 0, &mut dump)
        .await
        .unwrap();
    std::fs::write(dir.join("expected-dump.jsonl"), dump).unwrap();
}

pub(crate) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[tokio::test]
async fn the_v1_golden_log_reads_and_folds_to_its_committed_state() {
    let golden = Path::new(GOLDEN);
    ensure_written(golden, write_golden).await;
    reads_and_folds_to_its_committed_state(golden).await;
}

/// Writes the golden store at `golden` with `write` if it is missing and
/// the run asks for it (`LEDGERWIRE_WRITE_GOLDEN`); a missing store is a
/// failure otherwise.
async fn ensure_written<F: std::future::Future<Output = ()>>(
    golden: &Path,
    write: impl FnOnce(PathBuf) -> F,
) {
    if !golden.join("store").exists() {
        assert!(
            std::env::var_os("LEDGERWIRE_WRITE_GOLDEN").is_some(),
            "{}/store is missing; it is committed and must not be regenerated for an existing format version",
            golden.display()
        );
        write(golden.to_path_buf()).await;
    }
}

#[tokio::test]
async fn the_format_4_golden_log_points_into_its_journal_and_reads_and_folds_the_same() {
    let golden = Path::new(GOLDEN_V4);
    ensure_written(golden, |dir| async move {
        write_golden(dir.clone()).await;
        trim_journal(&dir.join("store"));
    })
    .await;
    // Every entry is a pointer into the journal, as format 4 writes them.
    let scratch = scratch();
    copy_dir(&golden.join("store"), scratch.path());
    {
        let db = sled::open(scratch.path()).unwrap();
        let log = db.open_tree("log").unwrap();
        let values: Vec<sled::IVec> = log
            .scan_prefix([ledgerwire::ledger::local::testing::RECORD_KEY_TAG])
            .map(|entry| entry.unwrap().1)
            .collect();
        assert!(!values.is_empty());
        for value in &values {
            let pointer = ledgerwire::ledger::local::testing::Pointer::decode(value);
            assert!(matches!(pointer, Some(Ok(_))), "{value:?}");
        }
    }
    reads_and_folds_to_its_committed_state(golden).await;
    // The same records as format 1's, so the same state.
    assert_eq!(
        std::fs::read_to_string(golden.join("expected-state.json")).unwrap(),
        std::fs::read_to_string(Path::new(GOLDEN).join("expected-state.json")).unwrap()
    );
}

/// Cuts each journal file of a freshly written golden store at its last
/// entry (a file ending there reads whole) and drops the spare: the
/// committed store holds no megabytes of preallocated zeros.
fn trim_journal(store: &Path) {
    for scan in ledgerwire::ledger::local::testing::scan(store).unwrap() {
        let end = scan.entries.last().map(|e| e.end).unwrap();
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&scan.path)
            .unwrap();
        file.set_len(end).unwrap();
    }
    let spare = store
        .join(ledgerwire::ledger::local::testing::JOURNAL_DIR)
        .join(ledgerwire::ledger::local::testing::SPARE_FILE);
    if spare.exists() {
        std::fs::remove_file(spare).unwrap();
    }
}

async fn reads_and_folds_to_its_committed_state(golden: &Path) {
    // sled may write while opening, so work on a copy.
    let scratch = scratch();
    copy_dir(&golden.join("store"), scratch.path());
    let (ledger, report) =
        ledgerwire::ledger::local::open(scratch.path(), OpenMode::MustExist).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!(report.records, 10);
    assert_eq!(report.streams, 3);

    let expected: BTreeMap<String, ProbeTally> =
        serde_json::from_str(&std::fs::read_to_string(golden.join("expected-state.json")).unwrap())
            .unwrap();
    assert_eq!(expected.len(), 3);
    for (name, state) in &expected {
        let folded = ledger.fold::<ProbeFold>(&stream(name)).await.unwrap();
        assert_eq!(&folded.state, state, "stream {name}");
    }
    drop(ledger);

    let mut dump = Vec::new();
    ledgerwire::log_commands::dump(&open_store(scratch.path()).await, None, 0, &mut dump)
        .await
        .unwrap();
    let expected_dump = std::fs::read_to_string(golden.join("expected-dump.jsonl")).unwrap();
    assert_eq!(String::from_utf8(dump).unwrap(), expected_dump);
}

pub(crate) const STUDIO_GOLDEN: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/log-format/golden/v1-studio");

/// Writes a Studio conversation through the real server: a planned turn
/// approved to `done`, a canvas mutation, and a turn left paused on a
/// clarifying question answered into a new plan.
async fn write_studio_golden(dir: &Path) {
    use crate::support::{StudioClient, quick_studio, start_stoppable_studio};
    use serde_json::json;

    let (ledger, _) =
        ledgerwire::ledger::local::open(dir.join("store"), OpenMode::CreateIfMissing).unwrap();
    let (addr, server) = start_stoppable_studio(ledger, quick_studio()).await;
    let client = StudioClient::new(addr, "golden");
    let turn = |message: &str| json!({"kind": "turn.request", "conversation_id": "g1", "message": message});
    let first = client
        .stream("/api/studio/turn", &turn("GDP of Kenya"))
        .await;
    let approve = json!({"kind": "interrupt.response", "conversation_id": "g1",
                         "interrupt_id": first[1]["interrupt_id"], "decision": "approve"});
    client.stream("/api/studio/interrupt", &approve).await;
    let pin = json!({"kind": "composition.mutate", "conversation_id": "g1", "expected_revision": 1,
                     "ops": [{"op": "pin", "component_id": "cmp-1-1"}]});
    assert_eq!(client.json("/api/studio/composition", &pin).await.0, 200);
    let asked = client
        .stream("/api/studio/turn", &turn("clarify please"))
        .await;
    let answer = json!({"kind": "interrupt.response", "conversation_id": "g1",
                        "interrupt_id": asked[1]["interrupt_id"], "decision": "answer",
                        "answers": {"q1": {"kind": "option", "option_id": "o1"}}});
    client.stream("/api/studio/interrupt", &answer).await;
    server.stop().await;

    let (ledger, _) =
        ledgerwire::ledger::local::open(dir.join("store"), OpenMode::MustExist).unwrap();
    let stream = studio_stream(&ledger).await;
    let state = ledger
        .fold::<ConversationFold>(&stream)
        .await
        .unwrap()
        .state;
    drop(ledger);
    let state = serde_json::to_string_pretty(&state).unwrap();
    std::fs::write(dir.join("expected-state.json"), state + "\n").unwrap();
    let mut replay = Vec::new();
    ledgerwire::log_commands::replay(
        &open_store(&dir.join("store")).await,
        "g1",
        None,
        &mut replay,
    )
    .await
    .unwrap();
    std::fs::write(dir.join("expected-replay.txt"), replay).unwrap();
}

async fn studio_stream(ledger: &Ledger) -> ledgerwire::ledger::StreamKey {
    crate::support::streams(ledger)
        .await
        .into_iter()
        .find(|s| s.as_str().starts_with("studio/") && s.as_str().ends_with("/g1"))
        .expect("the golden conversation")
}

#[tokio::test]
async fn the_v1_studio_golden_log_folds_and_replays_to_its_committed_state() {
    let golden = Path::new(STUDIO_GOLDEN);
    if !golden.join("store").exists() {
        assert!(
            std::env::var_os("LEDGERWIRE_WRITE_GOLDEN").is_some(),
            "{STUDIO_GOLDEN}/store is missing; it is committed and must not be regenerated"
        );
        write_studio_golden(golden).await;
    }
    let scratch = scratch();
    copy_dir(&golden.join("store"), scratch.path());
    let (ledger, report) =
        ledgerwire::ledger::local::open(scratch.path(), OpenMode::MustExist).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    let state = ledger
        .fold::<ConversationFold>(&studio_stream(&ledger).await)
        .await
        .unwrap()
        .state;
    // The state and the replay are derived: a fold VERSION bump may change
    // them (never the store). LEDGERWIRE_WRITE_GOLDEN_STATE=1 rewrites both
    // from the committed store.
    if std::env::var_os("LEDGERWIRE_WRITE_GOLDEN_STATE").is_some() {
        let text = serde_json::to_string_pretty(&state).unwrap();
        std::fs::write(golden.join("expected-state.json"), text + "\n").unwrap();
    }
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(golden.join("expected-state.json")).unwrap())
            .unwrap();
    assert_eq!(serde_json::to_value(&state).unwrap(), expected);
    drop(ledger);
    let mut replay = Vec::new();
    ledgerwire::log_commands::replay(&open_store(scratch.path()).await, "g1", None, &mut replay)
        .await
        .unwrap();
    if std::env::var_os("LEDGERWIRE_WRITE_GOLDEN_STATE").is_some() {
        std::fs::write(golden.join("expected-replay.txt"), &replay).unwrap();
    }
    let expected = std::fs::read_to_string(golden.join("expected-replay.txt")).unwrap();
    assert_eq!(String::from_utf8(replay).unwrap(), expected);
}

const STATEWIRE_GOLDEN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/log-format/golden/v1-statewire"
);

/// Writes a Statewire thread through the real server: two acme-chat
/// commands on one durable lane, with their document changes.
async fn write_statewire_golden(dir: &Path) {
    use crate::statewire::chat_client;
    use crate::support::{quick_studio, start_stoppable_studio};
    use ledgerwire::statewire::ids::ClientId;
    use ledgerwire::statewire_client::{Connection, Session};

    let (ledger, _) =
        ledgerwire::ledger::local::open(dir.join("store"), OpenMode::CreateIfMissing).unwrap();
    let (addr, server) = start_stoppable_studio(ledger.clone(), quick_studio()).await;
    let session = Session::new(ClientId::new("golden-client").unwrap());
    let mut client = Connection::connect(chat_client(addr, "g1"), session)
        .await
        .unwrap();
    for theme in ["dark", "light"] {
        crate::statewire::call(
            &mut client,
            "acme-chat",
            "setTheme",
            vec![serde_json::json!(theme)],
        )
        .await;
    }
    client.close().await;
    server.stop().await;
    ledger.flush().await.unwrap();
    let expected = serde_json::to_string_pretty(&statewire_states(&ledger).await).unwrap();
    std::fs::write(dir.join("expected-state.json"), expected + "\n").unwrap();
    let mut dump = Vec::new();
    ledgerwire::log_commands::dump(&ledger, None, 0, &mut dump)
        .await
        .unwrap();
    std::fs::write(dir.join("expected-dump.jsonl"), dump).unwrap();
}

/// The folded lane and documents of the golden thread, as JSON.
async fn statewire_states(ledger: &Ledger) -> serde_json::Value {
    use ledgerwire::statewire::records::{DocumentsFold, LaneFold};
    let mut states = serde_json::Map::new();
    for stream in crate::support::streams(ledger).await {
        let name = stream.as_str().to_owned();
        let state = if name.ends_with("/documents") {
            serde_json::to_value(ledger.fold::<DocumentsFold>(&stream).await.unwrap().state)
        } else {
            serde_json::to_value(ledger.fold::<LaneFold>(&stream).await.unwrap().state)
        };
        states.insert(name, state.unwrap());
    }
    serde_json::Value::Object(states)
}

#[tokio::test]
async fn the_v1_statewire_golden_log_folds_and_dumps_to_its_committed_state() {
    let golden = Path::new(STATEWIRE_GOLDEN);
    if !golden.join("store").exists() {
        assert!(
            std::env::var_os("LEDGERWIRE_WRITE_GOLDEN").is_some(),
            "{STATEWIRE_GOLDEN}/store is missing; it is committed and must not be regenerated"
        );
        write_statewire_golden(golden).await;
    }
    let scratch = scratch();
    copy_dir(&golden.join("store"), scratch.path());
    let (ledger, report) =
        ledgerwire::ledger::local::open(scratch.path(), OpenMode::MustExist).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    assert!(report.streams >= 2, "a lane and the documents");
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(golden.join("expected-state.json")).unwrap())
            .unwrap();
    assert_eq!(statewire_states(&ledger).await, expected);
    drop(ledger);
    let mut dump = Vec::new();
    ledgerwire::log_commands::dump(&open_store(scratch.path()).await, None, 0, &mut dump)
        .await
        .unwrap();
    // The dump's presentation may change (never the store);
    // LEDGERWIRE_WRITE_GOLDEN_STATE=1 rewrites it.
    if std::env::var_os("LEDGERWIRE_WRITE_GOLDEN_STATE").is_some() {
        std::fs::write(golden.join("expected-dump.jsonl"), &dump).unwrap();
    }
    let expected = std::fs::read_to_string(golden.join("expected-dump.jsonl")).unwrap();
    assert_eq!(String::from_utf8(dump).unwrap(), expected);
}

/// The local store in `dir`, opened as `log dump` and `replay` open it.
async fn open_store(dir: &Path) -> Ledger {
    ledgerwire::store::StoreChoice::Local(dir.to_path_buf())
        .open(ledgerwire::store::Opening::Existing)
        .await
        .expect("the store opens")
}
