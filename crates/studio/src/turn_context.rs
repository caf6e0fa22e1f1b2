//! What the agent may read when a segment starts: the turn's request and
//! answered pauses, the canvas, the digest of earlier turns and the recall
//! tool, built from the conversation fold exactly as `replay --check`
//! rebuilds it. Also what a resume does with a plan it can no longer read.
//!
//! Must never: read anything but the fold (and, for recall, the fold again
//! when the agent calls it), so a replay sees what the live segment saw.
//! Owns: building the agent's context from a conversation.

use ledgerwire_agent::{
    AnsweredPause, DIGEST_MAX_BYTES, DIGEST_TURNS, PastCard, PastTurn, Recall, RecallStore,
    TurnContext,
};
use std::collections::BTreeMap;
use std::sync::Arc;

use ledgerwire_wire::composition::StreamedComponent;

use super::conversation::Conversation;
use ledgerwire_wire::frame::Frame;
use ledgerwire_wire::plan::{PlanProposed, SwitchFailed};
use ledgerwire_wire::request::{Decision, InterruptResponse};

use super::turns::{Pause, Turn, Turns};

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

/// What the user reads when their plan had to be planned again.
pub(super) const REPLAN_NOTICE: &str =
    "I could no longer read the plan you answered, so I planned again from your question.";

