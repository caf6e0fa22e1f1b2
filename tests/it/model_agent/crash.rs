//! A crash never pays for a model call twice: the real binary, SIGKILLed
//! while its second call of a resumed segment is in flight, is restarted;
//! the retried answer reuses the recorded first call and asks the model
//! only for the one that never completed. `replay --check` then replays
//! the conversation from the log with no model.

use std::time::Duration;

use serde_json::{Value, json};

use super::fake::{FakeModel, Reply};
use super::{TEST_KEY, assert_well_formed, events, step, turn};
use crate::support::{CRASH_LEASE_TTL_MS, ServerProcess, StudioClient, ledgerwire_ok, scratch};

fn start(data: &std::path::Path, fake: &FakeModel) -> ServerProcess {
    let ttl = CRASH_LEASE_TTL_MS.to_string();
    let url = fake.url();
    let args = [
        "--heartbeat",
        "100",
        "--lease-ttl",
        &ttl,
        "--agent",
        "model",
        "--model-url",
        &url,
        "--model-timeout-ms",
        "60000",
    ];
    ServerProcess::start_env(data, &args, &[("LEDGERWIRE_MODEL_API_KEY", TEST_KEY)])
}

#[tokio::test]
async fn a_completed_call_is_reused_after_a_sigkill_and_never_asked_again() {
    let lookup = step(json!({"tool": "find_series", "text": "Chad"}));
    let plan = step(json!({"tool": "plan", "series": "population", "places": ["TCD"]}));
    let ask = step(json!({"tool": "ask_user", "text": "Which years?", "options": ["All of them"]}));
    let fake = FakeModel::start(
        vec![
            Reply::Stream(ask),
            Reply::Stream(lookup),
            Reply::Hang,
            Reply::Stream(plan),
        ],
        None,
    )
    .await;
    let dir = scratch();
    let server = start(dir.path(), &fake);
    let client = StudioClient::new(server.addr, "crash");
    let frames = client
        .stream("/api/studio/turn", &turn("m1", "Population of Chad"))
        .await;
    assert_eq!(events(&frames), ["elicitation.request"]);
    let answer = json!({"kind": "interrupt.response", "conversation_id": "m1",
        "interrupt_id": frames[0]["interrupt_id"], "decision": "answer",
        "answers": {"q1": {"kind": "option", "option_id": "o1"}}});
    let response = client.post("/api/studio/interrupt", &answer).await;
    assert_eq!(response.status(), 200);
    // The third call is the resumed segment's second: its first is
    // recorded (a call starts only after the one before is durable).
    tokio::time::timeout(Duration::from_secs(20), fake.calls_reach(3))
        .await
        .expect("the second call of the resumed segment");
    server.kill();
    drop(response);

    let server = start(dir.path(), &fake);
    let client = StudioClient::new(server.addr, "crash");
    let (status, refusal) = client.json("/api/studio/interrupt", &answer).await;
    assert_eq!(status, 409, "{refusal}");
    let wait = refusal["retry_after_seconds"]
        .as_u64()
        .expect("retry_after_seconds");
    tokio::time::sleep(Duration::from_secs(wait)).await;
    let resumed = client.stream("/api/studio/interrupt", &answer).await;
    assert_well_formed(&resumed);
    assert_eq!(events(&resumed), ["message.delta", "plan.proposed"]);

    let requests = fake.requests();
    assert_eq!(
        requests.len(),
        4,
        "ask, lookup, the lost call, the lost call again"
    );
    let asked = |request: &Value| request["messages"].to_string();
    let lookup_asked = requests
        .iter()
        .filter(|r| asked(r) == asked(&requests[1]))
        .count();
    assert_eq!(lookup_asked, 1, "the completed lookup was asked again");
    assert_eq!(
        asked(&requests[2]),
        asked(&requests[3]),
        "the lost call, asked again"
    );

    server.kill();
    let replay = ledgerwire_ok(&["replay", "--conversation", "m1", "--check"], dir.path());
    assert!(replay.contains("the log reproduces every one"), "{replay}");
    assert!(replay.contains("checking with model 2"), "{replay}");
}
