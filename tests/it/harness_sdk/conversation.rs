//! Whole conversations: over Statewire alone (turn, plan in the main
//! document, answer, the reply as it streams, the card, the canvas, done,
//! a canvas edit), half over the Studio's SSE routes and half over
//! Statewire, a re-sent seq, and the Studio's refusals as rejections.

use ledgerwire::statewire::ids::ProtocolName;
use ledgerwire::statewire::packet::Command;
use serde_json::{Value, json};

use super::{WAIT, approve_open_plan, connect, ok, refused, status, until_status};
use crate::support::{SseReader, StudioClient, open, quick_studio, scratch, start_studio};

/// The final documents of the whole conversation, as fixtured.
const DOCUMENTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/fixtures/harness/conversation-documents.json"
);

fn golden_documents(documents: &Value) {
    let path = std::path::Path::new(DOCUMENTS);
    if !path.exists() && std::env::var_os("LEDGERWIRE_WRITE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let text = serde_json::to_string_pretty(documents).unwrap() + "\n";
        std::fs::write(path, text).unwrap();
    }
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{DOCUMENTS}: {e} (LEDGERWIRE_WRITE_GOLDEN=1 writes it)"));
    let expected: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        documents, &expected,
        "the documents differ from {DOCUMENTS}"
    );
}

fn reply_done(client: &ledgerwire::statewire_client::harness::HarnessClient, id: &str) -> bool {
    client
        .message(id)
        .is_some_and(|m| m["status"] == "done" && m["done"].is_object())
}

#[tokio::test]
async fn a_whole_conversation_runs_over_statewire() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_studio(ledger, quick_studio()).await;
    let mut client = connect(addr, "sw-1", "alice", "alice-tab").await;
    assert_eq!(status(&client), "idle");
    assert_eq!(client.main().unwrap()["turns"], json!([]));

    let seq = client.ask("Population of Peru").await.unwrap();
    let started = ok(&mut client, seq).await;
    assert_eq!(
        started,
        json!({"turn": 1, "segment": 1, "first_seq": 1, "reply": "t1-seg1", "request": "t1-user"})
    );
    until_status(&mut client, "paused_plan").await;
    let main = client.main().unwrap().clone();
    let pause = &main["pause"];
    assert_eq!(pause["kind"], "plan");
    assert_eq!(pause["message_id"], "t1-seg1");
    assert_eq!(pause["frame"]["event"], "plan.proposed");
    let interrupt_id = pause["interrupt_id"].as_str().unwrap().to_owned();
    assert_eq!(pause["frame"]["interrupt_id"], interrupt_id);
    let request = client.message("t1-user").unwrap();
    assert_eq!(request["role"], "user");
    assert_eq!(request["text"], "Population of Peru");
    let plan = client.message("t1-seg1").unwrap();
    assert_eq!(plan["status"], "paused");
    assert_eq!(plan["text"], "Here is my plan.");
    assert_eq!(plan["plan"]["interrupt_id"], interrupt_id);
    // The relative key reads the same document.
    assert_eq!(
        client
            .connection
            .document("harness-sdk", Some(&[".", "main", "t1-seg1"])),
        Some(plan)
    );

    let seq = client.approve(&interrupt_id).await.unwrap();
    let resumed = ok(&mut client, seq).await;
    assert_eq!(
        resumed,
        json!({"turn": 1, "segment": 2, "first_seq": 3, "reply": "t1-seg2",
               "interrupt_id": interrupt_id, "decision": "approve"})
    );
    client
        .until(WAIT, |c| status(c) == "idle" && reply_done(c, "t1-seg2"))
        .await
        .unwrap();
    let reply = client.message("t1-seg2").unwrap().clone();
    assert_eq!(reply["approved"]["event"], "plan.approved");
    let steps: Vec<&Value> = reply["steps"].as_array().unwrap().iter().collect();
    assert_eq!(steps.len(), 2);
    assert!(steps.iter().all(|s| s["status"] == "complete"), "{steps:?}");
    assert_eq!(reply["cards"].as_array().unwrap().len(), 1);
    assert_eq!(reply["cards"][0]["event"], "component.created");
    assert!(reply["text"].as_str().unwrap().contains("rose from 1 to 2"));
    assert_eq!(reply["complete"], true);
    assert_eq!(
        reply["suggestions"],
        json!(["Compare with another country"])
    );
    let main = client.main().unwrap().clone();
    assert_eq!(
        main["turns"],
        json!([{"turn": 1, "status": "done",
                "messages": ["t1-user", "t1-seg1", "t1-answer1", "t1-seg2"]}])
    );
    assert_eq!(client.message("t1-answer1").unwrap()["decision"], "approve");
    let canvas = &main["canvas"];
    assert_eq!(canvas["blocks"].as_array().unwrap().len(), 1);

    // A canvas edit: the manifest in the answer, and in the main document.
    let card = canvas["blocks"][0]["component_id"].clone();
    let seq = client
        .mutate(json!({"expected_revision": canvas["revision"],
                       "ops": [{"op": "pin", "component_id": card}]}))
        .await
        .unwrap();
    let mutated = ok(&mut client, seq).await;
    assert_eq!(mutated["composition"]["blocks"][0]["pinned"], true);
    client
        .until(WAIT, |c| {
            c.main().unwrap()["canvas"] == mutated["composition"]
        })
        .await
        .unwrap();

    // The documents the conversation left, against the fixture the docs
    // describe (LEDGERWIRE_WRITE_GOLDEN=1 writes it when it is absent).
    let documents = json!({
        "main": client.main(),
        "messages": client.messages(),
    });
    golden_documents(&documents);

    // Re-sending seq 1 re-emits its answer and starts nothing.
    client.connection.answers.clear();
    client
        .connection
        .send_commands(vec![Command {
            seq: 1,
            protocol: ProtocolName::new("harness-sdk").unwrap(),
            method: "turn".into(),
            params: vec![json!({"message": "Population of Peru"})],
        }])
        .await
        .unwrap();
    let again = client.answer_of(1, WAIT).await.unwrap();
    assert_eq!(again.ok, Some(started));
    assert_eq!(client.main().unwrap()["turn"], 1, "no second turn");
}