/// What the agent may read for the next segment of `turn`, exactly as the
/// server builds it when it starts that segment (and `replay --check`
/// rebuilds it), and, when the turn's latest answer answers a plan that
/// does not parse, what the segment does instead; the agent then sees no
/// answers, as it plans again from the question. Each pause's frame and
/// answer is parsed once: a resume reads the plan it answers here and
/// nowhere else, or takes it as its decision read it (`read_already`:
/// that pause's stored frame, read by the same [`Frame::from_stored_json`]).
pub(super) fn segment_start(
    conversation: &Conversation,
    turn: u32,
    recall: Recall,
    mut read_already: Option<ReadPause>,
) -> Option<(TurnContext, Option<Recovery>)> {
    let record = conversation.turn(turn)?;
    let mut read: Vec<_> = record
        .pauses
        .iter()
        .map(|pause| {
            let frame = match read_already.take_if(|read| read.interrupt_id == pause.interrupt_id) {
                Some(read) => Ok(read.frame),
                None => Frame::from_stored_json(&pause.frame),
            };
            let answer = pause.answer.as_deref();
            (frame, answer.and_then(|a| serde_json::from_str(a).ok()))
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
        exchanges: super::exchanges::reusable(record, record.answers().count()),
    };
    Some((context, recovery))
}

/// A pause's frame as a resume's decision read it, handed on to the
/// segment it starts so the frame is not read twice.
pub(super) struct ReadPause {
    pub interrupt_id: String,
    pub frame: Frame,
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
fn past_turn(conversation: &Conversation, past: &Turn) -> Option<PastTurn> {
    past_turn_with(&conversation.components, past)
}

/// [`past_turn`] with the components it names the cards of.
fn past_turn_with(
    components: &BTreeMap<String, StreamedComponent>,
    past: &Turn,
) -> Option<PastTurn> {
    let cards = past
        .cards
        .iter()
        .filter_map(|id| {
            let card = components.get(id)?;
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

/// The recall tool's store for a live segment: the turns as the segment
/// found them (turns before this one no longer change). It shares the
/// older turns' encoded chunks and the components with the folded state,
/// and copies only the decoded newest turns, so the fold never has to
/// copy the state for it while the segment runs.
pub(super) struct LiveRecall {
    turns: Turns,
    components: Arc<BTreeMap<String, StreamedComponent>>,
    turn: u32,
}

impl LiveRecall {
    pub(super) fn new(conversation: &Conversation, turn: u32) -> Self {
        Self {
            turns: conversation.turns.clone(),
            components: conversation.components.clone(),
            turn,
        }
    }
}

impl std::fmt::Debug for LiveRecall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LiveRecall(before turn {})", self.turn)
    }
}

impl RecallStore for LiveRecall {
    fn visit_newest_first(&self, visit: &mut dyn FnMut(PastTurn) -> bool) {
        let older = self.turns.iter().rev().filter(|t| t.turn < self.turn);
        for past in older.filter_map(|past| past_turn_with(&self.components, past)) {
            if !visit(past) {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    const PLAN: &str = r#"{"event":"plan.proposed","seq":2,"interrupt_id":"int-1-2","plan_version_id":"pv-1-1","version":1,"steps":[{"id":"s1","label":"Fetch","description":"Reads the series."}]}"#;

    /// Turn 1 paused on a plan whose frame is `frame`, answered `decision`.
    fn answered(frame: &str, decision: &str) -> Conversation {
        let mut turn = Turn::paused_on_a_plan(1, "int-1-2", true);
        turn.request = r#"{"conversation_id":"c","message":"chart it"}"#.into();
        turn.pauses[0].frame = frame.into();
        turn.pauses[0].answer = Some(format!(
            r#"{{"conversation_id":"c","interrupt_id":"int-1-2","decision":"{decision}"}}"#
        ));
        let mut conversation = Conversation::default();
        conversation.turns.push(turn);
        conversation
    }

    fn start(conversation: &Conversation) -> (TurnContext, Option<Recovery>) {
        let recall = Recall::new(Arc::new(Vec::<PastTurn>::new()));
        segment_start(conversation, 1, recall, None).expect("turn 1 reads back")
    }

    #[test]
    fn a_readable_plan_is_an_answer_the_agent_reads_and_the_approval_finds() {
        let conversation = answered(PLAN, "approve");
        let (context, recovery) = start(&conversation);
        assert!(recovery.is_none());
        assert_eq!(context.answers.len(), 1);
        let plan = answered_plan(&context, "int-1-2").expect("the answered plan");
        assert_eq!(plan.plan_version_id.as_str(), "pv-1-1");
        assert!(answered_plan(&context, "int-1-9").is_none());
    }

    /// A frame the decision read already is the one the context takes for
    /// its pause, and only for its pause.
    #[test]
    fn a_frame_read_by_the_decision_is_taken_for_its_pause_only() {
        let conversation = answered(PLAN, "approve");
        let recall = || Recall::new(Arc::new(Vec::<PastTurn>::new()));
        // Marked (seq 99), to tell a frame handed on from one read here.
        let read = |id: &str| {
            let mut frame = Frame::from_stored_json(PLAN).expect("the plan reads");
            frame.set_seq(99);
            ReadPause {
                interrupt_id: id.to_owned(),
                frame,
            }
        };
        let (fresh, _) = start(&conversation);
        assert_eq!(fresh.answers[0].frame.seq(), 2);
        let (handed, _) = segment_start(&conversation, 1, recall(), Some(read("int-1-2")))
            .expect("turn 1 reads back");
        assert_eq!(handed.answers[0].frame.seq(), 99, "taken for its pause");
        let (other, _) = segment_start(&conversation, 1, recall(), Some(read("int-1-9")))
            .expect("turn 1 reads back");
        assert_eq!(other.answers[0].frame, fresh.answers[0].frame);
    }

    #[test]
    fn an_unreadable_plan_is_planned_again_or_closed_and_the_agent_sees_no_answer() {
        let unreadable = r#"{"event":"plan.proposed","plan_version_id":"pv-1-1","steps":"?"}"#;
        let (context, recovery) = start(&answered(unreadable, "approve"));
        assert!(context.answers.is_empty());
        assert!(answered_plan(&context, "int-1-2").is_none());
        assert!(
            matches!(recovery, Some(Recovery::Replan { supersedes }) if supersedes == "pv-1-1")
        );
        let (_, recovery) = start(&answered("not json", "approve"));
        assert!(
            matches!(recovery, Some(Recovery::Replan { supersedes }) if supersedes == "unreadable-plan")
        );
        let (_, recovery) = start(&answered(unreadable, "reject"));
        assert!(matches!(recovery, Some(Recovery::Close)));
        // Only an answered plan is recovered: an elicitation's unreadable
        // frame is just left out of the answers.
        let mut question = answered("not json", "approve");
        if let Some(turn) = question.turns.get_mut(0) {
            turn.pauses[0].is_plan = false;
        }
        let (context, recovery) = start(&question);
        assert!(recovery.is_none() && context.answers.is_empty());
    }
}
