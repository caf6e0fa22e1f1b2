//! The Studio routes over HTTP/SSE on a loopback port: turns, pauses and
//! resumes, retries, leases, cancel, heartbeats, the canvas, reconnects,
//! restarts and two servers sharing one ledger.

use std::time::Duration;

use ledgerwire::ledger::Ledger;
use ledgerwire::ledger::local::OpenMode;
use serde_json::{Value, json};

use crate::support::{
    SseEvent, SseReader, StudioClient, open, quick_studio, scratch, start_stoppable_studio,
    start_studio,
};

fn events(frames: &[Value]) -> Vec<&str> {
    frames
        .iter()
        .map(|f| f["event"].as_str().unwrap_or("?"))
        .collect()
}

fn seqs(frames: &[Value]) -> Vec<u64> {
    frames
        .iter()
        .map(|f| f["seq"].as_u64().unwrap_or(0))
        .collect()
}

fn turn(conversation: &str, message: &str) -> Value {
    json!({"kind": "turn.request", "conversation_id": conversation, "message": message})
}

fn answer(conversation: &str, interrupt: &Value, decision: &str) -> Value {
    json!({"kind": "interrupt.response", "conversation_id": conversation,
           "interrupt_id": interrupt, "decision": decision})
}

async fn studio() -> (tempfile::TempDir, Ledger, StudioClient) {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_studio(ledger.clone(), quick_studio()).await;
    (dir, ledger, StudioClient::new(addr, "alice"))
}

#[tokio::test]
async fn a_planned_turn_pauses_then_resumes_on_a_new_stream_with_continuing_seq() {
    let (_dir, _ledger, client) = studio().await;
    let first = client
        .stream("/api/studio/turn", &turn("c1", "Population of Kenya"))
        .await;
    assert_eq!(events(&first), ["message.delta", "plan.proposed"]);
    assert_eq!(seqs(&first), [1, 2]);
    let interrupt = first[1]["interrupt_id"].clone();

    let resumed = client
        .stream(
            "/api/studio/interrupt",
            &answer("c1", &interrupt, "approve"),
        )
        .await;
    let names = events(&resumed);
    assert_eq!(names.first(), Some(&"plan.approved"), "{names:?}");
    assert_eq!(names.last(), Some(&"done"));
    assert!(names.contains(&"component.created") && names.contains(&"composition.updated"));
    let seqs = seqs(&resumed);
    assert_eq!(seqs[0], 3, "seq continues across segments");
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let done = resumed.last().unwrap();
    assert_eq!(done["composition"]["blocks"][0]["component_id"], "cmp-1-1");

    // The same answer again: the turn has moved on; another answer conflicts.
    let (status, body) = client
        .json(
            "/api/studio/interrupt",
            &answer("c1", &interrupt, "approve"),
        )
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("edit_conflict"))
    );
    let (status, body) = client
        .json("/api/studio/interrupt", &answer("c1", &interrupt, "reject"))
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("edit_conflict"))
    );
}

#[tokio::test]
async fn amend_versions_the_plan_and_reject_closes_the_turn() {
    let (_dir, _ledger, client) = studio().await;
    let first = client
        .stream("/api/studio/turn", &turn("c2", "GDP of Peru"))
        .await;
    let plan = &first[1];
    let mut amend = answer("c2", &plan["interrupt_id"], "amend");
    amend["payload"] = json!("use 2010 instead");
    let amended = client.stream("/api/studio/interrupt", &amend).await;
    assert_eq!(events(&amended), ["plan.versioned", "plan.proposed"]);
    assert_eq!(amended[0]["supersedes"], plan["plan_version_id"]);
    assert_eq!(amended[1]["version"], 2);
    assert_ne!(amended[1]["interrupt_id"], plan["interrupt_id"]);

    // The superseded pause is closed.
    let (status, _) = client
        .json(
            "/api/studio/interrupt",
            &answer("c2", &plan["interrupt_id"], "approve"),
        )
        .await;
    assert_eq!(status, 409);
    let rejected = client
        .stream(
            "/api/studio/interrupt",
            &answer("c2", &amended[1]["interrupt_id"], "reject"),
        )
        .await;
    assert_eq!(events(&rejected), ["message.complete", "done"]);
}

