//! The scenario agent over HTTP: every shipped script loads, and each
//! failure and pause it scripts reaches the client as written.

use std::sync::Arc;

use ledgerwire::agent::scenario::ScenarioAgent;
use serde_json::{Value, json};

use crate::support::{StudioClient, open, quick_studio, scratch, start_with_agent};

const SCENARIOS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/scenarios");

fn events(frames: &[Value]) -> Vec<&str> {
    frames
        .iter()
        .map(|f| f["event"].as_str().unwrap_or("?"))
        .collect()
}

async fn client() -> (
    tempfile::TempDir,
    StudioClient,
    crate::support::RunningServer,
) {
    let agent = ScenarioAgent::load(std::path::Path::new(SCENARIOS)).expect("every script loads");
    assert!(agent.catalogue().count() >= 8);
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let (addr, server) = start_with_agent(ledger, quick_studio(), Arc::new(agent)).await;
    (dir, StudioClient::new(addr, "integrator"), server)
}

fn play(conversation: &str, name: &str) -> Value {
    json!({"kind": "turn.request", "conversation_id": conversation, "message": format!("scenario {name}")})
}

#[tokio::test]
async fn each_retry_mode_of_a_fatal_error_can_be_reached() {
    let (_dir, client, _server) = client().await;
    for (name, mode) in [
        ("fatal-correct-and-retry", "correct_and_retry"),
        ("fatal-refresh-then-retry", "refresh_then_retry"),
        ("fatal-retry-after-delay", "retry_after_delay"),
        ("fatal-do-not-retry", "do_not_retry"),
    ] {
        let frames = client.stream("/api/studio/turn", &play(name, name)).await;
        let last = frames.last().unwrap();
        assert_eq!(last["event"], "error", "{name}");
        assert_eq!(last["error"]["retry"], mode, "{name}");
        assert!(
            !events(&frames).contains(&"done"),
            "{name}: no done after a fatal error"
        );
    }
}

#[tokio::test]
async fn a_failed_step_is_followed_by_success_on_the_same_step_id() {
    let (_dir, client, _server) = client().await;
    let frames = client
        .stream("/api/studio/turn", &play("s1", "step-fails-then-succeeds"))
        .await;
    let statuses: Vec<&str> = frames
        .iter()
        .filter(|f| f["event"] == "activity.step" && f["step_id"] == "step-1")
        .map(|f| f["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["running", "failed", "complete"]);
    assert_eq!(events(&frames).last(), Some(&"done"));
}

#[tokio::test]
async fn a_failed_switch_and_three_questions_pause_as_scripted() {
    let (_dir, client, _server) = client().await;
    let first = client
        .stream("/api/studio/turn", &play("s2", "failed-switch"))
        .await;
    let plan = first.last().unwrap();
    let switch = json!({"kind": "interrupt.response", "conversation_id": "s2",
                        "interrupt_id": plan["interrupt_id"], "decision": "amend",
                        "payload": "use constant 2015 US$"});
    let reoffered = client.stream("/api/studio/interrupt", &switch).await;
    let failed = &reoffered.last().unwrap()["switch_failed"];
    assert_eq!(failed["choice_id"], "r1:basis");
    assert_eq!(failed["retryable"], false);

    let asked = client
        .stream("/api/studio/turn", &play("s3", "three-questions"))
        .await;
    let pause = asked.last().unwrap();
    assert_eq!(pause["questions"].as_array().unwrap().len(), 3);
    let answers = json!({"kind": "interrupt.response", "conversation_id": "s3",
        "interrupt_id": pause["interrupt_id"], "decision": "answer",
        "answers": {"q1": {"kind": "option", "option_id": "o2"}, "q2": {"kind": "skipped"},
                    "q3": {"kind": "text", "text": "whichever is published"}}});
    let done = client.stream("/api/studio/interrupt", &answers).await;
    assert_eq!(events(&done), ["message.complete", "done"]);
}

#[tokio::test]
async fn an_unknown_scenario_lists_the_scripts() {
    let (_dir, client, _server) = client().await;
    let frames = client.stream("/api/studio/turn", &play("s4", "nope")).await;
    assert_eq!(events(&frames), ["message.complete", "done"]);
    assert!(
        frames[0]["text"]
            .as_str()
            .unwrap()
            .contains("long-tool-call")
    );
}
