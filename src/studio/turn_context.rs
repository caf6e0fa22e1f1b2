//! What the agent may read when a segment starts: the turn's request and
//! answered pauses, the canvas, the digest of earlier turns and the recall
//! tool, built from the conversation fold exactly as `replay --check`
//! rebuilds it. Also what a resume does with a plan it can no longer read.
//!
//! Must never: read anything but the fold (and, for recall, the fold again
//! when the agent calls it), so a replay sees what the live segment saw.

use crate::agent::{
    AnsweredPause, DIGEST_MAX_BYTES, DIGEST_TURNS, PastCard, PastTurn, Recall, RecallStore,
    TurnContext,
};
use crate::ledger::StreamKey;

use super::conversation::{Conversation, Pause, Turn};
use super::wire::frame::Frame;
use super::wire::plan::{PlanProposed, SwitchFailed};
use super::wire::request::{Decision, InterruptResponse};

use super::service::Studio;

/// The plan a `/cancel` re-offers while this segment carries out a switch
/// (delta 23): the plan the switch was made from, unchanged, marked
/// `switch_cancelled`. `None` when the segment resumes anything else.
pub(super) fn switch_reoffer(context: &TurnContext) -> Option<PlanProposed> {
    let last = context.answers.last()?;
    let switch = last.response.switch.as_ref()?;
    let Frame::PlanProposed(plan) = &last.frame else {
        return None;
    };
    let mut reoffer = plan.clone();
    reoffer.switch_failed = Some(SwitchFailed {
        choice_id: switch.choice_id.clone(),
        option_id: switch.option_id.clone(),
        code: SWITCH_CANCELLED.to_owned(),
        reason: SWITCH_CANCELLED_REASON.to_owned(),
        retryable: Some(true),
    });
    Some(reoffer)
}

/// The `switch_failed.code` of a switch the user stopped.
pub const SWITCH_CANCELLED: &str = "switch_cancelled";
/// What the client shows, as a quiet note, on the row of a stopped switch.
pub const SWITCH_CANCELLED_REASON: &str = "You stopped this change, so the plan is as it was.";

/// What a resume does when the plan it answers can no longer be read
/// (a frame recorded by an older build, say).
pub(super) enum Recovery {
    /// Approve or amend: plan again from the question; the new plan
    /// supersedes the unreadable one (whose id is kept if it can be found).
    Replan { supersedes: String },
    /// Reject: close the turn.
    Close,
}

/// Whether the turn's latest answer answers a plan that does not parse.
pub(super) fn unreadable_plan(conversation: &Conversation, turn: u32) -> Option<Recovery> {
    let pause = turn_record(conversation, turn)?
        .pauses
        .last()
        .filter(|pause| pause.is_plan)?;
    let answer = read_answer(pause.answer.as_deref()?)?;
    recovery_for(pause, &serde_json::from_str(&pause.frame), Some(&answer))
}

/// What a resume does after `answer` to `pause` (its frame read as
/// `frame`), when the pause is a plan that does not parse.
fn recovery_for(
    pause: &Pause,
    frame: &serde_json::Result<Frame>,
    answer: Option<&InterruptResponse>,
) -> Option<Recovery> {
    let answer = answer.filter(|_| pause.is_plan)?;
    if matches!(frame, Ok(Frame::PlanProposed(_))) {
        return None;
    }
    if answer.decision == Decision::Reject {
        return Some(Recovery::Close);
    }
    let supersedes = serde_json::from_str::<serde_json::Value>(&pause.frame)
        .ok()
        .and_then(|frame| frame["plan_version_id"].as_str().map(str::to_owned))
        .unwrap_or_else(|| String::from("unreadable-plan"));
    Some(Recovery::Replan { supersedes })
}

fn read_answer(answer: &str) -> Option<InterruptResponse> {
    serde_json::from_str(answer).ok()
}

fn turn_record(conversation: &Conversation, turn: u32) -> Option<&Turn> {
    conversation
        .turns
        .get(usize::try_from(turn).ok()?.checked_sub(1)?)
}

/// Whether the next segment of `turn` re-plans a plan the server can no
/// longer read (its frames are then the server's, not the agent's).
pub fn segment_replans(conversation: &Conversation, turn: u32) -> bool {
    unreadable_plan(conversation, turn).is_some()
}

/// What the user reads when their plan had to be planned again.
pub(super) const REPLAN_NOTICE: &str =
    "I could no longer read the plan you answered, so I planned again from your question.";