#[tokio::test]
async fn elicitation_answers_are_checked_against_the_open_pause() {
    let (_dir, _ledger, client) = studio().await;
    let first = client
        .stream("/api/studio/turn", &turn("c3", "please clarify"))
        .await;
    assert_eq!(events(&first), ["message.delta", "elicitation.request"]);
    let interrupt = first[1]["interrupt_id"].clone();

    let mut missing = answer("c3", &interrupt, "answer");
    missing["answers"] = json!({});
    let (status, body) = client.json("/api/studio/interrupt", &missing).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (422, Some("binding_invalid"))
    );

    let mut wrong_option = answer("c3", &interrupt, "answer");
    wrong_option["answers"] = json!({"q1": {"kind": "option", "option_id": "o9"}});
    let (status, body) = client.json("/api/studio/interrupt", &wrong_option).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (422, Some("binding_invalid")),
        "{body}"
    );

    let mut skip_question = answer("c3", &interrupt, "answer");
    skip_question["answers"] = json!({"q1": {"kind": "skipped"}});
    let (status, _) = client.json("/api/studio/interrupt", &skip_question).await;
    assert_eq!(status, 422, "q1 is not skippable");

    // Nothing was recorded by the refusals: a valid answer resumes.
    let mut good = answer("c3", &interrupt, "answer");
    good["answers"] = json!({"q1": {"kind": "option", "option_id": "o2"}});
    let resumed = client.stream("/api/studio/interrupt", &good).await;
    assert_eq!(events(&resumed), ["message.delta", "plan.proposed"]);
    assert_eq!(resumed[0]["seq"], 3);
}

#[tokio::test]
async fn a_skippable_pause_can_be_skipped_and_a_plan_takes_no_answers() {
    let (_dir, _ledger, client) = studio().await;
    let first = client
        .stream("/api/studio/turn", &turn("c4", "clarify this"))
        .await;
    let skipped = client
        .stream(
            "/api/studio/interrupt",
            &answer("c4", &first[1]["interrupt_id"], "skip"),
        )
        .await;
    assert_eq!(events(&skipped), ["message.delta", "plan.proposed"]);
    let mut with_answers = answer("c4", &skipped[1]["interrupt_id"], "approve");
    with_answers["answers"] = json!({"q1": {"kind": "skipped"}});
    let (status, body) = client.json("/api/studio/interrupt", &with_answers).await;
    assert_eq!((status, body["pointer"].as_str()), (422, Some("/answers")));
}

#[tokio::test]
async fn requests_need_a_token_and_conversations_belong_to_their_principal() {
    let (_dir, _ledger, alice) = studio().await;
    let mut anonymous = alice.clone();
    anonymous.token = None;
    let (status, body) = anonymous
        .json("/api/studio/turn", &turn("c5", "hello"))
        .await;
    assert_eq!((status, body["code"].as_str()), (401, Some("unauthorized")));

    let first = alice
        .stream("/api/studio/turn", &turn("c5", "GDP of Chile"))
        .await;
    let bob = StudioClient {
        token: Some("bob".into()),
        ..alice.clone()
    };
    let (status, body) = bob
        .json(
            "/api/studio/interrupt",
            &answer("c5", &first[1]["interrupt_id"], "approve"),
        )
        .await;
    assert_eq!(status, 404);
    assert_eq!(body["code"], "not_found");
    assert_eq!(body["retry"], "do_not_retry");
    assert_eq!(body["pointer"], "/conversation_id");
    let (status, _) = bob
        .json(
            "/api/studio/composition",
            &mutate("c5", 0, json!([{"op": "add", "component_id": "cmp-1-1"}])),
        )
        .await;
    assert_eq!(status, 404);
    // A card turn on a conversation nobody started: 404 too.
    let mut card = turn("nobody", "edit it");
    card["component_ref"] = json!({"component_id": "x", "revision": 1, "intent": "edit"});
    let (status, body) = alice.json("/api/studio/turn", &card).await;
    assert_eq!(
        (status, body["pointer"].as_str()),
        (404, Some("/conversation_id"))
    );
}

