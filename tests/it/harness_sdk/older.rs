//! `harness-sdk` 2026-11-15 (messages inline in the main document, `ask`)
//! served beside the native contract, and an upgrade: a store a build
//! with 2026-11-15 as its native version left, with a retained answer and
//! a queued command, reopened by this build, which serves 2026-11-15
//! through an adapter: both keep their meaning.

use std::time::Duration;

use ledgerwire::harness_sdk::HARNESS_SDK;
use ledgerwire::ledger::{Durability, ExpectedPosition, Payload};
use ledgerwire::statewire::ids::{ClientId, PrincipalId, ProtocolName, ThreadId, ThreadScope};
use ledgerwire::statewire::records::{CommandAdmitted, CommandAnswered, lane_stream};
use ledgerwire::statewire::version::Version;
use ledgerwire::statewire_client::harness::{HarnessClient, config};
use ledgerwire::statewire_client::{ClientConfig, Connection, ProtocolOfferConfig, Session};
use ledgerwire::studio::auth::Principal;
use serde_json::{Value, json};

use super::{WAIT, connect, ok};
use crate::support::{open, quick_studio, scratch, start_studio};

const OLDER: Version = Version::ymd(2026, 11, 15);

fn older_config(addr: std::net::SocketAddr, conversation: &str, token: &str) -> ClientConfig {
    ClientConfig {
        protocols: Some(vec![ProtocolOfferConfig {
            name: HARNESS_SDK.into(),
            range: (OLDER, OLDER),
            optional: false,
        }]),
        ..config(&format!("ws://{addr}"), conversation, token)
    }
}

fn inline_messages(connection: &Connection) -> Vec<Value> {
    connection
        .document(HARNESS_SDK, None)
        .and_then(|main| main["messages"].as_array().cloned())
        .unwrap_or_default()
}

fn keyed_documents(connection: &Connection) -> usize {
    connection
        .documents
        .values()
        .filter(|(id, _)| id.key.is_some())
        .count()
}

#[tokio::test]
async fn the_older_contract_asks_and_reads_its_messages_inline() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_studio(ledger, quick_studio()).await;
    let session = Session::new(ClientId::new("older-tab").unwrap());
    let mut older = Connection::connect(older_config(addr, "in-1", "fay"), session)
        .await
        .unwrap();
    let mut native = connect(addr, "in-1", "fay", "native-tab").await;
    let seq = older
        .invoke(HARNESS_SDK, "ask", vec![json!("hello")])
        .await
        .unwrap();
    let answer = older.answer(HARNESS_SDK, seq, WAIT).await.unwrap();
    assert_eq!(
        answer.ok,
        Some(json!({"turn": 1, "segment": 1, "first_seq": 1})),
        "no message ids in the older contract's answer"
    );
    older
        .until(WAIT, |c| {
            inline_messages(c)
                .last()
                .is_some_and(|m| m["status"] == "done")
        })
        .await
        .unwrap();
    let messages = inline_messages(&older);
    assert_eq!(messages[0]["id"], "t1-user");
    assert_eq!(messages[0]["text"], "hello");
    assert_eq!(
        keyed_documents(&older),
        0,
        "no keyed documents in 2026-11-15"
    );
    assert!(
        older
            .document(HARNESS_SDK, None)
            .unwrap()
            .get("turns_omitted")
            .is_none()
    );
    native
        .until(WAIT, |c| {
            c.message("t1-seg1").is_some_and(|m| m["status"] == "done")
        })
        .await
        .unwrap();
    assert_eq!(native.message("t1-seg1").unwrap(), &messages[1]);
    // A refusal's data carries no status in the older contract.
    let seq = older
        .invoke(
            HARNESS_SDK,
            "answer",
            vec![json!({"interrupt_id": "int-9-9", "decision": "approve"})],
        )
        .await
        .unwrap();
    let refused = older
        .answer(HARNESS_SDK, seq, WAIT)
        .await
        .unwrap()
        .err
        .unwrap();
    assert_eq!(refused.code, "not_found");
    let data = refused.data.unwrap();
    assert_eq!(data["pointer"], "/interrupt_id");
    assert!(data.get("status").is_none(), "{data}");
    let seq = native.ask("hello again").await.unwrap();
    let native_answer = ok(&mut native, seq).await;
    assert_eq!(
        native_answer["reply"], "t2-seg2",
        "the native answer keeps its ids"
    );
}

