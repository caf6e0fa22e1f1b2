//! The golden logs: stores written by store format 1 (log-format/golden/v1/,
//! records in sled's values) and store format 4 (golden/v4/, records in the
//! journal files and sled's entries pointing at them), the same records;
//! a Studio conversation (v1-studio), a Statewire thread (v1-statewire) and
//! a conversation holding Studio kinds 25 to 28 (v4-studio-kinds).
//! Every later build must open each cleanly, fold it to the committed state
//! and dump (or replay) it to the committed text.
//!
//! The files are written once, when a golden is introduced, by
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
            "{}/store is missing; it is committed and must not be regenerated",
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
    entries_point_into_the_journal(golden);
    reads_and_folds_to_its_committed_state(golden).await;
    // The same records as format 1's, so the same state.
    assert_eq!(
        std::fs::read_to_string(golden.join("expected-state.json")).unwrap(),
        std::fs::read_to_string(Path::new(GOLDEN).join("expected-state.json")).unwrap()
    );
}

/// Every entry of (a copy of) `golden`'s store is a pointer into the
/// journal, as format 4 writes them.
fn entries_point_into_the_journal(golden: &Path) {
    let scratch = scratch();
    copy_dir(&golden.join("store"), scratch.path());
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
    write_studio_expected(dir).await;
}