#[tokio::test]
async fn an_oversized_body_is_refused_before_parsing() {
    let (_dir, _ledger, client) = studio().await;
    let limit = ledgerwire::wire::limits::MAX_TURN_REQUEST_BYTES;
    let huge =
        json!({"kind": "turn.request", "conversation_id": "c6", "message": "x".repeat(limit)});
    let (status, body) = client.json("/api/studio/turn", &huge).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (413, Some("payload_too_large"))
    );
    let (status, body) = client
        .json("/api/studio/turn", &json!({"kind": "turn.request"}))
        .await;
    assert_eq!(status, 422, "{body}");
}

#[tokio::test]
async fn a_second_turn_while_one_streams_gets_409_with_the_remaining_lease() {
    let (_dir, _ledger, client) = studio().await;
    let first = client
        .stream("/api/studio/turn", &turn("c7", "slow question"))
        .await;
    let response = client
        .post(
            "/api/studio/interrupt",
            &answer("c7", &first[1]["interrupt_id"], "approve"),
        )
        .await;
    assert_eq!(response.status(), 200);
    let mut running = SseReader::new(response);
    // The first frame proves the segment holds the lease.
    assert!(matches!(running.next().await, Some(SseEvent::Frame { .. })));
    let (status, body) = client
        .json("/api/studio/turn", &turn("c7", "another"))
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("transient_unavailable"))
    );
    assert_eq!(body["retry"], "retry_after_delay");
    let wait = body["retry_after_seconds"].as_u64().unwrap();
    assert!((1..=2).contains(&wait), "lease of 2 s: {wait}");
    // Heartbeats flow while the slow steps run, and the turn completes.
    let mut heartbeats = 0;
    let mut last = None;
    while let Some(event) = running.next().await {
        match event {
            SseEvent::Comment(text) => {
                assert_eq!(text, "ka");
                heartbeats += 1;
            }
            SseEvent::Frame { frame, .. } => last = Some(frame),
        }
    }
    assert!(
        heartbeats >= 3,
        "{heartbeats} heartbeats over ~1.2 s at 100 ms"
    );
    assert_eq!(last.unwrap()["event"], "done");
}

#[tokio::test]
async fn cancel_ends_the_live_segment_with_a_cancelled_error_and_no_done() {
    let (_dir, _ledger, client) = studio().await;
    let first = client
        .stream("/api/studio/turn", &turn("c8", "slow please"))
        .await;
    let response = client
        .post(
            "/api/studio/interrupt",
            &answer("c8", &first[1]["interrupt_id"], "approve"),
        )
        .await;
    let mut running = SseReader::new(response);
    assert!(matches!(running.next().await, Some(SseEvent::Frame { .. })));
    let started = std::time::Instant::now();
    let cancel = json!({"kind": "turn.cancel", "conversation_id": "c8"});
    assert_eq!(
        client.post("/api/studio/cancel", &cancel).await.status(),
        204
    );
    let rest = running.frames().await;
    assert!(
        started.elapsed() < Duration::from_millis(1_000),
        "{:?}",
        started.elapsed()
    );
    let last = rest.last().unwrap();
    assert_eq!(last["event"], "error");
    assert_eq!(last["error"]["code"], "cancelled");
    assert!(!events(&rest).contains(&"done"));
    // Cancel on an idle or unknown conversation is a no-op 204.
    assert_eq!(
        client.post("/api/studio/cancel", &cancel).await.status(),
        204
    );
    let unknown = json!({"kind": "turn.cancel", "conversation_id": "never"});
    assert_eq!(
        client.post("/api/studio/cancel", &unknown).await.status(),
        204
    );
    // The conversation takes a new turn at once: the lease was released.
    let next = client
        .stream("/api/studio/turn", &turn("c8", "hello"))
        .await;
    assert_eq!(events(&next).last(), Some(&"done"));
}