#[tokio::test]
async fn an_upgrade_keeps_queued_and_retained_commands_in_their_meaning() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    // What a build whose native harness-sdk was 2026-11-15 left on disk:
    // seq 1 (`cancel`) answered in its contract, seq 2 (`ask`) admitted
    // and still queued when it stopped.
    let principal = Principal::of_token("gus");
    let scope = ThreadScope::new(
        Some(PrincipalId::new(principal.as_str()).unwrap()),
        ThreadId::new("up-1").unwrap(),
    );
    let client = ClientId::new("upgrading-tab").unwrap();
    let stream = lane_stream(&scope, &client, &ProtocolName::new(HARNESS_SDK).unwrap()).unwrap();
    let admitted = |seq: u64, method: &str, params: Value| {
        CommandAdmitted {
            client: client.to_string(),
            protocol: HARNESS_SDK.into(),
            seq,
            method: method.into(),
            params: params.to_string(),
            wire_version: "2026-11-02".into(),
            protocol_version: OLDER.to_string(),
            attach: 1,
            attacher: Some("harness-client".into()),
            principal: Some(principal.as_str().into()),
        }
        .to_record()
    };
    let records = vec![
        admitted(1, "cancel", json!([{}])),
        CommandAnswered {
            seq: 1,
            ok: true,
            answer: json!({"cancelled": false}).to_string(),
        }
        .to_record(),
        admitted(2, "ask", json!(["hello"])),
    ];
    ledger
        .append(
            &stream,
            ExpectedPosition::Exactly(0),
            records,
            Durability::Durable,
        )
        .await
        .unwrap();

    // This build serves 2026-11-15 through its adapter.
    let addr = start_studio(ledger, quick_studio()).await;
    let session = Session::new(client.clone());
    let mut older = Connection::connect(older_config(addr, "up-1", "gus"), session)
        .await
        .unwrap();
    assert_eq!(
        older.selection.get(HARNESS_SDK).unwrap().3,
        2,
        "the watermark stands"
    );
    // The hello carries both answers above the (empty) results cursor: the
    // retained one as 2026-11-15 wrote it, the queued one run now through
    // the adapter (`ask` lifted to `turn`) and answered in 2026-11-15.
    let answers: Vec<_> = (1..=2)
        .map(|seq| older.answers[&(HARNESS_SDK.to_owned(), seq)].ok.clone())
        .collect();
    assert_eq!(answers[0], Some(json!({"cancelled": false})));
    assert_eq!(
        answers[1],
        Some(json!({"turn": 1, "segment": 1, "first_seq": 1}))
    );
    older
        .until(WAIT, |c| {
            inline_messages(c)
                .last()
                .is_some_and(|m| m["status"] == "done")
        })
        .await
        .unwrap();
    assert_eq!(inline_messages(&older)[0]["text"], "hello");
    // Re-sending the retained seq re-emits it unchanged; a native attach of
    // the same client reads the same answer in its own contract.
    older.answers.clear();
    older
        .send_commands(vec![ledgerwire::statewire::packet::Command {
            seq: 2,
            protocol: ProtocolName::new(HARNESS_SDK).unwrap(),
            method: "ask".into(),
            params: vec![json!("hello")],
        }])
        .await
        .unwrap();
    let again = older.answer(HARNESS_SDK, 2, WAIT).await.unwrap();
    assert_eq!(again.ok, answers[1]);
    assert_eq!(again.contract.unwrap().version, OLDER);
    let mut native = HarnessClient::connect(
        config(&format!("ws://{addr}"), "up-1", "gus"),
        "up-1",
        Session::new(client),
    )
    .await
    .unwrap();
    let native_answer = native
        .connection
        .answer(HARNESS_SDK, 2, Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(native_answer.ok.unwrap()["reply"], "t1-seg1");
    native
        .until(WAIT, |c| {
            c.message("t1-seg1").is_some_and(|m| m["status"] == "done")
        })
        .await
        .unwrap();
}