/// What the agent may read for the next segment of `turn`, exactly as the
/// server builds it when it starts that segment. After an answer to a plan
/// that can no longer be read the agent sees no answers: it plans again
/// from the question.
pub fn turn_context(conversation: &Conversation, turn: u32, recall: Recall) -> Option<TurnContext> {
    segment_start(conversation, turn, recall).map(|(context, _)| context)
}

/// [`turn_context`] and, when the turn's latest answer answers a plan that
/// does not parse, what the segment does instead ([`unreadable_plan`]).
/// Each pause's frame and answer is parsed once: a resume reads the plan
/// it answers here and nowhere else.
pub(super) fn segment_start(
    conversation: &Conversation,
    turn: u32,
    recall: Recall,
) -> Option<(TurnContext, Option<Recovery>)> {
    let record = turn_record(conversation, turn)?;
    let mut read: Vec<_> = record
        .pauses
        .iter()
        .map(|pause| {
            let frame = serde_json::from_str::<Frame>(&pause.frame);
            (frame, pause.answer.as_deref().and_then(read_answer))
        })
        .collect();
    let recovery = record
        .pauses
        .last()
        .zip(read.last())
        .and_then(|(pause, (frame, answer))| recovery_for(pause, frame, answer.as_ref()));
    if recovery.is_some() {
        read.clear();
    }
    let answers = read
        .into_iter()
        .filter_map(|(frame, response)| {
            Some(AnsweredPause {
                frame: frame.ok()?,
                response: response?,
            })
        })
        .collect();
    let context = TurnContext {
        turn,
        request: record.request()?,
        answers,
        canvas: conversation.composition.clone(),
        components: conversation.components.clone(),
        history: digest(conversation, turn),
        recall,
        retried: false,
    };
    Some((context, recovery))
}

/// The plan a resume approves, as the context read it: the answered
/// pause `interrupt_id`, when its frame is a plan.
pub(super) fn answered_plan<'a>(
    context: &'a TurnContext,
    interrupt_id: &str,
) -> Option<&'a PlanProposed> {
    context
        .answers
        .iter()
        .rev()
        .find_map(|answer| match &answer.frame {
            Frame::PlanProposed(plan) if plan.interrupt_id.as_str() == interrupt_id => Some(plan),
            _ => None,
        })
}

/// A turn's record as the digests describe it.
fn past_turn(conversation: &Conversation, past: &super::conversation::Turn) -> Option<PastTurn> {
    let cards = past
        .cards
        .iter()
        .filter_map(|id| {
            let card = conversation.components.get(id)?;
            Some(PastCard {
                component_id: id.clone(),
                component_type: card.component_type.clone(),
                title: card.title.clone(),
            })
        })
        .collect();
    Some(PastTurn {
        turn: past.turn,
        message: past.request()?.message,
        close: past.close.clone(),
        cards,
    })
}

/// The conversation digest: the turns before `turn`, newest first, within
/// the digest's bounds.
fn digest(conversation: &Conversation, turn: u32) -> Vec<PastTurn> {
    let mut bytes = 0;
    conversation
        .turns
        .iter()
        .filter(|past| past.turn < turn)
        .rev()
        .take(DIGEST_TURNS)
        .filter_map(|past| past_turn(conversation, past))
        .take_while(|past| {
            bytes += past.weight_bytes();
            bytes <= DIGEST_MAX_BYTES
        })
        .collect()
}

/// Earlier turns of `conversation` (before `turn`), oldest first, as the
/// digests describe them.
pub fn past_turns(conversation: &Conversation, turn: u32) -> Vec<PastTurn> {
    conversation
        .turns
        .iter()
        .filter(|past| past.turn < turn)
        .filter_map(|past| past_turn(conversation, past))
        .collect()
}

/// The recall tool's store for a live segment: it folds the conversation
/// when the agent calls the tool (turns before this one no longer change),
/// so a segment never pins a copy of the state.
pub(super) struct LiveRecall {
    pub(super) studio: Studio,
    pub(super) stream: StreamKey,
    pub(super) turn: u32,
}

impl std::fmt::Debug for LiveRecall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LiveRecall({}, before turn {})", self.stream, self.turn)
    }
}

impl RecallStore for LiveRecall {
    fn visit_newest_first(&self, visit: &mut dyn FnMut(PastTurn) -> bool) {
        let Ok(folded) = self.studio.fold(&self.stream) else {
            return;
        };
        let conversation = &folded.state;
        let older = conversation
            .turns
            .iter()
            .rev()
            .filter(|t| t.turn < self.turn);
        for past in older.filter_map(|past| past_turn(conversation, past)) {
            if !visit(past) {
                break;
            }
        }
    }
}