/// Writes the folded state and replay transcript of conversation `g1` of
/// the Studio golden store in `dir`.
async fn write_studio_expected(dir: &Path) {
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

/// Opens a copy of the Studio golden store at `golden` (clean), folds its
/// conversation `g1` and replays it, comparing both with the committed
/// files; a fold VERSION bump may change them (never the store), and
/// LEDGERWIRE_WRITE_GOLDEN_STATE=1 rewrites both from the store. The copy.
async fn studio_golden_folds_and_replays(golden: &Path) -> tempfile::TempDir {
    let rewrite = std::env::var_os("LEDGERWIRE_WRITE_GOLDEN_STATE").is_some();
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
    if rewrite {
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
    if rewrite {
        std::fs::write(golden.join("expected-replay.txt"), &replay).unwrap();
    }
    let expected = std::fs::read_to_string(golden.join("expected-replay.txt")).unwrap();
    assert_eq!(String::from_utf8(replay).unwrap(), expected);
    scratch
}

#[tokio::test]
async fn the_v1_studio_golden_log_folds_and_replays_to_its_committed_state() {
    let golden = Path::new(STUDIO_GOLDEN);
    ensure_written(golden, |dir| async move { write_studio_golden(&dir).await }).await;
    studio_golden_folds_and_replays(golden).await;
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
    ensure_written(
        golden,
        |dir| async move { write_statewire_golden(&dir).await },
    )
    .await;
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
    dumps_as_committed(golden, scratch.path()).await;
}

/// `log dump` of the store at `store` (a copy of `golden`'s) equals the
/// committed `expected-dump.jsonl`; its lines. The dump's presentation may
/// change (never the store); LEDGERWIRE_WRITE_GOLDEN_STATE=1 rewrites it.
async fn dumps_as_committed(golden: &Path, store: &Path) -> Vec<serde_json::Value> {
    let mut dump = Vec::new();
    ledgerwire::log_commands::dump(&open_store(store).await, None, 0, &mut dump)
        .await
        .unwrap();
    if std::env::var_os("LEDGERWIRE_WRITE_GOLDEN_STATE").is_some() {
        std::fs::write(golden.join("expected-dump.jsonl"), &dump).unwrap();
    }
    let dump = String::from_utf8(dump).unwrap();
    let expected = std::fs::read_to_string(golden.join("expected-dump.jsonl")).unwrap();
    assert_eq!(dump, expected);
    dump.lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The local store in `dir`, opened as `log dump` and `replay` open it.
async fn open_store(dir: &Path) -> Ledger {
    ledgerwire::store::StoreChoice::Local(dir.to_path_buf())
        .open(ledgerwire::store::Opening::Existing)
        .await
        .expect("the store opens")
}

const STUDIO_KINDS_GOLDEN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/log-format/golden/v4-studio-kinds"
);

/// The model's answers in the Studio kinds golden: turn 1's cut off once
/// mid-text and then complete, turn 2's whole.
const FIRST_ANSWER: &str = "Chile's population grew by half since 1980.";
const SECOND_ANSWER: &str = "Peru has about 34 million people.";

/// The turn whose call the golden holds as a build before text streaming
/// wrote it (kind 27): the last, so the folded state keeps that call.
const OLD_BUILD_TURN: u32 = 2;

/// Serves conversation `g1` into the store at `store`: two keyed turns (as
/// harness-sdk starts them) answered by the model agent over a scripted
/// model, the first's first call dropped once its text had begun.
async fn serve_keyed_model_turns(store: &Path) {
    use crate::model_agent::{Scripted, pieces, step};
    use futures_util::StreamExt;
    use ledgerwire::agent::model::{CallError, ModelAgent};
    use ledgerwire::studio::auth::Principal;
    use ledgerwire::studio::keyed::RequestKey;
    use ledgerwire::studio::records::{SegmentReleased, conversation_stream};
    use ledgerwire::studio::service::Studio;
    use ledgerwire::studio::start::Opened;
    use ledgerwire::wire::ids::ConversationId;
    use serde_json::json;
    use std::sync::{Arc, Mutex};

    let first = step(json!({"tool": "answer", "text": FIRST_ANSWER}));
    let second = step(json!({"tool": "answer", "text": SECOND_ANSWER}));
    let at = first.find("Chile").unwrap();
    let script = vec![
        (pieces(&first, &[at + 9, at + 15]), Some(CallError::Dropped)),
        (pieces(&first, &[at + 3, at + 20, at + 30]), None),
        (pieces(&second, &[]), None),
    ];
    let agent = ModelAgent::with_transport(Arc::new(Scripted(Mutex::new(script))), 4);
    let (ledger, _) = crate::support::open(store);
    let studio = Studio::new(
        ledger.clone(),
        Arc::new(agent),
        crate::support::quick_studio(),
    );
    let principal = Principal::of_token("golden");
    let stream = conversation_stream(&principal, &ConversationId::new("g1").unwrap()).unwrap();
    for (turn, message) in [(1, "How did Chile grow?"), (2, "Population of Peru")] {
        let body = json!({"kind": "turn.request", "conversation_id": "g1", "message": message});
        let request = ledgerwire::wire::parse_turn_request(body.to_string().as_bytes()).unwrap();
        let key = RequestKey::new(format!("golden-client/harness-sdk/{turn}")).unwrap();
        studio
            .start_turn(&principal, request, Some(&key))
            .await
            .and_then(Opened::into_applied)
            .unwrap();
        // The detached segment streams on its own: wait for its release.
        let mut records = Box::pin(ledger.tail(&stream, 0));
        let mut released = 0;
        tokio::time::timeout(crate::support::EVENT_TIMEOUT, async {
            while released < turn {
                let record = records.next().await.unwrap().unwrap();
                released += usize::from(SegmentReleased::from_record(&record).is_some());
            }
        })
        .await
        .expect("the turn's segment ends");
    }
    ledger.flush().await.unwrap();
}

/// The served records of one append as the golden holds them: those of
/// [`OLD_BUILD_TURN`]'s calls as a build before text streaming wrote
/// them, each call once, as kind 27, where the note that its text began
/// stood (before its first frame); `completed` holds the turn's calls
/// (by segment and index) as they ended.
fn as_written(
    records: &[ledgerwire::ledger::Record],
    completed: &BTreeMap<(u32, u32), ledgerwire::studio::records::ModelExchangedV2>,
    streamed: &std::collections::BTreeSet<(u32, u32)>,
) -> Vec<ledgerwire::ledger::NewRecord> {
    use ledgerwire::studio::records::{ModelExchanged, ModelExchangedV2};
    let older = |call: &ModelExchangedV2| {
        ModelExchanged {
            turn: call.turn,
            segment: call.segment,
            answers: call.answers,
            index: call.index,
            request_digest: call.request_digest.clone(),
            request: call.request.clone(),
            reply: call.reply.clone(),
            error: call.error.clone(),
            bad_output: call.bad_output,
            elapsed_ms: call.elapsed_ms,
        }
        .to_record()
    };
    records
        .iter()
        .filter_map(|record| {
            let Some(call) = ModelExchangedV2::from_record(record).map(Result::unwrap) else {
                return Some(ledgerwire::ledger::NewRecord {
                    kind: record.kind(),
                    payload: record.payload().to_vec(),
                });
            };
            let id = (call.segment, call.index);
            match (call.turn == OLD_BUILD_TURN, call.streaming) {
                (false, _) => Some(call.to_record()),
                (true, true) => completed.get(&id).map(older),
                (true, false) => (!streamed.contains(&id)).then(|| older(&call)),
            }
        })
        .collect()
}

/// Writes the Studio kinds golden: the conversation served into a scratch
/// store, copied append by append (its journal's entries) into the golden
/// store, [`OLD_BUILD_TURN`]'s calls as the kind 27 an older build wrote.
async fn write_studio_kinds_golden(dir: PathBuf) {
    use ledgerwire::ledger::StreamKey;
    use ledgerwire::studio::records::ModelExchangedV2;
    let served = scratch();
    serve_keyed_model_turns(served.path()).await;
    let entries: Vec<Vec<ledgerwire::ledger::Record>> =
        ledgerwire::ledger::local::testing::scan(served.path())
            .unwrap()
            .into_iter()
            .flat_map(|scan| scan.entries)
            .map(|entry| entry.records)
            .collect();
    let calls: Vec<ModelExchangedV2> = entries
        .iter()
        .flatten()
        .filter_map(|record| ModelExchangedV2::from_record(record).map(Result::unwrap))
        .filter(|call| call.turn == OLD_BUILD_TURN)
        .collect();
    let streamed = calls
        .iter()
        .filter(|call| call.streaming)
        .map(|call| (call.segment, call.index))
        .collect();
    let completed = calls
        .into_iter()
        .filter(|call| !call.streaming)
        .map(|call| ((call.segment, call.index), call))
        .collect();
    let (ledger, _) =
        ledgerwire::ledger::local::open(dir.join("store"), OpenMode::CreateIfMissing).unwrap();
    for records in &entries {
        let stream = StreamKey::new(records[0].stream()).unwrap();
        let records = as_written(records, &completed, &streamed);
        if records.is_empty() {
            continue;
        }
        let head = ledger.head(&stream).await.unwrap();
        ledger
            .append(
                &stream,
                ExpectedPosition::Exactly(head),
                records,
                Durability::Durable,
            )
            .await
            .unwrap();
    }
    drop(ledger);
    trim_journal(&dir.join("store"));
    write_studio_expected(&dir).await;
    let mut dump = Vec::new();
    ledgerwire::log_commands::dump(&open_store(&dir.join("store")).await, None, 0, &mut dump)
        .await
        .unwrap();
    std::fs::write(dir.join("expected-dump.jsonl"), dump).unwrap();
}

#[tokio::test]
async fn the_studio_kinds_golden_log_folds_replays_and_dumps_to_its_committed_state() {
    let golden = Path::new(STUDIO_KINDS_GOLDEN);
    ensure_written(golden, write_studio_kinds_golden).await;
    entries_point_into_the_journal(golden);
    let scratch = studio_golden_folds_and_replays(golden).await;
    let lines = dumps_as_committed(golden, scratch.path()).await;
    // What the golden is for: each kind is there, decoded, in the shapes
    // that matter.
    let of_kind = |kind: u64| -> Vec<&serde_json::Value> {
        lines
            .iter()
            .filter(|line| line["kind"] == kind)
            .map(|line| &line["payload"])
            .collect()
    };
    assert_eq!(of_kind(25).len(), 2, "a request_applied per keyed turn");
    assert!(of_kind(26).iter().all(|agent| agent["name"] == "model"));
    assert_eq!(of_kind(26).len(), of_kind(19).len(), "an agent per claim");
    let old = of_kind(27);
    assert_eq!(old.len(), 1, "turn 2's call, as written before streaming");
    assert!(old[0]["reply"].as_str().unwrap().contains(SECOND_ANSWER));
    let calls = of_kind(28);
    assert!(calls.iter().any(|call| call["streaming"] == true));
    assert!(calls.iter().any(|call| call["partial"] != ""));
    assert!(
        calls
            .iter()
            .any(|call| call["text_cuts"].as_array().is_some_and(|c| !c.is_empty()))
    );
    assert!(lines.iter().all(|line| line.get("payload_error").is_none()));
}
