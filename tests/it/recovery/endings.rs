//! Every way a segment can end, seen through the reconnect extension
//! (`POST /api/studio/stream`): on its own closing or pausing frame, sent
//! again to a client that has it; after a cut stream, a client that left,
//! a cancel, or an owner that died, on an error frame whose retry mode
//! says what works next; and with `keep_on_disconnect`, a reconnect that
//! picks the segment up live. The scripted faults (cut, stall, exit) are
//! the shipped scenarios a front-end team would use.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ledgerwire::agent::scenario::ScenarioAgent;
use ledgerwire::studio::config::StudioConfig;
use serde_json::{Value, json};

use crate::support::{
    RunningServer, SseEvent, SseReader, StudioClient, open, quick_studio, scratch, start_with_agent,
};

const SCENARIOS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/scenarios");

async fn scenario_server(
    dir: &Path,
    scenarios: &Path,
    config: StudioConfig,
) -> (StudioClient, RunningServer) {
    let agent = ScenarioAgent::load(scenarios).expect("the scripts load");
    let (ledger, _) = open(dir);
    let (addr, server) = start_with_agent(ledger, config, Arc::new(agent)).await;
    (StudioClient::new(addr, "front-end"), server)
}

async fn minimal_server(dir: &Path, config: StudioConfig) -> (StudioClient, RunningServer) {
    let agent = ledgerwire::agent::minimal::MinimalAgent {
        step_ms: 5,
        slow_step_ms: 300,
    };
    let (ledger, _) = open(dir);
    let (addr, server) = start_with_agent(ledger, config, Arc::new(agent)).await;
    (StudioClient::new(addr, "front-end"), server)
}

fn turn(conversation: &str, message: &str) -> Value {
    json!({"kind": "turn.request", "conversation_id": conversation, "message": message})
}

fn approve(conversation: &str, pause: &Value) -> Value {
    json!({"kind": "interrupt.response", "conversation_id": conversation,
        "interrupt_id": pause["interrupt_id"], "decision": "approve"})
}

fn reconnect(conversation: &str, after_seq: u64) -> Value {
    json!({"conversation_id": conversation, "after_seq": after_seq})
}

fn seq(frame: &Value) -> u64 {
    frame["seq"].as_u64().expect("a seq")
}

/// Starts a turn and returns its pausing frame.
async fn pause(client: &StudioClient, conversation: &str, message: &str) -> Value {
    let frames = client
        .stream("/api/studio/turn", &turn(conversation, message))
        .await;
    let last = frames.last().expect("frames").clone();
    assert_eq!(last["event"], "plan.proposed", "{frames:?}");
    last
}

/// Every event until the stream closes, with when it arrived.
async fn timed(reader: &mut SseReader) -> Vec<(Instant, SseEvent)> {
    let mut events = Vec::new();
    while let Some(event) = reader.next().await {
        events.push((Instant::now(), event));
    }
    events
}

fn frames_of(events: &[(Instant, SseEvent)]) -> Vec<Value> {
    events
        .iter()
        .filter_map(|(_, event)| match event {
            SseEvent::Frame { frame, .. } => Some(frame.clone()),
            SseEvent::Comment(_) => None,
        })
        .collect()
}

#[tokio::test]
async fn a_closed_turn_reconnects_to_its_own_last_frame_even_when_the_client_has_it() {
    let dir = scratch();
    let (client, _server) = minimal_server(dir.path(), quick_studio()).await;
    // Paused: the plan comes again.
    let plan = pause(&client, "closed", "GDP of Chad").await;
    let again = client
        .stream("/api/studio/stream", &reconnect("closed", seq(&plan)))
        .await;
    assert_eq!(again, std::slice::from_ref(&plan));
    // Done: `done` comes again, at its own seq.
    let frames = client
        .stream("/api/studio/interrupt", &approve("closed", &plan))
        .await;
    let done = frames.last().unwrap();
    assert_eq!(done["event"], "done");
    let again = client
        .stream("/api/studio/stream", &reconnect("closed", seq(done)))
        .await;
    assert_eq!(again, std::slice::from_ref(done));

    // A stream-fatal error ends the reconnect too.
    let dir = scratch();
    let (client, _server) = scenario_server(dir.path(), Path::new(SCENARIOS), quick_studio()).await;
    let frames = client
        .stream(
            "/api/studio/turn",
            &turn("fatal", "scenario fatal-do-not-retry"),
        )
        .await;
    let replayed = client
        .stream("/api/studio/stream", &reconnect("fatal", 0))
        .await;
    assert_eq!(replayed, frames);
    assert_eq!(replayed.last().unwrap()["error"]["retry"], "do_not_retry");
}

