//! The real binary serving `harness-sdk` is SIGKILLed mid-turn with
//! admitted commands whose answers the client has not seen, and started
//! again on the same data. The client replays its outbox: each command
//! runs once, the watermark and the retained answers survive, the thread's
//! documents equal a fresh fold of the log, and the log verifies and
//! replays (`replay --check`).

use ledgerwire::harness_sdk::documents::main_document;
use ledgerwire::harness_sdk::transcript::ThreadFold;
use ledgerwire::ledger::Payload;
use ledgerwire::statewire::ids::ProtocolName;
use ledgerwire::statewire::packet::Command;
use ledgerwire::studio::auth::Principal;
use ledgerwire::studio::records::StudioKind;
use ledgerwire::studio::records::{RequestApplied, conversation_stream};
use ledgerwire::wire::ids::ConversationId;
use serde_json::{Value, json};

use super::{WAIT, approve_open_plan, connect, ok};
use crate::support::{ServerProcess, ledgerwire_ok, open, scratch};

const ARGS: &[&str] = &[
    "--agent",
    "minimal",
    "--lease-ttl",
    "1500",
    "--heartbeat",
    "100",
];
const TOKEN: &str = "crash-tester";

#[tokio::test]
async fn a_sigkilled_server_runs_each_replayed_command_once() {
    let dir = scratch();
    let server = ServerProcess::start(dir.path(), ARGS);
    let mut client = connect(server.addr, "crash-1", TOKEN, "crash-client").await;
    let seq = client.ask("slow Population of Peru").await.unwrap();
    let asked = ok(&mut client, seq).await;
    let seq = approve_open_plan(&mut client).await;
    let approved = ok(&mut client, seq).await;
    // Mid-turn: the resumed segment is in its first (slow) step.
    client
        .until(WAIT, |c| {
            c.message("t1-seg2")
                .is_some_and(|m| m["steps"].as_array().is_some_and(|s| !s.is_empty()))
        })
        .await
        .unwrap();
    // Two commands in one frame, admitted (dur), then the kill before the
    // client reads any answer of theirs.
    let harness = "harness-sdk";
    let cancel = client
        .connection
        .store(harness, "cancel", vec![json!({})])
        .unwrap()
        .1;
    let again = client
        .connection
        .store(harness, "turn", vec![json!({"message": "hello"})])
        .unwrap()
        .1;
    client
        .connection
        .send_commands(vec![cancel, again])
        .await
        .unwrap();
    client
        .connection
        .until(WAIT, |c| c.session.lanes[harness].watermark == 4)
        .await
        .unwrap();
    server.kill();
    let session = client.connection.abort();
    assert!(session.lanes[harness].commands.contains_key(&3));

    let server = ServerProcess::start(dir.path(), ARGS);
    let mut client = ledgerwire::statewire_client::harness::HarnessClient::connect(
        ledgerwire::statewire_client::harness::config(
            &format!("ws://{}", server.addr),
            "crash-1",
            TOKEN,
        ),
        "crash-1",
        session,
    )
    .await
    .unwrap();
    assert_eq!(
        client.connection.selection.get(harness).unwrap().3,
        4,
        "the watermark survived"
    );
    client
        .connection
        .until(WAIT, |c| c.session.lanes[harness].commands.is_empty())
        .await
        .unwrap();
    let answers: Vec<_> = (3..=4)
        .map(|seq| client.connection.answers[&(harness.to_owned(), seq)].clone())
        .collect();
    let turn_started = answers[1].ok.is_some();
    if turn_started {
        // The dead segment's lease had lapsed: the second turn ran.
        client
            .until(WAIT, |c| c.main().unwrap()["status"] == "idle")
            .await
            .unwrap();
    } else {
        assert_eq!(
            answers[1].err.as_ref().unwrap().code,
            "transient_unavailable"
        );
    }

    // Retained answers from before the crash come back unchanged.
    client.connection.answers.clear();
    client
        .connection
        .send_commands(vec![Command {
            seq: 2,
            protocol: ProtocolName::new(harness).unwrap(),
            method: "answer".into(),
            params: vec![json!({})],
        }])
        .await
        .unwrap();
    let resent = client.answer_of(2, WAIT).await.unwrap();
    assert_eq!(resent.ok, Some(approved));
    let _ = asked;

    // A fresh attach reads the documents the live one holds.
    let fresh = connect(server.addr, "crash-1", TOKEN, "crash-fresh").await;
    assert_eq!(fresh.main(), client.main());
    let live_main: Value = client.main().unwrap().clone();
    let live_reply = client.message("t1-seg2").cloned();
    assert_eq!(fresh.message("t1-seg2").cloned(), live_reply);
    drop(fresh);
    drop(client);
    server.kill();

    // The log alone: each command applied at most once, the documents a
    // fold of it, and the whole store verified and replayed.
    let (ledger, _) = open(dir.path());
    let stream = conversation_stream(
        &Principal::of_token(TOKEN),
        &ConversationId::new("crash-1").unwrap(),
    )
    .unwrap();
    let keys: Vec<String> = ledger
        .read_to_end(&stream, 0)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.kind() == StudioKind::RequestApplied as u16)
        .map(|r| RequestApplied::from_record(&r).unwrap().unwrap().key)
        .collect();
    let mut unique = keys.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        keys.len(),
        "a command applied twice: {keys:?}"
    );
    let folded = ledger.fold::<ThreadFold>(&stream).await.unwrap();
    assert_eq!(main_document("crash-1", &folded.state), live_main);
    assert_eq!(
        folded.state.conversation.turns.len(),
        if turn_started { 2 } else { 1 }
    );
    drop(ledger);
    ledgerwire_ok(&["log", "verify"], dir.path());
    ledgerwire_ok(
        &[
            "replay",
            "--conversation",
            "crash-1",
            "--check",
            "--agent",
            "minimal",
        ],
        dir.path(),
    );
}
