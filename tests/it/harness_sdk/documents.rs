//! The documents as pure functions of the log: records appended by hand,
//! folded with `ThreadFold`, and diffed as an attach's table would be. A
//! streaming delta is one `replace` of the reply's text; a pause names its
//! reply; an older turn folds again from its records alone.

use std::sync::Arc;

use ledgerwire::harness_sdk::documents::{main_document, message_document};
use ledgerwire::harness_sdk::transcript::{ThreadFold, TurnTranscript};
use ledgerwire::ledger::{Durability, ExpectedPosition, Ledger, NewRecord, Payload, StreamKey};
use ledgerwire::statewire::ids::ProtocolName;
use ledgerwire::statewire::view::{DocIdentity, DocTable, View};
use ledgerwire::studio::records::{FrameSent, SegmentClaimed, TurnRequested};
use serde_json::{Value, json};

use crate::support::{open, scratch, stream};

async fn append(ledger: &Ledger, stream: &StreamKey, record: NewRecord) {
    ledger
        .append(
            stream,
            ExpectedPosition::Any,
            vec![record],
            Durability::Buffered,
        )
        .await
        .unwrap();
}

fn frame(turn: u32, segment: u32, seq: u64, frame: Value) -> NewRecord {
    FrameSent {
        turn,
        segment,
        seq,
        frame: frame.to_string(),
    }
    .to_record()
}

fn turn(turn: u32, message: &str) -> NewRecord {
    TurnRequested {
        turn,
        request: json!({"conversation_id": "d1", "message": message}).to_string(),
    }
    .to_record()
}

fn claim(segment: u32, turn: u32) -> NewRecord {
    SegmentClaimed {
        segment,
        turn,
        owner: "test".into(),
        at_ms: 0,
        ttl_ms: 1,
        first_seq: 1,
    }
    .to_record()
}

/// The reply's document as the fold builds it now.
async fn reply(ledger: &Ledger, stream: &StreamKey, id: &str) -> Value {
    let folded = ledger.fold::<ThreadFold>(stream).await.unwrap();
    let current = folded.state.current.as_ref().unwrap();
    message_document(current.message(id).unwrap())
}

#[tokio::test]
async fn a_delta_is_one_replace_of_the_reply_text() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let stream = stream("studio/p/d1");
    append(&ledger, &stream, turn(1, "hello")).await;
    append(&ledger, &stream, claim(1, 1)).await;
    append(
        &ledger,
        &stream,
        frame(
            1,
            1,
            1,
            json!({"event": "message.delta", "seq": 1, "text": "Hel"}),
        ),
    )
    .await;
    let identity = DocIdentity::keyed(
        ProtocolName::new("harness-sdk").unwrap(),
        vec!["d1".into(), "main".into(), "t1-seg1".into()],
    );
    let mut table = DocTable::default();
    let first: View = [(
        identity.clone(),
        Arc::new(reply(&ledger, &stream, "t1-seg1").await),
    )]
    .into();
    table.update(&first);
    append(
        &ledger,
        &stream,
        frame(
            1,
            1,
            2,
            json!({"event": "message.delta", "seq": 2, "text": "lo"}),
        ),
    )
    .await;
    let second: View = [(identity, Arc::new(reply(&ledger, &stream, "t1-seg1").await))].into();
    let ops = serde_json::to_value(table.update(&second)).unwrap();
    let text_ops: Vec<&Value> = ops
        .as_array()
        .unwrap()
        .iter()
        .filter(|op| op["path"] == json!(["text"]))
        .collect();
    assert_eq!(text_ops.len(), 1, "{ops}");
    assert_eq!(text_ops[0]["op"], "replace");
    assert_eq!(text_ops[0]["value"], "Hello");
}

#[tokio::test]
async fn a_pause_names_its_reply_and_an_older_turn_folds_from_its_records() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let stream = stream("studio/p/d2");
    append(&ledger, &stream, turn(1, "first")).await;
    append(&ledger, &stream, claim(1, 1)).await;
    let plan = json!({"event": "plan.proposed", "seq": 1, "interrupt_id": "int-1-1",
                      "plan_version_id": "pv-1", "version": 1, "steps": []});
    append(&ledger, &stream, frame(1, 1, 1, plan.clone())).await;
    let folded = ledger.fold::<ThreadFold>(&stream).await.unwrap();
    let main = main_document("d2", &folded.state);
    assert_eq!(main["status"], "paused_plan");
    assert_eq!(main["pause"]["message_id"], "t1-seg1");
    assert_eq!(main["pause"]["frame"], plan);

    let second_turn_at = ledger.head(&stream).await.unwrap();
    append(&ledger, &stream, turn(2, "second")).await;
    let folded = ledger.fold::<ThreadFold>(&stream).await.unwrap();
    assert_eq!(folded.state.current.as_ref().unwrap().turn, 2);
    assert_eq!(
        folded.state.index[0].messages,
        ["t1-user", "t1-seg1"],
        "the index keeps older turns' ids"
    );
    let records = ledger
        .read_to_end(&stream, 0)
        .await
        .unwrap()
        .into_iter()
        .take_while(|r| r.position() < second_turn_at);
    let older = TurnTranscript::from_records(1, records).unwrap();
    let document = message_document(older.message("t1-seg1").unwrap());
    assert_eq!(document["plan"], plan);
    assert_eq!(document["status"], "paused");
}