async fn finished_turn_with_card(
    client: &StudioClient,
    conversation: &str,
    auto_add: bool,
) -> Vec<Value> {
    let mut request = turn(conversation, "Population of Chad");
    request["auto_add"] = json!(auto_add);
    let first = client.stream("/api/studio/turn", &request).await;
    client
        .stream(
            "/api/studio/interrupt",
            &answer(conversation, &first[1]["interrupt_id"], "approve"),
        )
        .await
}

fn mutate(conversation: &str, revision: u64, ops: Value) -> Value {
    json!({"kind": "composition.mutate", "conversation_id": conversation, "expected_revision": revision, "ops": ops})
}

#[tokio::test]
async fn the_canvas_applies_whole_mutations_with_optimistic_concurrency() {
    let (_dir, _ledger, client) = studio().await;
    let frames = finished_turn_with_card(&client, "c9", false).await;
    assert!(
        !events(&frames).contains(&"composition.updated"),
        "auto_add false adds nothing"
    );
    assert!(frames.last().unwrap()["composition"].is_null());

    // An all-add mutation bootstraps the canvas.
    let (status, manifest) = client
        .json(
            "/api/studio/composition",
            &mutate("c9", 0, json!([{"op": "add", "component_id": "cmp-1-1"}])),
        )
        .await;
    assert_eq!(status, 200, "{manifest}");
    assert_eq!(manifest["revision"], 1);
    assert_eq!(manifest["blocks"][0]["type"], "line_chart");
    assert_eq!(manifest["counts"]["blocks"], 1);

    // A stale revision is refused and nothing applies.
    let (status, body) = client
        .json(
            "/api/studio/composition",
            &mutate("c9", 0, json!([{"op": "pin", "component_id": "cmp-1-1"}])),
        )
        .await;
    assert_eq!(
        (status, body["code"].as_str(), body["retry"].as_str()),
        (409, Some("edit_conflict"), Some("refresh_then_retry"))
    );
    // A mutation with one bad op applies none of its ops.
    let ops =
        json!([{"op": "pin", "component_id": "cmp-1-1"}, {"op": "add", "component_id": "nope"}]);
    let (status, body) = client
        .json("/api/studio/composition", &mutate("c9", 1, ops))
        .await;
    assert_eq!(
        (status, body["pointer"].as_str()),
        (404, Some("/ops/1/component_id"))
    );

    let ops = json!([{"op": "pin", "component_id": "cmp-1-1"},
                     {"op": "set_card_meta", "component_id": "cmp-1-1", "meta": {"subtitle": "since 2000"}},
                     {"op": "set_layout_hints", "layout_hints": {"columns": 2}}]);
    let (status, manifest) = client
        .json("/api/studio/composition", &mutate("c9", 1, ops))
        .await;
    assert_eq!(status, 200, "{manifest}");
    assert_eq!(manifest["blocks"][0]["pinned"], true);
    assert_eq!(manifest["blocks"][0]["meta"]["subtitle"], "since 2000");
    assert_eq!(manifest["counts"]["pinned"], 1);
    // Removing keeps the component addressable: it can be added back.
    let (_, manifest) = client
        .json(
            "/api/studio/composition",
            &mutate(
                "c9",
                2,
                json!([{"op": "remove", "component_id": "cmp-1-1"}]),
            ),
        )
        .await;
    assert_eq!(manifest["counts"]["blocks"], 0);
    let (status, manifest) = client
        .json(
            "/api/studio/composition",
            &mutate("c9", 3, json!([{"op": "add", "component_id": "cmp-1-1"}])),
        )
        .await;
    assert_eq!((status, manifest["revision"].as_u64()), (200, Some(4)));
}

