//! The `harness-sdk` documents: the main document of a conversation and
//! one document per message, as JSON values computed from the thread
//! fold. Pure.
//!
//! Owns: the documents' shapes (docs/statewire.md, "harness-sdk") and
//! their size bounds.
//! Must never: hold a value that is not computed from the fold, or grow
//! past its bound (a message over it sheds card payloads, saying so).

use serde_json::{Value, json};

use ledgerwire_studio::turns::{Turn, TurnStatus};

use super::transcript::{Body, Message, ThreadState, TurnIndex};

/// Turns the main document lists, newest last; older ones are counted in
/// `turns_omitted` (their messages stay readable by id).
pub const MAX_MAIN_TURNS: usize = 64;
/// Largest encoded message document, in bytes. Ours: a card is a frame of
/// at most a ledger record (1 MiB); a message over this sheds the largest
/// card payloads, which stay readable on the Studio's reconnect stream.
pub const MAX_MESSAGE_DOCUMENT_BYTES: usize = 1024 * 1024;

/// The namespace of message keys: `[conversation_id, "main", message_id]`.
pub const MESSAGE_NAMESPACE: &str = "main";

/// A turn's status as the documents name it.
fn turn_status(turn: &Turn, index: Option<&TurnIndex>) -> &'static str {
    match turn.status {
        TurnStatus::Streaming => "streaming",
        TurnStatus::Paused => match turn.open_pause() {
            Some(pause) if pause.is_plan => "paused_plan",
            Some(_) => "paused_questions",
            // Paused with its pause answered: the resume is on its way.
            None => "streaming",
        },
        TurnStatus::Done => "done",
        TurnStatus::Failed if index.is_some_and(|i| i.cancelled) => "cancelled",
        TurnStatus::Failed => "failed",
    }
}

/// The main document: where the conversation stands, its pending pause,
/// its canvas and its turns with their message ids.
pub fn main_document(conversation_id: &str, thread: &ThreadState) -> Value {
    let conversation = &thread.conversation;
    let current = conversation.current_turn();
    let status = match current {
        None => "idle",
        Some(turn) => match turn_status(turn, thread.index.last()) {
            "done" => "idle",
            other => other,
        },
    };
    let pause = current.and_then(|turn| turn.open_pause()).map(|pause| {
        let frame: Value = serde_json::from_str(&pause.frame).unwrap_or(Value::Null);
        let message = thread
            .current
            .as_ref()
            .and_then(|t| t.asked_by(&pause.interrupt_id));
        json!({
            "kind": if pause.is_plan { "plan" } else { "questions" },
            "interrupt_id": pause.interrupt_id,
            "message_id": message,
            "frame": frame,
        })
    });
    let listed = thread.index.len().saturating_sub(MAX_MAIN_TURNS);
    let turns: Vec<Value> = conversation
        .turns
        .iter()
        .zip(thread.index.iter())
        .skip(listed)
        .map(|(turn, index)| {
            json!({
                "turn": turn.turn,
                "status": turn_status(turn, Some(index)),
                "messages": index.messages,
            })
        })
        .collect();
    json!({
        "conversation_id": conversation_id,
        "status": status,
        "turn": current.map_or(0, |t| t.turn),
        "pause": pause,
        "canvas": conversation.composition,
        "turns": turns,
        "turns_omitted": listed,
    })
}

/// A message's document.
pub fn message_document(message: &Message) -> Value {
    let head = |role: &str, kind: &str| json!({"id": message.id, "turn": message.turn, "role": role, "kind": kind});
    let mut document = match &message.body {
        Body::Request { text, request } => {
            let mut d = head("user", "request");
            d["text"] = json!(text);
            d["request"] = request.clone();
            d
        }
        Body::Answer {
            interrupt_id,
            decision,
            response,
        } => {
            let mut d = head("user", "answer");
            d["interrupt_id"] = json!(interrupt_id);
            d["decision"] = json!(decision);
            d["response"] = response.clone();
            d
        }
        Body::Reply(reply) => {
            let mut d = head("assistant", "reply");
            let reply = serde_json::to_value(reply).unwrap_or(Value::Null);
            if let (Some(d), Value::Object(reply)) = (d.as_object_mut(), reply) {
                d.extend(reply);
            }
            d
        }
    };
    shed_cards(&mut document);
    document
}

/// Replaces the largest card payloads with a note until the document fits
/// [`MAX_MESSAGE_DOCUMENT_BYTES`].
fn shed_cards(document: &mut Value) {
    let encoded = |value: &Value| serde_json::to_vec(value).map_or(usize::MAX, |v| v.len());
    let mut size = encoded(document);
    while size > MAX_MESSAGE_DOCUMENT_BYTES {
        let Some(cards) = document["cards"].as_array_mut() else {
            return;
        };
        let largest = cards
            .iter_mut()
            .filter(|card| {
                card.get("payload")
                    .is_some_and(|p| p.get("omitted").is_none())
            })
            .max_by_key(|card| encoded(&card["payload"]));
        let Some(card) = largest else {
            return;
        };
        let bytes = encoded(&card["payload"]);
        card["payload"] = json!({
            "omitted": format!(
                "this card's payload ({bytes} bytes) does not fit the message document; \
                 read the frame from POST /api/studio/stream"
            )
        });
        size = encoded(document);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::Reply;

    #[test]
    fn an_oversized_reply_sheds_its_largest_card_payloads_only() {
        let big = "x".repeat(MAX_MESSAGE_DOCUMENT_BYTES / 2 + 10);
        let card = |text: &str| json!({"event": "component.created", "payload": {"rows": text}});
        let reply = Reply {
            segment: 1,
            cards: vec![card(&big), card("small"), card(&big)],
            ..Reply::default()
        };
        let message = Message {
            id: "t1-seg1".into(),
            turn: 1,
            changed_at: 0,
            body: Body::Reply(Box::new(reply)),
        };
        let document = message_document(&message);
        let encoded = serde_json::to_vec(&document).unwrap().len();
        assert!(encoded <= MAX_MESSAGE_DOCUMENT_BYTES, "{encoded}");
        let cards = document["cards"].as_array().unwrap();
        let shed = cards
            .iter()
            .filter(|card| card["payload"]["omitted"].is_string())
            .count();
        assert_eq!(shed, 1, "one shed card was enough");
        assert_eq!(cards[1]["payload"]["rows"], "small");
    }
}
