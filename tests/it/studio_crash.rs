//! Studio crash tests against the real binary, SIGKILLed mid-conversation:
//! answers are durable before a resumed stream starts, a retried answer
//! waits out the dead segment's lease and then resumes past every seq the
//! dead segment may have sent, and `replay` shows every frame once.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{
    CRASH_LEASE_TTL_MS, ServerProcess, SseEvent, SseReader, StudioClient, ledgerwire_ok, scratch,
};

fn answer(conversation: &str, interrupt: &Value) -> Value {
    json!({"kind": "interrupt.response", "conversation_id": conversation,
           "interrupt_id": interrupt, "decision": "approve"})
}

async fn pause(client: &StudioClient, conversation: &str) -> Value {
    let request =
        json!({"kind": "turn.request", "conversation_id": conversation, "message": "slow chart"});
    let frames = client.stream("/api/studio/turn", &request).await;
    assert_eq!(frames.last().unwrap()["event"], "plan.proposed");
    frames.last().unwrap()["interrupt_id"].clone()
}

/// Retries `body` until the dead segment's lease lapses: first a 409 with
/// `retry_after_seconds`, then (after waiting that long, as a client
/// would) a resumed stream.
async fn retry_after_lease(client: &StudioClient, body: &Value) -> Vec<Value> {
    let (status, refusal) = client.json("/api/studio/interrupt", body).await;
    assert_eq!(status, 409, "{refusal}");
    assert_eq!(refusal["code"], "transient_unavailable");
    let wait = refusal["retry_after_seconds"]
        .as_u64()
        .expect("retry_after_seconds");
    assert!(
        wait >= 1 && wait <= CRASH_LEASE_TTL_MS.div_ceil(1000),
        "{wait}"
    );
    tokio::time::sleep(Duration::from_secs(wait)).await;
    client.stream("/api/studio/interrupt", body).await
}

#[tokio::test]
async fn answers_survive_sigkill_and_retries_resume_past_the_dead_segment() {
    let dir = scratch();
    let server = ServerProcess::start_crashable(dir.path());
    let client = StudioClient::new(server.addr, "crash");

    // 1. Kill during a resumed segment, after it sent some frames.
    let interrupt = pause(&client, "k1").await;
    let response = client
        .post("/api/studio/interrupt", &answer("k1", &interrupt))
        .await;
    assert_eq!(response.status(), 200);
    let mut reader = SseReader::new(response);
    let mut seen = Vec::new();
    while seen.len() < 2 {
        if let Some(SseEvent::Frame { frame, .. }) = reader.next().await {
            seen.push(frame);
        }
    }
    assert_eq!(seen[0]["event"], "plan.approved");
    let last_seen = seen[1]["seq"].as_u64().unwrap();

    // 2. Kill right after an answer is recorded (the 200 came back).
    let second = StudioClient::new(server.addr, "crash");
    let interrupt2 = pause(&second, "k2").await;
    let k1_dead_seq = last_seen;
    let response = second
        .post("/api/studio/interrupt", &answer("k2", &interrupt2))
        .await;
    assert_eq!(response.status(), 200);
    server.kill();
    drop(reader);
    drop(response);

    let server = ServerProcess::start_crashable(dir.path());
    let client = StudioClient::new(server.addr, "crash");
    let resumed = retry_after_lease(&client, &answer("k1", &interrupt)).await;
    let first_seq = resumed[0]["seq"].as_u64().unwrap();
    assert!(
        first_seq >= k1_dead_seq + 1000,
        "{first_seq} vs {k1_dead_seq}"
    );
    assert!(
        resumed.iter().all(|f| f["event"] != "plan.approved"),
        "plan.approved is never sent on a retried resume"
    );
    assert_eq!(resumed.last().unwrap()["event"], "done");

    let resumed = client
        .stream("/api/studio/interrupt", &answer("k2", &interrupt2))
        .await;
    assert_eq!(
        resumed.last().unwrap()["event"],
        "done",
        "the recorded answer resumed"
    );
    // A different answer to an answered pause is a conflict.
    let mut reject = answer("k2", &interrupt2);
    reject["decision"] = json!("reject");
    let (status, body) = client.json("/api/studio/interrupt", &reject).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("edit_conflict"))
    );
    server.kill();

    // 3. Replay from the ledger alone: no seq twice within a segment, and
    // every frame the first client saw is there.
    let transcript = ledgerwire_ok(&["replay", "--conversation", "k1"], dir.path());
    let mut segment_seqs: Vec<Vec<u64>> = Vec::new();
    let mut recorded = Vec::new();
    for line in transcript.lines() {
        if line.starts_with("# segment") && !line.contains("ended") {
            segment_seqs.push(Vec::new());
        } else if let Some(data) = line.strip_prefix("data: ") {
            let frame: Value = serde_json::from_str(data).unwrap();
            let seq = frame["seq"].as_u64().unwrap();
            let current = segment_seqs.last_mut().expect("a frame inside a segment");
            assert!(!current.contains(&seq), "seq {seq} twice in one segment");
            current.push(seq);
            recorded.push(frame);
        }
    }
    assert_eq!(
        segment_seqs.len(),
        3,
        "the pause, the killed resume, the retried resume"
    );
    for frame in &seen {
        assert!(
            recorded.contains(frame),
            "a frame the client saw is missing: {frame}"
        );
    }
    assert!(transcript.contains("# state after"));
}