#[tokio::test]
async fn a_mutation_during_a_turn_and_the_turns_own_canvas_edits_both_survive() {
    let (_dir, _ledger, client) = studio().await;
    finished_turn_with_card(&client, "c10", true).await;
    let second = client
        .stream("/api/studio/turn", &turn("c10", "slow second"))
        .await;
    let response = client
        .post(
            "/api/studio/interrupt",
            &answer("c10", &second[1]["interrupt_id"], "approve"),
        )
        .await;
    let mut running = SseReader::new(response);
    assert!(matches!(running.next().await, Some(SseEvent::Frame { .. })));
    // While turn 2 runs, pin turn 1's card.
    let (status, manifest) = client
        .json(
            "/api/studio/composition",
            &mutate("c10", 1, json!([{"op": "pin", "component_id": "cmp-1-1"}])),
        )
        .await;
    assert_eq!(status, 200, "{manifest}");
    let rest = running.frames().await;
    let done = rest.last().unwrap();
    assert_eq!(done["event"], "done");
    let blocks = done["composition"]["blocks"].as_array().unwrap();
    assert_eq!(blocks.len(), 2, "the turn's card was added: {blocks:?}");
    assert_eq!(blocks[0]["pinned"], true, "the concurrent pin survived");
}

#[tokio::test]
async fn a_dropped_stream_can_be_read_again_from_the_ledger() {
    let (_dir, _ledger, client) = studio().await;
    let first = client
        .stream("/api/studio/turn", &turn("c11", "GDP of Ghana"))
        .await;
    let resumed = client
        .stream(
            "/api/studio/interrupt",
            &answer("c11", &first[1]["interrupt_id"], "approve"),
        )
        .await;
    let replayed = client
        .stream(
            "/api/studio/stream",
            &json!({"conversation_id": "c11", "after_seq": 0}),
        )
        .await;
    let mut all = first.clone();
    all.extend(resumed.clone());
    assert_eq!(replayed, all, "every frame of the turn, as sent");
    let tail = client
        .stream(
            "/api/studio/stream",
            &json!({"conversation_id": "c11", "after_seq": 5}),
        )
        .await;
    assert_eq!(tail.first().unwrap()["seq"], 6);
    let (status, _) = client
        .json("/api/studio/stream", &json!({"conversation_id": "unknown"}))
        .await;
    assert_eq!(status, 404);
    // Every event carries `id: <seq>`, so Last-Event-ID resumes too.
    let response = client
        .post(
            "/api/studio/stream",
            &json!({"conversation_id": "c11", "after_seq": 6}),
        )
        .await;
    let mut reader = SseReader::new(response);
    let Some(SseEvent::Frame { id, frame }) = reader.next().await else {
        panic!("a frame");
    };
    assert_eq!(id.as_deref(), Some("7"));
    assert_eq!(frame["seq"], 7);
}

#[tokio::test]
async fn a_restarted_server_continues_a_paused_conversation() {
    let dir = scratch();
    let interrupt = {
        let (ledger, _) = open(dir.path());
        let (addr, server) = start_stoppable_studio(ledger, quick_studio()).await;
        let client = StudioClient::new(addr, "alice");
        let first = client
            .stream("/api/studio/turn", &turn("c12", "GDP of Fiji"))
            .await;
        // Stop the server; the store closes with its last handle.
        server.stop().await;
        first[1]["interrupt_id"].clone()
    };
    // A new process view of the same store (nothing carried in memory).
    let ledger =
        ledgerwire::ledger::local::open_scrubbing(dir.path(), OpenMode::MustExist).unwrap();
    let client = StudioClient::new(start_studio(ledger, quick_studio()).await, "alice");
    let resumed = client
        .stream(
            "/api/studio/interrupt",
            &answer("c12", &interrupt, "approve"),
        )
        .await;
    assert_eq!(events(&resumed).first(), Some(&"plan.approved"));
    assert_eq!(events(&resumed).last(), Some(&"done"));
}

