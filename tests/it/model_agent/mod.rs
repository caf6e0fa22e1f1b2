//! The model-backed agent (`serve --agent model`) against a fake model on
//! loopback: recorded exchanges give exact frames, hostile replies still
//! end every stream on one closing frame, `/cancel` hangs up on the
//! model, a crash never pays for a completed call twice, and every
//! conversation replays from the log with no model.

mod crash;
mod fake;
mod hostile;
mod property;
mod streaming;
mod tiny;
mod tls;

use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use ledgerwire::agent::model::{
    CallError, ModelAgent, ModelArgs, ModelSettings, Pieces, Transport,
};
use ledgerwire::ledger::Ledger;
use ledgerwire::studio::rerun::{CheckOutcome, check_segments};
use ledgerwire::wire::frame::Frame;
use serde_json::{Value, json};

use crate::support::{RunningServer, StudioClient, open, quick_studio, scratch, start_with_agent};
use fake::{FakeModel, Reply};

/// The key the tests configure: it must appear in no record.
const TEST_KEY: &str = "sk-test-never-recorded";

/// A recorded conversation from `fixtures/model/`: its question and
/// replies.
fn recorded(name: &str) -> (String, Vec<Reply>) {
    let path = format!("{}/fixtures/model/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let fixture: Value = serde_json::from_str(&text).expect("a fixture is JSON");
    let replies = fixture["replies"]
        .as_array()
        .expect("replies")
        .iter()
        .map(|reply| Reply::Stream(in_schema_order(reply)))
        .collect();
    (
        fixture["question"].as_str().expect("question").to_owned(),
        replies,
    )
}

/// A served step reply with these members over an empty step.
pub(crate) fn step(members: Value) -> String {
    let mut reply = json!({"tool": "answer", "text": "", "series": "", "places": [],
        "from_year": 0, "to_year": 0, "operation": "trend", "chart": "auto", "options": []});
    for (key, value) in members.as_object().expect("an object") {
        reply[key] = value.clone();
    }
    in_schema_order(&reply)
}

/// A reply object as a model following the schema writes it: its members
/// in the schema's order (`tool` first), any others after them.
pub(crate) fn in_schema_order(reply: &Value) -> String {
    use ledgerwire::agent::model::step::STEP_MEMBERS;
    let object = reply.as_object().expect("an object");
    let mut names: Vec<&String> = object.keys().collect();
    names.sort_by_key(|name| {
        STEP_MEMBERS
            .iter()
            .position(|member| member == name)
            .unwrap_or(STEP_MEMBERS.len())
    });
    let members: Vec<String> = names
        .into_iter()
        .map(|name| format!("{}:{}", json!(name), object[name.as_str()]))
        .collect();
    format!("{{{}}}", members.join(","))
}

/// A server whose agent calls `fake`, and what the test reads it with.
pub(crate) struct Rig {
    pub _dir: tempfile::TempDir,
    pub ledger: Ledger,
    pub client: StudioClient,
    pub fake: FakeModel,
    pub _server: RunningServer,
}

pub(crate) fn model_args(url: String, timeout_ms: u64) -> ModelArgs {
    ModelArgs {
        url: Some(url),
        model: "fake".into(),
        timeout_ms,
        max_tokens: 256,
        steps: 8,
        concurrency: 4,
        ca: None,
    }
}

/// A server with the model agent over a fake answering `replies`, then
/// `otherwise`; each call may take `timeout_ms`.
pub(crate) async fn rig(replies: Vec<Reply>, otherwise: Option<Reply>, timeout_ms: u64) -> Rig {
    let fake = FakeModel::start(replies, otherwise).await;
    let settings = ModelSettings::new(&model_args(fake.url(), timeout_ms), Some(TEST_KEY.into()))
        .expect("settings");
    let agent = ModelAgent::connect(settings).expect("client");
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let (addr, server) = start_with_agent(ledger.clone(), quick_studio(), Arc::new(agent)).await;
    Rig {
        _dir: dir,
        ledger,
        client: StudioClient::new(addr, "model"),
        fake,
        _server: server,
    }
}

pub(crate) fn turn(conversation: &str, message: &str) -> Value {
    json!({"kind": "turn.request", "conversation_id": conversation, "message": message})
}

pub(crate) fn events(frames: &[Value]) -> Vec<&str> {
    frames
        .iter()
        .map(|f| f["event"].as_str().unwrap_or("?"))
        .collect()
}

/// Every frame is one the contract's types read, seq only grows, and the
/// stream ends on its one closing frame.
pub(crate) fn assert_well_formed(frames: &[Value]) {
    let parsed: Vec<Frame> = frames
        .iter()
        .map(|frame| {
            serde_json::from_value(frame.clone())
                .unwrap_or_else(|e| panic!("an invalid frame {frame}: {e}"))
        })
        .collect();
    let last = parsed.last().expect("at least one frame");
    assert!(last.ends_stream(), "no closing frame: {:?}", events(frames));
    assert_eq!(
        parsed.iter().filter(|f| f.ends_stream()).count(),
        1,
        "{:?}",
        events(frames)
    );
    let seqs: Vec<u64> = parsed.iter().map(Frame::seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
}

/// `replay --check` of every conversation in the ledger, with no model:
/// each segment's frames come back the same from its recorded exchanges.
pub(crate) async fn assert_replays_without_a_model(ledger: &Ledger) {
    let agent = ModelAgent::replay();
    let streams: Vec<_> = ledger.streams().collect().await;
    let mut checked = 0;
    for stream in streams {
        let stream = stream.expect("stream");
        if !stream.as_str().starts_with("studio/") {
            continue;
        }
        let records = ledger.read_to_end(&stream, 0).await.expect("records");
        for check in check_segments(records, &agent).await.expect("fold") {
            assert_eq!(check.outcome, CheckOutcome::Same, "{stream}: {check:?}");
            checked += 1;
        }
    }
    assert!(checked > 0, "no segment was checked");
}

/// Every record's bytes, for looking for what must not be there.
pub(crate) async fn all_record_bytes(ledger: &Ledger) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut scan = ledger.scan_global(0);
    while let Some(record) = scan.next().await {
        bytes.extend_from_slice(record.expect("record").payload());
    }
    bytes
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test]
async fn a_recorded_conversation_plans_then_draws_its_card_from_the_data() {
    let (question, replies) = recorded("kenya-since-1990");
    let rig = rig(replies, None, 5_000).await;
    let frames = rig
        .client
        .stream("/api/studio/turn", &turn("k", &question))
        .await;
    assert_well_formed(&frames);
    assert_eq!(events(&frames), ["message.delta", "plan.proposed"]);
    let plan = &frames[1];
    assert!(
        plan["summary"].as_str().unwrap().contains("Kenya"),
        "{plan}"
    );
    assert_eq!(rig.fake.calls(), 2);
    let first = &rig.fake.requests()[0];
    assert_eq!(first["response_format"]["type"], "json_schema");
    assert_eq!(first["stream"], true);
    assert_eq!(
        first["response_format"]["json_schema"]["schema"]["additionalProperties"],
        false
    );
    // The second call carries what the server found for the first.
    let second = rig.fake.requests()[1]["messages"].to_string();
    assert!(second.contains("place KEN: Kenya"), "{second}");

    let approve = json!({"kind": "interrupt.response", "conversation_id": "k",
        "interrupt_id": plan["interrupt_id"], "decision": "approve"});
    let run = rig.client.stream("/api/studio/interrupt", &approve).await;
    assert_well_formed(&run);
    let created = run
        .iter()
        .find(|f| f["event"] == "component.created")
        .expect("a card");
    assert_eq!(created["type"], "line_chart");
    assert_eq!(run.last().unwrap()["event"], "done");
    assert_eq!(
        rig.fake.calls(),
        2,
        "an approved plan runs without the model"
    );

    let log = all_record_bytes(&rig.ledger).await;
    assert!(contains(&log, "studio_step"), "the requests are recorded");
    assert!(!contains(&log, TEST_KEY), "the key reached the log");
    assert_replays_without_a_model(&rig.ledger).await;
}

#[tokio::test]
async fn a_question_the_model_asks_resumes_with_the_users_answer() {
    let (question, replies) = recorded("ask-then-plan");
    let rig = rig(replies, None, 5_000).await;
    let frames = rig
        .client
        .stream("/api/studio/turn", &turn("g", &question))
        .await;
    assert_well_formed(&frames);
    assert_eq!(events(&frames), ["elicitation.request"]);
    let ask = &frames[0];
    assert_eq!(ask["questions"][0]["options"].as_array().unwrap().len(), 2);
    let answer = json!({"kind": "interrupt.response", "conversation_id": "g",
        "interrupt_id": ask["interrupt_id"], "decision": "answer",
        "answers": {"q1": {"kind": "option", "option_id": "o1"}}});
    let resumed = rig.client.stream("/api/studio/interrupt", &answer).await;
    assert_well_formed(&resumed);
    assert_eq!(events(&resumed), ["message.delta", "plan.proposed"]);
    let asked = rig.fake.requests()[1]["messages"].to_string();
    assert!(
        asked.contains("Georgia, the country: population"),
        "{asked}"
    );
    assert_replays_without_a_model(&rig.ledger).await;
}

#[tokio::test]
async fn cancel_hangs_up_on_the_model_while_heartbeats_flow() {
    let rig = rig(vec![Reply::Hang], None, 60_000).await;
    let response = rig
        .client
        .post("/api/studio/turn", &turn("c", "Population of Chad"))
        .await;
    assert_eq!(response.status(), 200);
    let mut reader = crate::support::SseReader::new(response);
    let mut heartbeats = 0;
    while heartbeats < 2 {
        match reader.next().await {
            Some(crate::support::SseEvent::Comment(text)) if text == "ka" => heartbeats += 1,
            Some(crate::support::SseEvent::Frame { frame, .. }) => panic!("a frame {frame}"),
            Some(_) => {}
            None => panic!("the stream closed while the model thought"),
        }
    }
    cancel_and_see_the_model_hang_up(&rig, &mut reader, "c").await;
    assert_eq!(rig.fake.calls(), 1);
}

/// Posts `/cancel` for `conversation`: its stream ends on the cancelled
/// error, and the model sees its call dropped.
pub(crate) async fn cancel_and_see_the_model_hang_up(
    rig: &Rig,
    reader: &mut crate::support::SseReader,
    conversation: &str,
) {
    let cancel = json!({"kind": "turn.cancel", "conversation_id": conversation});
    let (status, _) = rig.client.json("/api/studio/cancel", &cancel).await;
    assert_eq!(status, 204);
    let frames = reader.frames().await;
    assert_eq!(frames.last().unwrap()["error"]["code"], "cancelled");
    tokio::time::timeout(crate::support::EVENT_TIMEOUT, rig.fake.hung_up())
        .await
        .expect("the model call was aborted");
}

/// `text` cut into pieces at the byte offsets `cuts` (each taken modulo
/// the length, kept where it falls between characters).
pub(crate) fn pieces(text: &str, cuts: &[usize]) -> Vec<String> {
    let mut at: Vec<usize> = cuts
        .iter()
        .map(|c| c % (text.len() + 1))
        .filter(|c| text.is_char_boundary(*c))
        .collect();
    at.sort_unstable();
    at.dedup();
    let mut pieces = Vec::new();
    let mut from = 0;
    for to in at.into_iter().chain([text.len()]) {
        pieces.push(text[from..to].to_owned());
        from = to;
    }
    pieces
}

/// A model that writes each reply in the pieces given, one at a time,
/// then ends it (`Some`: with that failure).
pub(crate) struct Scripted(pub Mutex<Vec<(Vec<String>, Option<CallError>)>>);

impl Transport for Scripted {
    fn call(&self, _body: String) -> Pieces {
        let mut script = self.0.lock().expect("script");
        let (pieces, end) = if script.is_empty() {
            (Vec::new(), Some(CallError::Dropped))
        } else {
            script.remove(0)
        };
        let items: Vec<Result<String, CallError>> =
            pieces.into_iter().map(Ok).chain(end.map(Err)).collect();
        Box::pin(futures_util::stream::iter(items).then(|item| async {
            tokio::task::yield_now().await;
            item
        }))
    }
}

#[tokio::test]
async fn a_plan_changed_in_words_goes_back_to_the_model_and_comes_out_versioned() {
    let (question, mut replies) = recorded("kenya-since-1990");
    replies.push(Reply::Stream(step(json!({"tool": "plan",
        "series": "life_expectancy", "places": ["UGA"], "from_year": 1990, "chart": "line_chart"}))));
    let rig = rig(replies, None, 5_000).await;
    let frames = rig
        .client
        .stream("/api/studio/turn", &turn("a", &question))
        .await;
    let plan = frames.last().expect("a plan").clone();
    let amend = json!({"kind": "interrupt.response", "conversation_id": "a",
        "interrupt_id": plan["interrupt_id"], "decision": "amend", "payload": "Uganda instead"});
    let amended = rig.client.stream("/api/studio/interrupt", &amend).await;
    assert_well_formed(&amended);
    assert_eq!(
        events(&amended),
        ["message.delta", "plan.versioned", "plan.proposed"]
    );
    assert_eq!(amended[1]["supersedes"], plan["plan_version_id"]);
    assert_eq!(amended[2]["version"], 2);
    assert!(amended[2]["summary"].as_str().unwrap().contains("Uganda"));
    let asked = rig.fake.requests()[2]["messages"].to_string();
    assert!(asked.contains("Uganda instead"), "{asked}");
    assert_replays_without_a_model(&rig.ledger).await;
}