#[tokio::test]
async fn a_cancelled_segment_reconnects_to_its_cancelled_error() {
    let dir = scratch();
    let (client, _server) = minimal_server(dir.path(), quick_studio()).await;
    let plan = pause(&client, "stop", "slow chart").await;
    let response = client
        .post("/api/studio/interrupt", &approve("stop", &plan))
        .await;
    let mut running = SseReader::new(response);
    assert!(matches!(running.next().await, Some(SseEvent::Frame { .. })));
    let cancel = json!({"kind": "turn.cancel", "conversation_id": "stop"});
    assert_eq!(
        client.post("/api/studio/cancel", &cancel).await.status(),
        204
    );
    let live = frames_of(&timed(&mut running).await);
    let replayed = client
        .stream("/api/studio/stream", &reconnect("stop", seq(&plan)))
        .await;
    let last = replayed.last().unwrap();
    assert_eq!(last["error"]["code"], "cancelled");
    assert_eq!(last["error"]["retry"], "do_not_retry");
    assert_eq!(last, live.last().unwrap());
}

#[tokio::test]
async fn a_cut_stream_reconnects_to_an_error_saying_repost_and_the_repost_finishes() {
    let dir = scratch();
    let (client, _server) = scenario_server(dir.path(), Path::new(SCENARIOS), quick_studio()).await;
    let plan = pause(&client, "cut", "scenario cut-stream").await;
    let answer = approve("cut", &plan);
    let mut cut = SseReader::new(client.post("/api/studio/interrupt", &answer).await);
    let seen = frames_of(&timed(&mut cut).await);
    assert_eq!(
        seen.iter()
            .map(|f| f["event"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["plan.approved", "activity.step"],
        "the stream is cut after the first step, with no closing frame"
    );
    let replayed = client
        .stream("/api/studio/stream", &reconnect("cut", seq(&plan)))
        .await;
    assert_eq!(replayed[..2], seen[..]);
    let closing = &replayed[2];
    assert_eq!(closing["error"]["code"], "transient_unavailable");
    assert_eq!(closing["error"]["retry"], "retry_after_delay");
    assert!(seq(closing) > seq(&seen[1]));
    // The identical answer again: resumed past the closing frame's seq, and
    // the retry plays without the cut.
    let resumed = client.stream("/api/studio/interrupt", &answer).await;
    assert_eq!(resumed.last().unwrap()["event"], "done");
    assert!(seq(&resumed[0]) > seq(closing), "{resumed:?}");
}

#[tokio::test]
async fn a_first_segment_the_client_left_reconnects_to_an_error_saying_ask_again() {
    let dir = scratch();
    let (client, _server) = scenario_server(dir.path(), Path::new(SCENARIOS), quick_studio()).await;
    let response = client
        .post("/api/studio/turn", &turn("left", "scenario long-tool-call"))
        .await;
    let mut reader = SseReader::new(response);
    assert!(matches!(reader.next().await, Some(SseEvent::Frame { .. })));
    drop(reader);
    // The reconnect follows until the segment notices and releases.
    let replayed = client
        .stream("/api/studio/stream", &reconnect("left", 0))
        .await;
    let closing = replayed.last().unwrap();
    assert_eq!(closing["event"], "error", "{replayed:?}");
    assert_eq!(closing["error"]["retry"], "refresh_then_retry");
}

#[tokio::test]
async fn a_dead_owner_keeps_a_reconnect_in_heartbeats_until_its_lease_lapses_then_ends_it() {
    let dir = scratch();
    // In a shared process the exit fault kills the segment as a crash
    // would: the lease stays held until it lapses.
    let (client, _server) = scenario_server(dir.path(), Path::new(SCENARIOS), quick_studio()).await;
    let plan = pause(&client, "exit", "scenario server-exit").await;
    let answer = approve("exit", &plan);
    let mut dying = SseReader::new(client.post("/api/studio/interrupt", &answer).await);
    let seen = frames_of(&timed(&mut dying).await);
    let died = Instant::now();
    let (status, refusal) = client.json("/api/studio/interrupt", &answer).await;
    assert_eq!(
        status, 409,
        "the dead segment's lease still runs: {refusal}"
    );
    let response = client
        .post(
            "/api/studio/stream",
            &reconnect("exit", seq(seen.last().unwrap())),
        )
        .await;
    let events = timed(&mut SseReader::new(response)).await;
    let heartbeats = events
        .iter()
        .filter(|(_, e)| matches!(e, SseEvent::Comment(_)))
        .count();
    assert!(
        heartbeats >= 3,
        "heartbeats while the lease ran: {heartbeats}"
    );
    let closing = frames_of(&events).pop().expect("a closing frame");
    assert_eq!(closing["error"]["retry"], "retry_after_delay", "{closing}");
    let lease = Duration::from_millis(quick_studio().lease_ttl_ms);
    assert!(died.elapsed() >= lease - Duration::from_millis(200));
    let resumed = client.stream("/api/studio/interrupt", &answer).await;
    assert_eq!(resumed.last().unwrap()["event"], "done");
    assert!(seq(&resumed[0]) > seq(&closing));
}

#[tokio::test]
async fn a_stall_sends_nothing_past_several_heartbeats_then_the_stream_goes_on() {
    // The shipped script stalls 12 s against the default 5 s heartbeat; the
    // same script here stalls 1 s against the tests' 100 ms.
    let scripts = scratch();
    let shipped = std::fs::read_to_string(Path::new(SCENARIOS).join("stall-stream.json")).unwrap();
    assert!(shipped.contains("\"stall_ms\": 12000"));
    let quick = shipped.replace("\"stall_ms\": 12000", "\"stall_ms\": 1000");
    std::fs::write(scripts.path().join("stall-stream.json"), quick).unwrap();
    let dir = scratch();
    let (client, _server) = scenario_server(dir.path(), scripts.path(), quick_studio()).await;
    let plan = pause(&client, "stall", "scenario stall-stream").await;
    let response = client
        .post("/api/studio/interrupt", &approve("stall", &plan))
        .await;
    let events = timed(&mut SseReader::new(response)).await;
    let longest = events
        .windows(2)
        .map(|pair| pair[1].0 - pair[0].0)
        .max()
        .unwrap();
    assert!(longest >= Duration::from_millis(950), "{longest:?}");
    assert_eq!(frames_of(&events).last().unwrap()["event"], "done");
}

#[tokio::test]
async fn kept_on_disconnect_a_segment_runs_on_and_a_reconnect_gets_every_frame_once_in_order() {
    let dir = scratch();
    let config = StudioConfig {
        keep_on_disconnect: true,
        ..quick_studio()
    };
    let (client, _server) = minimal_server(dir.path(), config).await;
    let plan = pause(&client, "kept", "slow chart").await;
    let response = client
        .post("/api/studio/interrupt", &approve("kept", &plan))
        .await;
    let mut first = SseReader::new(response);
    let mut seen = Vec::new();
    while seen.len() < 2 {
        if let Some(SseEvent::Frame { frame, .. }) = first.next().await {
            seen.push(frame);
        }
    }
    drop(first);
    let rest = client
        .stream(
            "/api/studio/stream",
            &reconnect("kept", seq(seen.last().unwrap())),
        )
        .await;
    seen.extend(rest);
    assert_eq!(seen.last().unwrap()["event"], "done", "{seen:?}");
    // Every frame of the resumed turn, as recorded, once and in order.
    let all = client
        .stream("/api/studio/stream", &reconnect("kept", seq(&plan)))
        .await;
    assert_eq!(seen, all);
    let seqs: Vec<u64> = seen.iter().map(seq).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");

    // `/cancel` still stops a segment nobody listens to.
    let plan = pause(&client, "kept-stop", "slow chart").await;
    let mut reader = SseReader::new(
        client
            .post("/api/studio/interrupt", &approve("kept-stop", &plan))
            .await,
    );
    assert!(matches!(reader.next().await, Some(SseEvent::Frame { .. })));
    drop(reader);
    let cancel = json!({"kind": "turn.cancel", "conversation_id": "kept-stop"});
    assert_eq!(
        client.post("/api/studio/cancel", &cancel).await.status(),
        204
    );
    let replayed = client
        .stream("/api/studio/stream", &reconnect("kept-stop", seq(&plan)))
        .await;
    assert_eq!(replayed.last().unwrap()["error"]["code"], "cancelled");
}