#[tokio::test]
async fn two_servers_on_one_ledger_share_pauses_cancels_and_the_canvas() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let a = StudioClient::new(start_studio(ledger.clone(), quick_studio()).await, "alice");
    let b = StudioClient::new(start_studio(ledger.clone(), quick_studio()).await, "alice");
    // Pause on A, resume on B.
    let first = a
        .stream("/api/studio/turn", &turn("c13", "GDP of Togo"))
        .await;
    let resumed = b
        .stream(
            "/api/studio/interrupt",
            &answer("c13", &first[1]["interrupt_id"], "approve"),
        )
        .await;
    assert_eq!(events(&resumed).last(), Some(&"done"));

    // A mutate on B during A's turn survives A's records.
    let second = a
        .stream("/api/studio/turn", &turn("c13", "slow again"))
        .await;
    let response = a
        .post(
            "/api/studio/interrupt",
            &answer("c13", &second[1]["interrupt_id"], "approve"),
        )
        .await;
    let mut running = SseReader::new(response);
    assert!(matches!(running.next().await, Some(SseEvent::Frame { .. })));
    let (status, _) = b
        .json(
            "/api/studio/composition",
            &mutate("c13", 1, json!([{"op": "pin", "component_id": "cmp-1-1"}])),
        )
        .await;
    assert_eq!(status, 200);
    // A second turn on B while A streams: 409.
    let (status, _) = b.json("/api/studio/turn", &turn("c13", "hello")).await;
    assert_eq!(status, 409);
    // /cancel on B stops A's stream within a heartbeat or so.
    let started = std::time::Instant::now();
    assert_eq!(
        b.post(
            "/api/studio/cancel",
            &json!({"kind": "turn.cancel", "conversation_id": "c13"})
        )
        .await
        .status(),
        204
    );
    let rest = running.frames().await;
    assert!(started.elapsed() < Duration::from_millis(1_000));
    assert_eq!(rest.last().unwrap()["error"]["code"], "cancelled");
    let hints = json!([{"op": "set_layout_hints", "layout_hints": {}}]);
    let (status, manifest) = b
        .json("/api/studio/composition", &mutate("c13", 2, hints))
        .await;
    assert_eq!(status, 200, "{manifest}");
    assert_eq!(manifest["blocks"][0]["pinned"], true);
}

#[tokio::test]
async fn an_identical_retry_while_the_resumed_segment_streams_gets_409() {
    let (_dir, _ledger, client) = studio().await;
    let first = client
        .stream("/api/studio/turn", &turn("c14", "slow one"))
        .await;
    let body = answer("c14", &first[1]["interrupt_id"], "approve");
    let response = client.post("/api/studio/interrupt", &body).await;
    let mut running = SseReader::new(response);
    assert!(matches!(running.next().await, Some(SseEvent::Frame { .. })));
    let (status, refusal) = client.json("/api/studio/interrupt", &body).await;
    assert_eq!(
        (status, refusal["code"].as_str()),
        (409, Some("transient_unavailable"))
    );
    assert!(refusal["retry_after_seconds"].as_u64().is_some());
    let rest = running.frames().await;
    assert_eq!(rest.last().unwrap()["event"], "done");
    // Exactly one plan.approved and one approval record for the interrupt.
    let replayed = client
        .stream(
            "/api/studio/stream",
            &json!({"conversation_id": "c14", "after_seq": 0}),
        )
        .await;
    assert_eq!(
        events(&replayed)
            .iter()
            .filter(|e| **e == "plan.approved")
            .count(),
        1
    );
}

#[tokio::test]
async fn last_event_id_resumes_a_reconnect_after_that_seq() {
    let (_dir, _ledger, client) = studio().await;
    client
        .stream("/api/studio/turn", &turn("c15", "hello there"))
        .await;
    let response = client
        .http
        .post(format!("{}/api/studio/stream", client.base))
        .bearer_auth("alice")
        .header("Last-Event-ID", "1")
        .json(&json!({"conversation_id": "c15"}))
        .send()
        .await
        .unwrap();
    let frames = SseReader::new(response).frames().await;
    assert_eq!(seqs(&frames), [2, 3], "{frames:?}");
}

