//! An answer's text streamed as the model writes it: deltas reach the
//! client while the model is still writing (the fake holds each chunk
//! until the test has seen a delta); text from a reply that then breaks
//! or fails the schema is withdrawn by an empty `message.complete`;
//! `/cancel` and heartbeats work mid-answer; and a reused call yields the
//! frames the live one did, which is what replay checks.

use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use ledgerwire::agent::model::exchange::ModelExchange;
use ledgerwire::agent::model::{CallError, ModelAgent};
use ledgerwire::agent::{Agent, Beat};
use ledgerwire::wire::frame::Frame;
use serde_json::{Value, json};

use super::fake::Reply;
use super::{
    Scripted, assert_replays_without_a_model, assert_well_formed, cancel_and_see_the_model_hang_up,
    events, pieces, rig, step, turn,
};
use crate::support::{SseEvent, SseReader};

/// Asks the question of `conversation`; the stream's response.
async fn ask(rig: &super::Rig, conversation: &str) -> reqwest::Response {
    let question = turn(conversation, "How did Chad's population change?");
    let response = rig.client.post("/api/studio/turn", &question).await;
    assert_eq!(response.status(), 200);
    response
}

const ANSWER: &str = "Chad's population grew **fivefold** since 1960, to about 17 million.";

/// The text of the deltas in `frames`, joined.
fn deltas(frames: &[Value]) -> String {
    frames
        .iter()
        .filter(|f| f["event"] == "message.delta")
        .map(|f| f["text"].as_str().unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn an_answers_text_reaches_the_client_while_the_model_writes_it() {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    const PIECES: usize = 6;
    let reply = Reply::Gated {
        content: step(json!({"tool": "answer", "text": ANSWER})),
        pieces: PIECES,
        gate: Arc::clone(&gate),
    };
    let rig = rig(vec![reply], None, 20_000).await;
    let response = ask(&rig, "g").await;
    let mut reader = SseReader::new(response);
    let mut frames = Vec::new();
    let mut text = String::new();
    while let Some(event) = reader.next().await {
        let SseEvent::Frame { frame, .. } = event else {
            continue;
        };
        // The model writes its next chunk only once a delta came out,
        // and the rest of its reply once the whole text has.
        if frame["event"] == "message.delta" {
            text.push_str(frame["text"].as_str().unwrap());
            gate.add_permits(if text == ANSWER { PIECES } else { 1 });
        }
        frames.push(frame);
    }
    assert_well_formed(&frames);
    let streamed = frames
        .iter()
        .take_while(|f| f["event"] == "message.delta")
        .count();
    assert!(streamed >= 3, "{streamed} deltas: {:?}", events(&frames));
    assert_eq!(
        &events(&frames)[streamed..],
        ["message.complete", "suggestions", "done"]
    );
    assert_eq!(deltas(&frames), ANSWER);
    assert_eq!(frames[streamed]["text"], ANSWER);
    assert_eq!(rig.fake.calls(), 1);
    assert_replays_without_a_model(&rig.ledger).await;
}

#[tokio::test]
async fn text_from_a_reply_that_breaks_or_fails_the_schema_is_withdrawn() {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let partial = format!("{{\"tool\": \"answer\", \"text\": \"{}", &ANSWER[..30]);
    let not_json = format!("{{\"tool\": \"answer\", \"text\": \"{ANSWER}\", \"series\": nonsense");
    let replies = vec![
        // It stops mid-stream: the connection drops (once its text is out).
        Reply::Cut {
            content: partial,
            gate: Arc::clone(&gate),
        },
        // Its text is fine, and then it is not JSON.
        Reply::Stream(not_json),
        Reply::Stream(step(json!({"tool": "answer", "text": ANSWER}))),
    ];
    let rig = rig(replies, None, 10_000).await;
    let response = ask(&rig, "w").await;
    let mut reader = SseReader::new(response);
    let mut frames = Vec::new();
    while let Some(event) = reader.next().await {
        if let SseEvent::Frame { frame, .. } = event {
            if frame["event"] == "message.delta" {
                gate.add_permits(1);
            }
            frames.push(frame);
        }
    }
    assert_well_formed(&frames);
    // Each try's text, then what closes it: withdrawn twice, then kept.
    let mut tries: Vec<(String, String)> = Vec::new();
    let mut text = String::new();
    for frame in &frames {
        match frame["event"].as_str() {
            Some("message.delta") => text.push_str(frame["text"].as_str().unwrap()),
            Some("message.complete") => tries.push((
                std::mem::take(&mut text),
                frame["text"].as_str().unwrap().to_owned(),
            )),
            _ => {}
        }
    }
    assert_eq!(tries.len(), 3, "{:?}", events(&frames));
    assert!(!tries[0].0.is_empty() && ANSWER.starts_with(&tries[0].0));
    assert_eq!(tries[0].1, "", "the broken reply's text is withdrawn");
    assert_eq!(tries[1], (ANSWER.to_owned(), String::new()));
    assert_eq!(tries[2], (ANSWER.to_owned(), ANSWER.to_owned()));
    assert_eq!(frames.last().unwrap()["event"], "done");
    let retry = rig.fake.requests()[2]["messages"].to_string();
    assert!(retry.contains("That reply was refused"), "{retry}");
    assert_replays_without_a_model(&rig.ledger).await;
}

#[tokio::test]
async fn cancel_mid_answer_hangs_up_on_the_model_and_the_log_still_replays() {
    let partial = format!("{{\"tool\": \"answer\", \"text\": \"{ANSWER}");
    let rig = rig(vec![Reply::StreamThenHang(partial)], None, 60_000).await;
    let response = ask(&rig, "c").await;
    let mut reader = SseReader::new(response);
    let mut streamed = String::new();
    let mut heartbeats = 0;
    while heartbeats < 2 {
        match reader.next().await {
            Some(SseEvent::Frame { frame, .. }) => {
                assert_eq!(frame["event"], "message.delta", "{frame}");
                streamed.push_str(frame["text"].as_str().unwrap());
            }
            // Heartbeats after the text: the model is still writing.
            Some(SseEvent::Comment(text)) if text == "ka" && !streamed.is_empty() => {
                heartbeats += 1;
            }
            Some(_) => {}
            None => panic!("the stream closed while the model wrote"),
        }
    }
    assert_eq!(streamed, ANSWER.trim_end());
    cancel_and_see_the_model_hang_up(&rig, &mut reader, "c").await;
    // The cut call's text is in the log only as its deltas: the check
    // stops where the call began.
    assert_replays_without_a_model(&rig.ledger).await;
}

/// A segment's frames and the calls it recorded (their end, not the
/// note that one's text began).
async fn run(
    agent: &ModelAgent,
    exchanges: Vec<ModelExchange>,
) -> (Vec<Frame>, Vec<ModelExchange>) {
    let mut context = crate::agent::context("How did Chad's population change?", Vec::new());
    context.exchanges = Arc::new(exchanges);
    let beats: Vec<Beat> = agent.beats(context).collect().await;
    let mut frames = Vec::new();
    let mut recorded = Vec::new();
    for beat in beats {
        match beat {
            Beat::Frame(frame) => frames.push(*frame),
            Beat::Exchange(call) if !call.streaming => recorded.push(*call),
            _ => {}
        }
    }
    (frames, recorded)
}

#[tokio::test]
async fn a_reused_or_replayed_call_sends_the_frames_the_live_one_did() {
    let reply = step(json!({"tool": "answer", "text": ANSWER}));
    let text_at = reply.find("Chad").unwrap();
    let not_json = format!("{{\"tool\": \"answer\", \"text\": \"{}\" !", &ANSWER[..20]);
    let script = vec![
        // Complete, but not JSON: kept, and reused by a retried segment.
        (pieces(&not_json, &[text_at + 4, text_at + 12]), None),
        // Cut off mid-text: a failure whose text must replay too.
        (
            pieces(&reply, &[text_at + 9, text_at + 15]),
            Some(CallError::Dropped),
        ),
        (
            pieces(&reply, &[text_at + 3, text_at + 20, text_at + 41]),
            None,
        ),
    ];
    let live = ModelAgent::with_transport(Arc::new(Scripted(Mutex::new(script))), 4);
    let (frames, recorded) = run(&live, Vec::new()).await;
    let kinds: Vec<_> = frames.iter().map(Frame::event).collect();
    assert_eq!(recorded.len(), 3, "{kinds:?}");
    assert!(recorded[1].reply.is_none() && !recorded[1].partial.is_empty());
    assert!(recorded[2].text_cuts.len() >= 3, "{:?}", recorded[2]);
    let deltas = frames
        .iter()
        .filter(|f| matches!(f, Frame::MessageDelta(_)))
        .count();
    assert!(deltas >= 7, "{kinds:?}");
    // Asked of no model, every call read from its record.
    let offline = ModelAgent::with_transport(Arc::new(Scripted(Mutex::default())), 4);
    let (again, asked) = run(&offline, recorded).await;
    assert!(asked.is_empty(), "a recorded call was asked again");
    assert_eq!(again, frames);
}
