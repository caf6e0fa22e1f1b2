//! The real binary SIGKILLed twice in one turn: the client must never
//! receive a seq twice, and the log must stay verifiable.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{ServerProcess, SseEvent, SseReader, StudioClient, ledgerwire_ok, scratch};

/// Lease of these servers, in milliseconds: short enough to wait out.
const LEASE_TTL_MS: u64 = 2_000;

fn start(data: &std::path::Path) -> ServerProcess {
    let ttl = LEASE_TTL_MS.to_string();
    ServerProcess::start(
        data,
        &[
            "--heartbeat",
            "100",
            "--lease-ttl",
            &ttl,
            "--agent",
            "minimal",
        ],
    )
}

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
    let server = start(dir.path());
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
    let server = start(dir.path());
    let client = StudioClient::new(server.addr, "crash");
    let mut reader = resume_when_free(&client, &approve).await;
    received.extend(read_until(&mut reader, "activity.step").await);
    server.kill();

    let server = start(dir.path());
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