#[tokio::test]
async fn closing_the_stream_aborts_the_segment_and_frees_the_conversation() {
    let (_dir, ledger, client) = studio().await;
    let first = client
        .stream("/api/studio/turn", &turn("c16", "slow walk"))
        .await;
    let response = client
        .post(
            "/api/studio/interrupt",
            &answer("c16", &first[1]["interrupt_id"], "approve"),
        )
        .await;
    let mut running = SseReader::new(response);
    assert!(matches!(running.next().await, Some(SseEvent::Frame { .. })));
    drop(running);
    // The segment sees the closed response and releases its lease; wait
    // for that record instead of sleeping.
    let stream = crate::support::streams(&ledger)
        .await
        .into_iter()
        .find(|s| s.as_str().ends_with("/c16"))
        .unwrap();
    let mut records = Box::pin(ledger.tail(&stream, 0));
    loop {
        let record = tokio::time::timeout(
            Duration::from_secs(10),
            futures_util::StreamExt::next(&mut records),
        )
        .await
        .expect("a release within the timeout")
        .unwrap()
        .unwrap();
        if let Some(Ok(release)) = <ledgerwire::studio::records::SegmentReleased as ledgerwire::ledger::Payload>::from_record(&record)
            && release.segment == 2
        {
            assert_eq!(release.end, ledgerwire::studio::records::SegmentEnd::Disconnected);
            break;
        }
    }
    let next = client
        .stream("/api/studio/turn", &turn("c16", "hello"))
        .await;
    assert_eq!(events(&next).last(), Some(&"done"));
}