#[tokio::test]
async fn a_conversation_runs_half_over_sse_and_half_over_statewire() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_studio(ledger, quick_studio()).await;
    let studio = StudioClient::new(addr, "bob");
    let mut watcher = connect(addr, "mix-1", "bob", "bob-watch").await;

    // The turn starts over SSE; the Statewire attach follows it.
    let frames = studio
        .stream(
            "/api/studio/turn",
            &json!({"kind": "turn.request", "conversation_id": "mix-1", "message": "Population of Chile"}),
        )
        .await;
    let plan = frames.last().unwrap().clone();
    assert_eq!(plan["event"], "plan.proposed");
    until_status(&mut watcher, "paused_plan").await;
    assert_eq!(
        watcher.main().unwrap()["pause"]["interrupt_id"],
        plan["interrupt_id"]
    );

    // The answer goes over Statewire; the SSE reconnect route reads the
    // resumed frames from the log, to the end.
    let mut actor = connect(addr, "mix-1", "bob", "bob-act").await;
    let seq = actor
        .approve(plan["interrupt_id"].as_str().unwrap())
        .await
        .unwrap();
    ok(&mut actor, seq).await;
    let response = studio
        .post(
            "/api/studio/stream",
            &json!({"conversation_id": "mix-1", "after_seq": plan["seq"]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let resumed = SseReader::new(response).frames().await;
    assert_eq!(resumed.first().unwrap()["event"], "plan.approved");
    assert_eq!(resumed.last().unwrap()["event"], "done");
    // Both attaches see the turn end.
    for client in [&mut watcher, &mut actor] {
        client
            .until(WAIT, |c| status(c) == "idle" && reply_done(c, "t1-seg2"))
            .await
            .unwrap();
    }
    assert_eq!(watcher.main(), actor.main());

    // A second turn over SSE reaches the attaches as it streams.
    let frames = studio
        .stream(
            "/api/studio/turn",
            &json!({"kind": "turn.request", "conversation_id": "mix-1", "message": "hello"}),
        )
        .await;
    assert_eq!(frames.last().unwrap()["event"], "done");
    watcher
        .until(WAIT, |c| reply_done(c, "t2-seg3"))
        .await
        .unwrap();
    assert_eq!(
        watcher.message("t2-seg3").unwrap()["text"],
        frames[0]["text"],
        "the reply holds the frames' text"
    );
}

#[tokio::test]
async fn refusals_carry_the_studio_routes_code_pointer_and_sentence() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_studio(ledger, quick_studio()).await;
    let studio = StudioClient::new(addr, "carol");
    let mut client = connect(addr, "ref-1", "carol", "carol-tab").await;

    // An answer to a pause that does not exist: the route's 404.
    let body = json!({"kind": "interrupt.response", "conversation_id": "ref-1",
                      "interrupt_id": "int-9-9", "decision": "approve"});
    let (status_code, route) = studio.json("/api/studio/interrupt", &body).await;
    let seq = client.answer(body.clone()).await.unwrap();
    let rejection = refused(&mut client, seq).await;
    assert_eq!(status_code, 404);
    assert_eq!(rejection.code, route["code"]);
    assert_eq!(rejection.message, route["detail"]);
    let data = rejection.data.unwrap();
    assert_eq!(data["pointer"], route["pointer"]);
    assert_eq!(data["retry"], route["retry"]);
    assert_eq!(data["status"], 404);

    // A body the route refuses as malformed, refused the same way.
    let bad = json!({"kind": "turn.request", "conversation_id": "ref-1", "message": 5});
    let (_, route) = studio.json("/api/studio/turn", &bad).await;
    let seq = client.turn(bad).await.unwrap();
    let rejection = refused(&mut client, seq).await;
    assert_eq!(rejection.code, route["code"]);
    assert_eq!(rejection.message, route["detail"]);
    assert_eq!(rejection.data.unwrap()["pointer"], route["pointer"]);

    // Another conversation than the thread, and a body that is not one.
    let seq = client
        .turn(json!({"conversation_id": "other", "message": "x"}))
        .await
        .unwrap();
    let rejection = refused(&mut client, seq).await;
    assert_eq!(rejection.code, "binding_invalid");
    assert_eq!(rejection.data.unwrap()["pointer"], "/conversation_id");
    let seq = client
        .connection
        .invoke("harness-sdk", "turn", vec![json!("hello"), json!(1)])
        .await
        .unwrap();
    assert_eq!(refused(&mut client, seq).await.code, "malformed_request");

    // While a slow segment streams: the route's busy 409, then a cancel.
    let seq = client.ask("slow Population of Bolivia").await.unwrap();
    ok(&mut client, seq).await;
    let seq = approve_open_plan(&mut client).await;
    ok(&mut client, seq).await;
    until_status(&mut client, "streaming").await;
    let seq = client.ask("hello").await.unwrap();
    let busy = refused(&mut client, seq).await;
    let (status_code, route) = studio
        .json(
            "/api/studio/turn",
            &json!({"kind": "turn.request", "conversation_id": "ref-1", "message": "hello"}),
        )
        .await;
    assert_eq!(status_code, 409);
    assert_eq!(busy.code, route["code"]);
    let data = busy.data.unwrap();
    assert_eq!(data["retry"], "retry_after_delay");
    assert!(data["retry_after_seconds"].as_u64().unwrap() >= 1);
    assert_eq!(data["status"], 409);
    let seq = client.cancel().await.unwrap();
    let cancelled = ok(&mut client, seq).await;
    assert_eq!(cancelled["cancelled"], true);
    until_status(&mut client, "cancelled").await;
    let seq = client.cancel().await.unwrap();
    assert_eq!(ok(&mut client, seq).await, json!({"cancelled": false}));
}

#[tokio::test]
async fn an_interest_chooses_which_messages_an_attach_mounts() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_studio(ledger, quick_studio()).await;
    let mut client = connect(addr, "int-1", "dana", "dana-tab").await;
    for n in 0..3 {
        let seq = client.ask(&format!("hello {n}")).await.unwrap();
        ok(&mut client, seq).await;
        let reply = format!("t{}-seg{}", n + 1, n + 1);
        client.until(WAIT, |c| reply_done(c, &reply)).await.unwrap();
    }
    assert_eq!(client.messages().len(), 6);
    client
        .set_interest(json!({"latest": 1, "messages": ["t1-user"]}))
        .await
        .unwrap();
    client
        .until(WAIT, |c| c.messages().len() == 2)
        .await
        .unwrap();
    assert!(client.message("t1-user").is_some());
    assert!(client.message("t3-seg3").is_some());
    assert!(client.message("t2-user").is_none());
    // The interest is this attach's alone, and checked.
    let other = connect(addr, "int-1", "dana", "dana-other").await;
    assert_eq!(other.messages().len(), 6);
    let seq = client
        .set_interest(json!({"latest": 100000}))
        .await
        .unwrap();
    let answer = client
        .connection
        .answer("harness-sdk/interest", seq, WAIT)
        .await
        .unwrap();
    assert_eq!(answer.err.unwrap().code, "invalid-document");
}
