//! `ledgerwire crashtest`: a short kill-anywhere campaign against the real
//! binary loses nothing, and the checks it runs after each kill find what
//! a store lacks.

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use ledgerwire::crashtest::check::{AckedAnswer, AckedFrame, Acks, ThreadAcks, check};
use ledgerwire::statewire::ids::ClientId;
use ledgerwire::statewire_client::{LaneOutbox, Session};
use serde_json::json;

use crate::support::{StudioClient, binary, open, quick_studio, scratch, start_stoppable_studio};

#[test]
fn a_short_campaign_against_the_real_binary_loses_nothing() {
    let dir = scratch();
    let data = dir.path().join("store");
    let output = binary()
        .args([
            "crashtest",
            "--kills",
            "3",
            "--conversations",
            "2",
            "--threads",
            "1",
        ])
        .args(["--seed", "7", "--min-uptime", "300", "--max-uptime", "1500"])
        .arg("--data")
        .arg(&data)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    println!("{text}{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the campaign found a loss");
    assert!(text.contains("kill 3/3"), "progress");
    assert!(
        text.contains(" kill uptime_ms  frames answers"),
        "the table"
    );
    assert!(text.contains("lost: 0"));
    assert!(!text.contains("LOST"));
}

#[tokio::test]
async fn the_checks_name_what_the_log_lacks_or_holds_otherwise() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let (addr, server) = start_stoppable_studio(ledger, quick_studio()).await;
    let client = StudioClient::new(addr, "crashtest");
    // The frame as it came over the wire, byte for byte.
    let response = client
        .post(
            "/api/studio/turn",
            &json!({"kind": "turn.request", "conversation_id": "c", "message": "chart"}),
        )
        .await;
    let mut events = response.bytes_stream().eventsource();
    let mut data = String::new();
    while let Some(event) = events.next().await {
        data = event.unwrap().data;
    }
    server.stop().await;
    let plan: serde_json::Value = serde_json::from_str(&data).unwrap();
    assert_eq!(plan["event"], "plan.proposed");
    let seq = plan["seq"].as_u64().unwrap();
    let frame = |seq: u64, data: &str| AckedFrame {
        conversation: "c".into(),
        turn: 1,
        seq,
        data: data.to_owned(),
    };
    let mut acks = Acks::default();
    acks.frames.push(frame(seq, &data));
    let (ledger, _) = open(dir.path());
    assert!(
        check(&ledger, &acks, "crashtest").await.is_empty(),
        "what is there passes"
    );

    acks.frames
        .push(frame(seq, "{\"event\":\"plan.proposed\"}"));
    acks.frames.push(frame(seq + 5, &data));
    acks.answers.push(AckedAnswer {
        conversation: "c".into(),
        interrupt_id: "int-1-99".into(),
        decision: "approve".into(),
    });
    acks.seq("c", 1, 3);
    acks.seq("c", 1, 3);
    let mut session = Session::new(ClientId::mint());
    session.lanes.insert(
        "harness-sdk".into(),
        LaneOutbox {
            watermark: 1,
            ..LaneOutbox::default()
        },
    );
    acks.threads.insert(
        "t".into(),
        ThreadAcks {
            thread: "t".into(),
            session,
            answers: Default::default(),
        },
    );
    let losses = check(&ledger, &acks, "crashtest").await;
    println!("{losses:#?}");
    let has = |needle: &str| losses.iter().any(|loss| loss.contains(needle));
    assert!(has("differs from the one received"));
    assert!(has("is not in the log"));
    assert!(has("the answer to int-1-99 is not in the log"));
    assert!(has("seq 3 was received twice"));
    assert!(has("command 1 was `dur` but is not admitted"));
    assert_eq!(losses.len(), 5);
}
