//! `replay/`: conversations recorded through the real server with the
//! built-in agent, and what they must replay to. The log alone prints the
//! same transcript, and the agent run again over each recorded segment
//! yields the recorded frames (`ledgerwire replay --check`).

use std::path::Path;
use std::sync::Arc;

use ledgerwire::agent::builtin::BuiltinAgent;
use ledgerwire::agent::minimal::MinimalAgent;
use ledgerwire::ledger::local::OpenMode;
use ledgerwire::log_commands::{ToolError, replay, replay_check, replay_check_recorded};
use serde_json::{Value, json};

use crate::golden::{STUDIO_GOLDEN, copy_dir};
use crate::support::{StudioClient, open, quick_studio, scratch, start_with_agent};

const TOUR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/replay/builtin-tour");
const CONVERSATION: &str = "tour";

fn turn(message: &str) -> Value {
    json!({"kind": "turn.request", "conversation_id": CONVERSATION, "message": message})
}

fn answer(pause: &Value, decision: &str) -> Value {
    json!({"kind": "interrupt.response", "conversation_id": CONVERSATION,
           "interrupt_id": pause["interrupt_id"], "decision": decision})
}

async fn last(client: &StudioClient, path: &str, body: &Value) -> Value {
    let frames = client.stream(path, body).await;
    frames.last().cloned().expect("a frame")
}

/// Records the tour: a plan switched and approved, "the same for Uganda",
/// a card renamed, the canvas asked about, a clarifying question answered
/// into a rejected plan, and a seeded turn.
async fn record_tour(dir: &Path) {
    let (ledger, _) =
        ledgerwire::ledger::local::open(dir.join("store"), OpenMode::CreateIfMissing).unwrap();
    let (addr, server) =
        start_with_agent(ledger, quick_studio(), Arc::new(BuiltinAgent::default())).await;
    let client = StudioClient::new(addr, "tour");
    let interrupt = "/api/studio/interrupt";

    let plan = last(
        &client,
        "/api/studio/turn",
        &turn("How has life expectancy in Kenya changed since 1990?"),
    )
    .await;
    let mut switch = answer(&plan, "amend");
    switch["switch"] = json!({"choice_id": "decision/chart", "option_id": "table"});
    let plan = last(&client, interrupt, &switch).await;
    let done = last(&client, interrupt, &answer(&plan, "approve")).await;
    let card = done["composition"]["blocks"][0].clone();

    let plan = last(
        &client,
        "/api/studio/turn",
        &turn("Now do the same for Uganda"),
    )
    .await;
    last(&client, interrupt, &answer(&plan, "approve")).await;

    let mut rename = turn("Call it Kenya, years lived");
    rename["component_ref"] = json!({"component_id": card["component_id"], "revision": card["revision"], "intent": "edit"});
    last(&client, "/api/studio/turn", &rename).await;

    last(&client, "/api/studio/turn", &turn("What's on my canvas?")).await;

    let asked = last(&client, "/api/studio/turn", &turn("crime in Georgia")).await;
    let mut answers = answer(&asked, "answer");
    let picks: serde_json::Map<String, Value> = asked["questions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| {
            let option = &q["options"][0]["id"];
            (
                q["id"].as_str().unwrap().to_owned(),
                json!({"kind": "option", "option_id": option}),
            )
        })
        .collect();
    answers["answers"] = Value::Object(picks);
    let plan = last(&client, interrupt, &answers).await;
    last(&client, interrupt, &answer(&plan, "reject")).await;

    let mut seeded = turn("Show me this");
    seeded["seed_spec"] = json!([{"spec": {"spec_id": "population",
        "definition": {"measure": "population", "place": {"role": "country", "members": ["country/JPN"]}}},
        "operations": [{"verb": "forecast", "phrase": "project to 2030", "target_year": 2030}]}]);
    let plan = last(&client, "/api/studio/turn", &seeded).await;
    last(&client, interrupt, &answer(&plan, "approve")).await;
    server.stop().await;

    let mut transcript = Vec::new();
    let ledger = open_store(&dir.join("store")).await.unwrap();
    replay(&ledger, CONVERSATION, None, &mut transcript)
        .await
        .unwrap();
    std::fs::write(dir.join("expected-replay.txt"), transcript).unwrap();
}

#[tokio::test]
async fn the_recorded_tour_replays_to_its_transcript_and_the_agent_reproduces_it() {
    let tour = Path::new(TOUR);
    if !tour.join("store").exists() {
        assert!(
            std::env::var_os("LEDGERWIRE_RECORD_REPLAY").is_some(),
            "{TOUR}/store is missing; record it with LEDGERWIRE_RECORD_REPLAY=1 (see replay/README.md)"
        );
        record_tour(tour).await;
    }
    let copy = scratch();
    copy_dir(&tour.join("store"), copy.path());
    let mut transcript = Vec::new();
    let ledger = open_store(copy.path()).await.unwrap();
    replay(&ledger, CONVERSATION, None, &mut transcript)
        .await
        .unwrap();
    drop(ledger);
    // The transcript ends with the folded state, which a fold VERSION bump
    // may change; LEDGERWIRE_WRITE_GOLDEN_STATE=1 rewrites it from the store.
    if std::env::var_os("LEDGERWIRE_WRITE_GOLDEN_STATE").is_some() {
        std::fs::write(tour.join("expected-replay.txt"), &transcript).unwrap();
    }
    let expected = std::fs::read_to_string(tour.join("expected-replay.txt")).unwrap();
    assert_eq!(String::from_utf8(transcript).unwrap(), expected);

    let (checked, report) = check_with(copy.path(), CONVERSATION, &BuiltinAgent::default()).await;
    assert!(checked.is_ok(), "{report}");
    assert!(
        report.ends_with("segment(s): the log reproduces every one\n"),
        "{report}"
    );
    assert!(
        report.lines().filter(|l| l.ends_with(": same")).count() >= 12,
        "{report}"
    );
}