#[tokio::test]
async fn a_plan_that_can_no_longer_be_read_is_planned_again_from_the_question() {
    use ledgerwire::ledger::{Durability, ExpectedPosition, Payload};
    use ledgerwire::studio::auth::Principal;
    use ledgerwire::studio::records::{
        FrameSent, SegmentClaimed, SegmentEnd, SegmentReleased, TurnRequested, conversation_stream,
    };
    use ledgerwire::wire::ids::ConversationId;

    let dir = scratch();
    let (ledger, _) = open(dir.path());
    // A turn paused on a plan that an older build recorded in a shape this
    // build cannot read.
    let stream = conversation_stream(
        &Principal::of_token("alice"),
        &ConversationId::new("c17").unwrap(),
    )
    .unwrap();
    let old_plan = json!({"event": "plan.proposed", "seq": 2, "interrupt_id": "int-old",
                          "plan_version_id": "pv-old", "version": 3, "steps": "an older shape"});
    let records = vec![
        TurnRequested {
            turn: 1,
            request: json!({"conversation_id": "c17", "message": "GDP of Mali"}).to_string(),
        }
        .to_record(),
        SegmentClaimed {
            segment: 1,
            turn: 1,
            owner: "old build".into(),
            at_ms: 0,
            ttl_ms: 1,
            first_seq: 1,
        }
        .to_record(),
        FrameSent {
            turn: 1,
            segment: 1,
            seq: 2,
            frame: old_plan.to_string(),
        }
        .to_record(),
        SegmentReleased {
            segment: 1,
            at_ms: 0,
            end: SegmentEnd::Paused,
        }
        .to_record(),
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
    let client = StudioClient::new(start_studio(ledger, quick_studio()).await, "alice");
    let frames = client
        .stream(
            "/api/studio/interrupt",
            &answer("c17", &json!("int-old"), "approve"),
        )
        .await;
    assert_eq!(
        events(&frames),
        [
            "message.delta",
            "message.complete",
            "message.delta",
            "plan.versioned",
            "plan.proposed"
        ]
    );
    assert_eq!(frames[0]["seq"], 3);
    let versioned = &frames[3];
    assert_eq!(versioned["supersedes"], "pv-old");
    assert_eq!(
        versioned["version"], 1,
        "lower than the version it replaces"
    );
    assert_eq!(versioned["plan_version_id"], frames[4]["plan_version_id"]);
    // The new plan is an ordinary pause: approving it runs the turn.
    let done = client
        .stream(
            "/api/studio/interrupt",
            &answer("c17", &frames[4]["interrupt_id"], "approve"),
        )
        .await;
    assert_eq!(events(&done).last(), Some(&"done"));
}

#[tokio::test]
async fn a_reconnect_reads_the_current_turn_only() {
    let (_dir, _ledger, client) = studio().await;
    let first = client
        .stream("/api/studio/turn", &turn("c30", "GDP of Ghana"))
        .await;
    client
        .stream(
            "/api/studio/interrupt",
            &answer("c30", &first[1]["interrupt_id"], "approve"),
        )
        .await;
    let second = client
        .stream("/api/studio/turn", &turn("c30", "GDP of Peru"))
        .await;
    let replayed = client
        .stream(
            "/api/studio/stream",
            &json!({"conversation_id": "c30", "after_seq": 0}),
        )
        .await;
    assert_eq!(replayed, second, "the second turn's frames, and no others");
}

/// A conversation longer than the snapshot interval, read after a restart
/// (through its snapshots) and extended there, folds to exactly what its
/// records alone fold to.
#[tokio::test]
async fn a_long_conversation_after_a_restart_folds_as_its_records_do() {
    use ledgerwire::ledger::FoldCache;
    use ledgerwire::studio::auth::Principal;
    use ledgerwire::studio::conversation::ConversationFold;
    use ledgerwire::studio::records::conversation_stream;
    use ledgerwire::studio::service::CONVERSATION_SNAPSHOT_INTERVAL_RECORDS;
    use ledgerwire::wire::ids::ConversationId;

    /// Planned turns: each about 20 records, so several snapshots.
    const TURNS: usize = 16;
    async fn planned_turn(client: &StudioClient, conversation: &str) {
        let first = client
            .stream("/api/studio/turn", &turn(conversation, "GDP of Chad"))
            .await;
        assert_eq!(events(&first).last(), Some(&"plan.proposed"));
        let resumed = client
            .stream(
                "/api/studio/interrupt",
                &answer(conversation, &first[1]["interrupt_id"], "approve"),
            )
            .await;
        assert_eq!(events(&resumed).last(), Some(&"done"));
    }

    let dir = scratch();
    {
        let (ledger, _) = open(dir.path());
        let (addr, server) = start_stoppable_studio(ledger, quick_studio()).await;
        let client = StudioClient::new(addr, "alice");
        for _ in 0..TURNS {
            planned_turn(&client, "c-long").await;
        }
        server.stop().await;
    }
    let ledger =
        ledgerwire::ledger::local::open_scrubbing(dir.path(), OpenMode::MustExist).unwrap();
    let id = ConversationId::new("c-long".to_owned()).unwrap();
    let key = conversation_stream(&Principal::of_token("alice"), &id).unwrap();
    let records = ledger.fold::<ConversationFold>(&key).await.unwrap();
    assert!(
        records.position > 2 * CONVERSATION_SNAPSHOT_INTERVAL_RECORDS,
        "{} records: long enough for snapshots",
        records.position
    );
    // A cache that starts from the snapshots the server wrote.
    let cached = FoldCache::<ConversationFold>::with_limits(
        ledger.clone(),
        CONVERSATION_SNAPSHOT_INTERVAL_RECORDS,
        1,
    );
    let from_snapshot = cached.state(&key).await.unwrap();
    assert_eq!(from_snapshot.position, records.position);
    assert_eq!(from_snapshot.state, records.state);

    // The restarted server goes on from there, and still agrees.
    let client = StudioClient::new(start_studio(ledger.clone(), quick_studio()).await, "alice");
    planned_turn(&client, "c-long").await;
    let records = ledger.fold::<ConversationFold>(&key).await.unwrap();
    cached.clear();
    let from_snapshot = cached.state(&key).await.unwrap();
    assert_eq!(from_snapshot.state, records.state);
    assert_eq!(records.state.turns.len(), TURNS + 1);
}
