//! The real binary SIGKILLed twice in one turn: the client must never
//! receive a seq twice, and the log must stay verifiable.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{ServerProcess, SseEvent, SseReader, StudioClient, ledgerwire_ok, scratch};

/// Posts `body` to `/interrupt`, waiting out a live lease as a client
/// would (a 409 names how long), and returns the stream once it opens.
async fn resume_when_free(client: &StudioClient, body: &Value) -> SseReader {
    for _ in 0..5 {
        let response = client.post("/api/studio/interrupt", body).await;
        if response.status() == 200 {
            return SseReader::new(response);
        }
        let refusal: Value = response.json().await.expect("a JSON refusal");
        assert_eq!(refusal["code"], "transient_unavailable", "{refusal}");
        let wait = refusal["retry_after_seconds"].as_u64().expect("a delay");
        tokio::time::sleep(Duration::from_secs(wait)).await;
    }
    panic!("the lease never lapsed");
}

/// Reads frames until one with `event` arrives; every seq read.
async fn read_until(reader: &mut SseReader, event: &str) -> Vec<u64> {
    let mut seqs = Vec::new();
    while let Some(next) = reader.next().await {
        if let SseEvent::Frame { frame, .. } = next {
            seqs.push(frame["seq"].as_u64().expect("a seq"));
            if frame["event"] == event {
                return seqs;
            }
        }
    }
    panic!("the stream closed before {event}: {seqs:?}");
}

#[tokio::test]
async fn two_kills_in_one_turn_never_repeat_a_seq() {
    let dir = scratch();
    let server = ServerProcess::start_crashable(dir.path());
    let client = StudioClient::new(server.addr, "crash");
    let request =
        json!({"kind": "turn.request", "conversation_id": "twice", "message": "slow chart"});
    let frames = client.stream("/api/studio/turn", &request).await;
    let pause = frames.last().expect("a plan");
    assert_eq!(pause["event"], "plan.proposed");
    let mut received: Vec<u64> = frames.iter().filter_map(|f| f["seq"].as_u64()).collect();
    let approve = json!({"kind": "interrupt.response", "conversation_id": "twice",
        "interrupt_id": pause["interrupt_id"], "decision": "approve"});

    // Killed when the first step arrives.
    let mut reader = resume_when_free(&client, &approve).await;
    received.extend(read_until(&mut reader, "activity.step").await);
    server.kill();

    // Restarted, the lease waited out, the identical answer re-posted:
    // killed again as soon as its first frame arrives.
    let server = ServerProcess::start_crashable(dir.path());
    let client = StudioClient::new(server.addr, "crash");
    let mut reader = resume_when_free(&client, &approve).await;
    received.extend(read_until(&mut reader, "activity.step").await);
    server.kill();

    let server = ServerProcess::start_crashable(dir.path());
    let client = StudioClient::new(server.addr, "crash");
    let mut reader = resume_when_free(&client, &approve).await;
    received.extend(read_until(&mut reader, "done").await);
    server.kill();

    let mut unique = received.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), received.len(), "a seq repeated: {received:?}");
    assert!(received.windows(2).all(|w| w[0] < w[1]), "{received:?}");
    let verify = ledgerwire_ok(&["log", "verify"], dir.path());
    assert!(verify.starts_with("ok:"), "{verify}");
}

/// The shipped `server-exit` scenario against the real binary: the server
/// exits mid-segment as a crash would; restarted, a reconnect carries
/// heartbeats until the dead lease lapses and then ends on an error frame
/// saying to re-post, and the re-posted answer finishes the turn.
#[tokio::test]
async fn after_the_server_died_mid_segment_a_reconnect_ends_and_the_repost_finishes() {
    let dir = scratch();
    let scenarios = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/scenarios");
    let args = [
        "--heartbeat",
        "100",
        "--lease-ttl",
        "2000",
        "--agent",
        "scenario",
        "--scenarios",
        scenarios,
    ];
    let server = ServerProcess::start(dir.path(), &args);
    let client = StudioClient::new(server.addr, "front-end");
    let request = json!({"kind": "turn.request", "conversation_id": "exit", "message": "scenario server-exit"});
    let frames = client.stream("/api/studio/turn", &request).await;
    let plan = frames.last().unwrap().clone();
    let approve = json!({"kind": "interrupt.response", "conversation_id": "exit",
        "interrupt_id": plan["interrupt_id"], "decision": "approve"});
    let seen = client.stream("/api/studio/interrupt", &approve).await;
    assert_eq!(seen.last().unwrap()["event"], "activity.step", "{seen:?}");
    let status = server.wait();
    assert_eq!(status.code(), Some(70), "the scripted exit");

    let server = ServerProcess::start(dir.path(), &args);
    let client = StudioClient::new(server.addr, "front-end");
    let reconnect = json!({"conversation_id": "exit", "after_seq": plan["seq"]});
    let mut reader = SseReader::new(client.post("/api/studio/stream", &reconnect).await);
    let (mut heartbeats, mut replayed) = (0, Vec::new());
    while let Some(event) = reader.next().await {
        match event {
            SseEvent::Comment(_) => heartbeats += 1,
            SseEvent::Frame { frame, .. } => replayed.push(frame),
        }
    }
    assert!(heartbeats >= 1, "heartbeats while the dead lease ran");
    let closing = replayed.last().expect("a closing frame");
    assert_eq!(closing["error"]["retry"], "retry_after_delay", "{closing}");
    let resumed = client.stream("/api/studio/interrupt", &approve).await;
    assert_eq!(resumed.last().unwrap()["event"], "done");
    let mut seqs: Vec<u64> = replayed
        .iter()
        .chain(&resumed)
        .map(|f| f["seq"].as_u64().unwrap())
        .collect();
    let count = seqs.len();
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs.len(), count, "no seq twice");
    server.kill();
}
