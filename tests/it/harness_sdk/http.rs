//! `harness-sdk` over the HTTP transport: a conversation through
//! `POST /stream` (the turn as an initial statement) and `POST /frames`
//! (the answer, under the lease), read as SSE packets applied to a
//! client-side document table, to the same end documents as over
//! WebSocket.

use std::collections::BTreeMap;

use ledgerwire::statewire::view::{DocIdentity, apply_ops};
use serde_json::{Value, json};

use crate::statewire::Sse;
use crate::support::{open, quick_studio, scratch, start_studio};

const HARNESS: &str = r#"harness-sdk; version="2026-12-01""#;

/// A client-side table fed by SSE packets.
struct Table {
    documents: BTreeMap<u32, (DocIdentity, Value)>,
    answers: Vec<Value>,
}

impl Table {
    fn main(&self) -> Value {
        self.documents
            .values()
            .find(|(id, _)| id.main && id.protocol.as_str() == "harness-sdk")
            .map(|(_, value)| value.clone())
            .unwrap_or(Value::Null)
    }

    fn message(&self, id: &str) -> Option<&Value> {
        self.documents.values().find_map(|(identity, value)| {
            let key = identity.key.as_ref()?;
            (key.last().map(String::as_str) == Some(id)).then_some(value)
        })
    }

    /// Reads packets until `done` holds.
    async fn until(&mut self, sse: &mut Sse, mut done: impl FnMut(&Table) -> bool) {
        while !done(self) {
            let packet = sse.next().await.expect("the stream is open");
            assert!(packet.fin.is_none(), "the attach ended: {:?}", packet.fin);
            apply_ops(&mut self.documents, &packet.ops).expect("ops apply");
            for answer in packet.ans {
                self.answers.push(serde_json::to_value(answer).unwrap());
            }
        }
    }
}

#[tokio::test]
async fn a_conversation_runs_over_post_stream_and_frames() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_studio(ledger, quick_studio()).await;
    let http = reqwest::Client::new();
    let turn = json!({"cmd": [{"seq": 1, "protocol": "harness-sdk", "method": "turn",
                               "params": [{"message": "Population of Peru"}]}]});
    let response = http
        .post(format!("http://{addr}/threads/h1/stream"))
        .header("Authorization", "Bearer erin")
        .header("Statewire-Version", r#""2026-11-02""#)
        .header("Statewire-Protocol", HARNESS)
        .header("Statewire-Attacher", "tab")
        .body(turn.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let lease = response.headers()["statewire-lease"]
        .to_str()
        .unwrap()
        .to_owned();
    let mut sse = Sse::new(response);
    let mut table = Table {
        documents: BTreeMap::new(),
        answers: Vec::new(),
    };
    // The answer and the plan come in either order: the segment the turn
    // started streams while the answer is recorded.
    table
        .until(&mut sse, |t| {
            t.main()["status"] == "paused_plan" && !t.answers.is_empty()
        })
        .await;
    assert_eq!(table.answers[0]["ok"]["reply"], "t1-seg1");
    let interrupt_id = table.main()["pause"]["interrupt_id"].clone();

    let answer = json!({"cmd": [{"seq": 2, "protocol": "harness-sdk", "method": "answer",
                                 "params": [{"interrupt_id": interrupt_id, "decision": "approve"}]}]});
    let response = http
        .post(format!("http://{addr}/threads/h1/frames"))
        .header("Authorization", "Bearer erin")
        .header("Statewire-Lease", &lease)
        .body(answer.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 204);
    table
        .until(&mut sse, |t| {
            t.main()["status"] == "idle"
                && t.message("t1-seg2").is_some_and(|m| m["status"] == "done")
        })
        .await;
    let reply = table.message("t1-seg2").unwrap();
    assert_eq!(reply["cards"].as_array().unwrap().len(), 1);
    assert!(reply["text"].as_str().unwrap().contains("rose from 1 to 2"));
    assert_eq!(
        table.main()["turns"][0]["messages"],
        json!(["t1-user", "t1-seg1", "t1-answer1", "t1-seg2"])
    );
    assert!(
        table
            .answers
            .iter()
            .any(|a| a["seq"] == 2 && a["ok"]["decision"] == "approve"),
        "{:?}",
        table.answers
    );
}
