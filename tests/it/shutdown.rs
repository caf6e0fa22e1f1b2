//! Shutting the real binary down with SIGTERM: a turn on its way to a
//! pause reaches it and the pause is durable, Statewire attaches get a
//! `fin`, a segment still running at the drain timeout ends with the
//! stream-fatal frame and stays resumable, and the process exits 0.

use std::path::Path;

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::support::{EVENT_TIMEOUT, ServerProcess, StudioClient, ledgerwire_ok, scratch};

fn scenarios() -> String {
    format!("{}/fixtures/scenarios", env!("CARGO_MANIFEST_DIR"))
}

fn turn(conversation: &str, message: &str) -> Value {
    json!({"kind": "turn.request", "conversation_id": conversation, "message": message})
}

/// The frames of an SSE response, read as they come.
struct Frames(std::pin::Pin<Box<dyn futures_util::Stream<Item = Value> + Send>>);

impl Frames {
    fn new(response: reqwest::Response) -> Self {
        let events = response
            .bytes_stream()
            .eventsource()
            .filter_map(|event| async move {
                let event = event.ok()?;
                serde_json::from_str::<Value>(&event.data).ok()
            });
        Self(Box::pin(events))
    }

    async fn next(&mut self) -> Option<Value> {
        tokio::time::timeout(EVENT_TIMEOUT, self.0.next())
            .await
            .expect("a frame or the end in time")
    }

    async fn rest(mut self) -> Vec<Value> {
        let mut frames = Vec::new();
        while let Some(frame) = self.next().await {
            frames.push(frame);
        }
        frames
    }
}

/// The records of `data` as `log dump` prints them.
fn dump(data: &Path) -> Vec<Value> {
    ledgerwire_ok(&["log", "dump"], data)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

#[tokio::test]
async fn sigterm_lets_a_turn_reach_its_pause_ends_attaches_and_exits_0() {
    let dir = scratch();
    let scenarios = scenarios();
    let server = ServerProcess::start(
        dir.path(),
        &[
            "--agent",
            "scenario",
            "--scenarios",
            &scenarios,
            "--drain-timeout",
            "20000",
        ],
    );
    let http = reqwest::Client::new();
    let attach = http
        .get(format!("http://{}/threads/other/stream", server.addr))
        .bearer_auth("me")
        .header("Statewire-Version", r#""2026-11-02""#)
        .header("Statewire-Protocol", r#"harness-sdk; version="2026-12-01""#)
        .header("Statewire-Attacher", "tab")
        .send()
        .await
        .expect("attach");
    assert_eq!(attach.status(), 200);
    let mut packets = Frames::new(attach);
    let hello = packets.next().await.expect("the hello");
    assert!(hello.get("syn").is_some(), "{hello}");

    let client = StudioClient::new(server.addr, "me");
    let mut frames = Frames::new(
        client
            .post("/api/studio/turn", &turn("c1", "scenario slow-plan"))
            .await,
    );
    let first = frames.next().await.expect("the first frame");
    assert_eq!(first["event"], "message.delta");
    // The plan is 2 s away: the shutdown starts while it is on its way.
    server.signal_term();
    // The attach's fin says the drain has begun.
    let fin = loop {
        let packet = packets.next().await.expect("a fin before the end");
        if let Some(fin) = packet.get("fin") {
            break fin.clone();
        }
    };
    assert_eq!(fin["code"], "shutting-down", "{fin}");
    // From now on nothing new starts: the listener is closed, or a request on
    // a connection still open is refused for now.
    let late = http
        .post(format!("http://{}/api/studio/turn", server.addr))
        .bearer_auth("me")
        .json(&turn("late", "scenario slow-plan"))
        .send()
        .await;
    if let Ok(response) = late {
        assert_eq!(response.status(), 409);
        let refusal: Value = response.json().await.expect("a refusal");
        assert_eq!(refusal["retry"], "retry_after_delay", "{refusal}");
    }
    let rest = frames.rest().await;
    let last = rest.last().expect("frames after the signal");
    assert_eq!(last["event"], "plan.proposed", "{rest:?}");
    assert!(server.wait().success(), "a drained shutdown exits 0");

    let records = dump(dir.path());
    let kinds: Vec<&str> = records
        .iter()
        .filter_map(|r| r["kind_name"].as_str())
        .collect();
    assert_eq!(kinds.last(), Some(&"studio.segment_released"), "{kinds:?}");
    let released = records.last().unwrap();
    assert_eq!(released["payload"]["end"], "Paused");
    let plan = records
        .iter()
        .find(|r| r["payload"]["frame"]["event"] == "plan.proposed")
        .expect("the pause is in the log");
    assert_eq!(
        plan["payload"]["frame"]["interrupt_id"],
        last["interrupt_id"]
    );
    assert!(
        records
            .iter()
            .all(|r| !r["stream"].as_str().unwrap().ends_with("/late")),
        "no turn started during the drain"
    );
}

#[tokio::test]
async fn a_drain_past_its_timeout_ends_the_stream_with_the_stream_fatal_frame() {
    let dir = scratch();
    let scenarios = scenarios();
    let args = [
        "--agent",
        "scenario",
        "--scenarios",
        &scenarios,
        "--drain-timeout",
        "300",
    ];
    let server = ServerProcess::start(dir.path(), &args);
    let client = StudioClient::new(server.addr, "me");
    let mut frames = Frames::new(
        client
            .post("/api/studio/turn", &turn("c2", "scenario long-tool-call"))
            .await,
    );
    let first = frames.next().await.expect("the first frame");
    assert_eq!(
        (&first["event"], &first["status"]),
        (&json!("activity.step"), &json!("running"))
    );
    server.signal_term();
    let rest = frames.rest().await;
    let last = rest.last().expect("a closing frame");
    assert_eq!(last["event"], "error", "{rest:?}");
    assert_eq!(last["error"]["code"], "transient_unavailable");
    // The turn's first stream: what works next is asking again.
    assert_eq!(last["error"]["retry"], "refresh_then_retry", "{last}");
    assert!(last["seq"].as_u64().unwrap() > first["seq"].as_u64().unwrap());
    assert!(server.wait().success(), "a cut shutdown still exits 0");

    let records = dump(dir.path());
    let released = records
        .iter()
        .rfind(|r| r["kind_name"] == "studio.segment_released")
        .expect("the lease is released");
    assert_eq!(released["payload"]["end"], "Disconnected");
    // A reconnect to the restarted server ends the same way.
    let restarted = ServerProcess::start(dir.path(), &args);
    let client = StudioClient::new(restarted.addr, "me");
    let reconnect = client
        .stream("/api/studio/stream", &json!({"conversation_id": "c2"}))
        .await;
    assert_eq!(reconnect.last().unwrap()["error"], last["error"]);
    assert!(restarted.terminate().success());
}
