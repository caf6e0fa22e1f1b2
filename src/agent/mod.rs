//! The agent behind the Studio: what a turn says and computes.
//!
//! Owns: the [`Agent`] trait the Studio server drives, one segment at a
//! time, and the agents shipped with ledgerwire. The contract treats the
//! agent as internal: it yields frames, and the server numbers them
//! (`seq`), mints pause ids, records them and streams them.
//! Must never: touch the ledger or the network, or depend on anything but
//! its [`TurnContext`]; an agent is deterministic, so a replayed
//! conversation produces the same frames.

pub mod builtin;
pub mod frames;
pub mod minimal;
pub mod scenario;

use std::collections::BTreeMap;
use std::pin::Pin;

use futures_util::Stream;

use crate::studio::conversation::StreamedComponent;
use crate::studio::wire::composition::CompositionManifest;
use crate::studio::wire::frame::Frame;
use crate::studio::wire::ids::ChoiceId;
use crate::studio::wire::plan::{ApprovedChoice, ApprovedStep, PlanApproved, PlanProposed};
use crate::studio::wire::request::{InterruptResponse, TurnRequest};

/// An answered pause: the frame that asked and the accepted answer.
#[derive(Clone, Debug)]
pub struct AnsweredPause {
    pub frame: Frame,
    pub response: InterruptResponse,
}

/// An earlier turn of the conversation, as the conversation digest keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PastTurn {
    pub turn: u32,
    /// The user's message.
    pub message: String,
}

/// Earlier turns in the digest, at most (the contract's newest 10).
pub const DIGEST_TURNS: usize = 10;
/// Bytes of earlier messages in the digest, at most; older turns go first.
pub const DIGEST_MAX_BYTES: usize = 16 * 1024;

/// Everything an agent may read to run one segment of a turn.
#[derive(Clone, Debug)]
pub struct TurnContext {
    /// Turn number in the conversation (1, 2, …).
    pub turn: u32,
    pub request: TurnRequest,
    /// This turn's answered pauses, oldest first; the last one is what this
    /// segment resumes from (none on the turn's first segment).
    pub answers: Vec<AnsweredPause>,
    /// The canvas as it stands.
    pub canvas: Option<CompositionManifest>,
    /// Components the conversation streamed, by id.
    pub components: BTreeMap<String, StreamedComponent>,
    /// The conversation digest: earlier turns, newest first, bounded by
    /// [`DIGEST_TURNS`] and [`DIGEST_MAX_BYTES`].
    pub history: Vec<PastTurn>,
}

/// The frames of one segment, in order. Time between two frames is time
/// spent working (the server sends heartbeats meanwhile). `seq` and pause
/// ids in the frames are placeholders the server replaces.
pub type SegmentFrames = Pin<Box<dyn Stream<Item = Frame> + Send>>;

/// One step of a scripted segment: a frame to send, or time spent working.
#[derive(Clone, Debug)]
pub enum Step {
    Frame(Box<Frame>),
    Work(std::time::Duration),
}

impl Step {
    pub fn frame(frame: Frame) -> Self {
        Step::Frame(Box::new(frame))
    }
}

/// Plays scripted steps as a segment: frames in order, pauses for work.
pub fn play(steps: Vec<Step>) -> SegmentFrames {
    Box::pin(async_stream::stream! {
        for step in steps {
            match step {
                Step::Frame(frame) => yield *frame,
                Step::Work(duration) => tokio::time::sleep(duration).await,
            }
        }
    })
}

/// Drives turns. Implementations must be deterministic in their context.
pub trait Agent: Send + Sync + 'static {
    /// The frames of the segment `context` asks for: a turn's start, or its
    /// resumption after the latest answer. A segment ends with a pause
    /// (`plan.proposed`, `elicitation.request`), `done` or `error`.
    fn segment(&self, context: TurnContext) -> SegmentFrames;

    /// The `plan.approved` frame for the approval of `plan`, the last of
    /// the turn's answered pauses `answers`.
    fn approved(&self, plan: &PlanProposed, answers: &[AnsweredPause]) -> PlanApproved {
        let before = labels_before_switches(answers);
        let answer_label = plan
            .steps
            .iter()
            .find(|step| step.gives_answer == Some(true))
            .map(|step| step.label.clone());
        PlanApproved {
            seq: 0,
            plan_version_id: plan.plan_version_id.clone(),
            version: plan.version,
            revision: plan.revision.clone(),
            title: plan
                .summary
                .clone()
                .or(answer_label)
                .unwrap_or_else(|| format!("Plan, version {}", plan.version)),
            summary: plan.summary.clone(),
            steps: plan
                .steps
                .iter()
                .map(|step| ApprovedStep {
                    label: step.label.clone(),
                    gives_answer: step.gives_answer,
                })
                .collect(),
            choices: plan
                .decisions
                .iter()
                .flatten()
                .map(|decision| ApprovedChoice {
                    question: decision.question.clone(),
                    chosen: decision.chosen.clone(),
                    changed_from: before
                        .get(&decision.choice_id)
                        .filter(|label| **label != decision.chosen)
                        .cloned(),
                    choice_id: Some(decision.choice_id.clone()),
                })
                .collect(),
            caveats: plan.caveats.clone(),
        }
    }
}

/// For each choice a switch of this turn touched (named it, or moved its
/// label), the label it held on the card that switch was made from: the
/// turn's first such card (delta 23's `changed_from`).
pub fn labels_before_switches(answers: &[AnsweredPause]) -> BTreeMap<ChoiceId, String> {
    let plans: Vec<(&PlanProposed, &InterruptResponse)> = answers
        .iter()
        .filter_map(|answered| match &answered.frame {
            Frame::PlanProposed(plan) => Some((plan, &answered.response)),
            _ => None,
        })
        .collect();
    let mut before = BTreeMap::new();
    for (index, (plan, response)) in plans.iter().enumerate() {
        let Some(switch) = &response.switch else {
            continue;
        };
        let next = plans.get(index + 1).map(|(next, _)| *next);
        for row in plan.decisions.iter().flatten() {
            let moved = next
                .and_then(|next| {
                    next.decisions
                        .iter()
                        .flatten()
                        .find(|d| d.choice_id == row.choice_id)
                })
                .is_some_and(|after| after.chosen != row.chosen);
            if moved || row.choice_id == switch.choice_id {
                before
                    .entry(row.choice_id.clone())
                    .or_insert_with(|| row.chosen.clone());
            }
        }
    }
    before
}
