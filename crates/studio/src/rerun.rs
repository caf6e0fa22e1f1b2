//! Re-running a recorded conversation's segments through an agent, to show
//! that the log alone reproduces what was streamed (`ledgerwire replay
//! --check`).
//!
//! Owns: walking a conversation's records in order, rebuilding each
//! segment's agent context from the fold at the moment the segment was
//! claimed (the state the server built it from), and comparing the agent's
//! frames again with the recorded ones (in a segment cut short while a
//! model call streamed, up to that call: its reply never reached the
//! log). Must never: write to the store, or
//! compare what the server adds around the agent (seq, pause and trace
//! ids, `plan.approved`, `composition.updated`, a cancel's error or a
//! stopped switch's re-offer).

use std::sync::Arc;

use futures_util::StreamExt;
use serde_json::Value;

use super::conversation::{Conversation, ConversationFold};
use super::records::{FrameSent, ModelExchangedV2, SegmentClaimed, SegmentEnd, SegmentReleased};
use super::turn_context::{SWITCH_CANCELLED, past_turns, segment_start};
use ledgerwire_agent::{Agent, Recall, TurnContext};
use ledgerwire_ledger::{Fold, FoldError, Payload, Record};

/// How one recorded segment compares with the agent's frames now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentCheck {
    pub segment: u32,
    pub turn: u32,
    /// Agent frames recorded for the segment.
    pub recorded: usize,
    pub outcome: CheckOutcome,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckOutcome {
    /// The agent produced the recorded frames again.
    Same,
    /// Frame `index` (of the agent's) differs, or one side has more.
    Differs {
        index: usize,
        recorded: Option<String>,
        now: Option<String>,
    },
    /// The segment re-planned a plan it could not read: the server, not
    /// the agent, chose its frames.
    Skipped,
}

/// A segment being read: its context and the frames recorded so far.
struct Open {
    claim: SegmentClaimed,
    context: Option<TurnContext>,
    frames: Vec<Value>,
    /// Frames recorded before a model call whose text started to stream
    /// and that has no record of its end (yet).
    unfinished: Option<usize>,
}

/// Checks every segment of a conversation's `records` (oldest first)
/// against `agent`.
pub async fn check_segments(
    records: impl IntoIterator<Item = Record>,
    agent: &dyn Agent,
) -> Result<Vec<SegmentCheck>, FoldError> {
    let mut state = Conversation::default();
    let mut open: Option<Open> = None;
    let mut checks = Vec::new();
    for record in records {
        ConversationFold::apply(&mut state, &record)?;
        if let Some(Ok(claim)) = SegmentClaimed::from_record(&record) {
            if let Some(done) = open.take() {
                checks.push(compare(done, None, agent).await);
            }
            // A segment that re-planned an unreadable plan sent the
            // server's frames, not the agent's: there is nothing to rerun.
            let recall = Recall::new(Arc::new(past_turns(&state, claim.turn)));
            let context = segment_start(&state, claim.turn, recall, None)
                .and_then(|(context, recovery)| recovery.is_none().then_some(context));
            open = Some(Open {
                claim,
                context,
                frames: Vec::new(),
                unfinished: None,
            });
        } else if let Some(Ok(sent)) = FrameSent::from_record(&record) {
            if let Some(current) = open.as_mut().filter(|o| o.claim.segment == sent.segment)
                && let Ok(frame) = serde_json::from_str::<Value>(&sent.frame)
            {
                current.frames.push(frame);
            }
        } else if let Some(Ok(call)) = ModelExchangedV2::read(&record) {
            let Some(current) = open.as_mut().filter(|o| o.claim.segment == call.segment) else {
                continue;
            };
            // A call's text started to stream: until its end is recorded,
            // the deltas after this point are the log's only copy of it.
            if call.streaming {
                current.unfinished = Some(current.frames.len());
                continue;
            }
            current.unfinished = None;
            // The segment's own calls, failed ones included, replay it.
            if let Some(context) = current.context.as_mut() {
                Arc::make_mut(&mut context.exchanges).push(call.exchange(false));
            }
        } else if let Some(Ok(release)) = SegmentReleased::from_record(&record)
            && let Some(current) = open.take_if(|o| o.claim.segment == release.segment)
        {
            checks.push(compare(current, Some(release.end), agent).await);
        }
    }
    if let Some(current) = open {
        checks.push(compare(current, None, agent).await);
    }
    Ok(checks)
}

async fn compare(open: Open, end: Option<SegmentEnd>, agent: &dyn Agent) -> SegmentCheck {
    let recorded: Vec<Value> = open
        .frames
        .iter()
        .filter(|frame| !is_server_frame(frame))
        .map(normalised)
        .collect();
    // A segment cut short while a model call streamed its text: the text
    // went out, but the call's reply is not in the log, so the check
    // stops where the call began (what follows must be its deltas).
    let settled = open.unfinished.map(|at| {
        open.frames[..at]
            .iter()
            .filter(|frame| !is_server_frame(frame))
            .count()
    });
    let check = |outcome| SegmentCheck {
        segment: open.claim.segment,
        turn: open.claim.turn,
        recorded: recorded.len(),
        outcome,
    };
    let Some(context) = open.context else {
        return check(CheckOutcome::Skipped);
    };
    let now: Vec<Value> = agent
        .segment(context)
        .map(|frame| normalised(&serde_json::to_value(frame).unwrap_or_default()))
        .collect()
        .await;
    // A segment that ended on its own frame must match whole; one cut short
    // (client gone, cancel, crash) must be where the agent's frames begin.
    let whole = matches!(end, Some(SegmentEnd::Paused | SegmentEnd::Done));
    let compared = match settled {
        _ if whole => recorded.len().max(now.len()),
        Some(settled) => {
            let tail = recorded.get(settled..).unwrap_or_default();
            if let Some(odd) = tail.iter().find(|f| f["event"] != "message.delta") {
                return check(CheckOutcome::Differs {
                    index: settled,
                    recorded: Some(odd.to_string()),
                    now: None,
                });
            }
            settled
        }
        None => recorded.len(),
    };
    for index in 0..compared {
        let (was, is) = (recorded.get(index), now.get(index));
        if was != is {
            return check(CheckOutcome::Differs {
                index,
                recorded: was.map(Value::to_string),
                now: is.map(Value::to_string),
            });
        }
    }
    check(CheckOutcome::Same)
}

/// Frames the server adds around the agent's.
fn is_server_frame(frame: &Value) -> bool {
    match frame["event"].as_str() {
        Some("plan.approved" | "composition.updated") => true,
        Some("error") => matches!(
            frame["error"]["code"].as_str(),
            Some("cancelled" | "transient_unavailable")
        ),
        Some("plan.proposed") => frame["switch_failed"]["code"] == SWITCH_CANCELLED,
        _ => false,
    }
}

/// A frame without what the server stamps on it.
fn normalised(frame: &Value) -> Value {
    let mut frame = frame.clone();
    if let Some(object) = frame.as_object_mut() {
        object.remove("seq");
        object.remove("interrupt_id");
        object.remove("trace_id");
        if object.get("event").and_then(Value::as_str) == Some("done") {
            object.remove("composition");
        }
    }
    frame
}