#[tokio::test]
async fn the_check_tells_a_different_agent_from_the_one_that_served() {
    let copy = scratch();
    copy_dir(&Path::new(STUDIO_GOLDEN).join("store"), copy.path());
    let (checked, report) = check_with(copy.path(), "g1", &MinimalAgent::default()).await;
    assert!(
        checked.is_ok(),
        "the minimal agent served the Studio golden: {report}"
    );
    let (refused, report) = check_with(copy.path(), "g1", &BuiltinAgent::default()).await;
    assert!(
        matches!(refused, Err(ToolError::Differs(n)) if n > 0),
        "{report}"
    );
    assert!(report.contains("DIFFERS at agent frame 0"), "{report}");
}

#[tokio::test]
async fn a_live_conversation_checks_the_same_as_it_streamed() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let (addr, server) =
        start_with_agent(ledger, quick_studio(), Arc::new(BuiltinAgent::default())).await;
    let client = StudioClient::new(addr, "live");
    let plan = last(
        &client,
        "/api/studio/turn",
        &turn("Top 5 countries by fertility rate in 2000"),
    )
    .await;
    last(&client, "/api/studio/interrupt", &answer(&plan, "approve")).await;
    server.stop().await;
    let (checked, report) = check_with(dir.path(), CONVERSATION, &BuiltinAgent::default()).await;
    assert!(checked.is_ok(), "{report}");
    assert_eq!(
        report.lines().filter(|l| l.ends_with(": same")).count(),
        2,
        "{report}"
    );
}

#[tokio::test]
async fn the_check_runs_the_agent_each_segment_recorded() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let (addr, server) =
        start_with_agent(ledger, quick_studio(), Arc::new(MinimalAgent::default())).await;
    let client = StudioClient::new(addr, "served");
    let plan = last(&client, "/api/studio/turn", &turn("Population of Kenya")).await;
    assert_eq!(plan["event"], "plan.proposed", "{plan}");
    last(&client, "/api/studio/interrupt", &answer(&plan, "approve")).await;
    server.stop().await;

    let (checked, report) = check_recorded(dir.path()).await;
    assert!(checked.is_ok(), "{report}");
    assert_eq!(report.matches(": same").count(), 2, "{report}");
    assert!(
        report.starts_with("# checking with minimal 1; served by minimal 1\n"),
        "{report}"
    );

    // Another agent is named as such before it is found to differ.
    let (refused, report) = check_with(dir.path(), CONVERSATION, &BuiltinAgent::default()).await;
    assert!(matches!(refused, Err(ToolError::Differs(_))), "{report}");
    assert!(
        report.contains("the agent checking is not the one recorded"),
        "{report}"
    );
}

#[tokio::test]
async fn a_store_from_before_recorded_agents_is_checked_with_the_builtin_and_says_so() {
    let copy = scratch();
    copy_dir(&Path::new(TOUR).join("store"), copy.path());
    let (checked, report) = check_recorded(copy.path()).await;
    assert!(checked.is_ok(), "{report}");
    assert!(
        report.starts_with("# no agent is recorded for this conversation"),
        "{report}"
    );
}

/// `replay --check` with the agent the conversation recorded: its outcome
/// and what it printed.
async fn check_recorded(store: &Path) -> (Result<(), ToolError>, String) {
    let scenarios = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/scenarios");
    let mut report = Vec::new();
    let checked = match open_store(store).await {
        Ok(ledger) => {
            replay_check_recorded(&ledger, CONVERSATION, None, &scenarios, &mut report).await
        }
        Err(error) => Err(error),
    };
    (checked, String::from_utf8(report).expect("UTF-8"))
}

/// `replay --check` with `agent`: its outcome and what it printed.
async fn check_with(
    store: &Path,
    conversation: &str,
    agent: &dyn ledgerwire::agent::Agent,
) -> (Result<(), ToolError>, String) {
    let mut report = Vec::new();
    let checked = match open_store(store).await {
        Ok(ledger) => replay_check(&ledger, conversation, None, agent, &mut report).await,
        Err(error) => Err(error),
    };
    (checked, String::from_utf8(report).expect("UTF-8"))
}

/// The local store in `dir`, opened as `replay` opens it.
async fn open_store(dir: &Path) -> Result<ledgerwire::ledger::Ledger, ToolError> {
    let choice = ledgerwire::store::StoreChoice::Local(dir.to_path_buf());
    Ok(choice.open(ledgerwire::store::Opening::Existing).await?)
}
