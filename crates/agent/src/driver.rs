//! The trait the Studio server drives an agent through, one segment at a
//! time, and the identity each agent records with the segments it serves.
//!
//! Owns: [`Agent`], [`AgentIdentity`], and the `plan.approved` frame an
//! agent answers an approval with unless it says otherwise
//! ([`labels_before_switches`]). Must never: name an agent (that is the
//! crate root's [`by_name`](crate::by_name)), or let a default
//! depend on anything but the segment's context.

use std::collections::BTreeMap;

use futures_util::StreamExt;

use crate::context::{AnsweredPause, TurnContext};
use crate::segment::{Beat, SegmentBeats, SegmentFrames};
use ledgerwire_wire::frame::Frame;
use ledgerwire_wire::ids::ChoiceId;
use ledgerwire_wire::plan::{ApprovedChoice, ApprovedStep, PlanApproved, PlanProposed};
use ledgerwire_wire::request::InterruptResponse;

/// Which agent served a segment, as its claim records it: a name and the
/// version of its behaviour (bumped whenever the frames it yields for the
/// same context change), so `replay --check` reruns the agent that served.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AgentIdentity {
    pub name: String,
    pub version: String,
}

impl AgentIdentity {
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
        }
    }
}

impl std::fmt::Display for AgentIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.name, self.version)
    }
}

/// Drives turns. Implementations must be deterministic in their context.
pub trait Agent: Send + Sync + 'static {
    /// The agent's name and behaviour version, recorded with every segment
    /// it serves.
    fn identity(&self) -> AgentIdentity {
        AgentIdentity::new("custom", "unversioned")
    }

    /// The frames of the segment `context` asks for: a turn's start, or its
    /// resumption after the latest answer. A segment ends with a pause
    /// (`plan.proposed`, `elicitation.request`), `done` or `error`.
    fn segment(&self, context: TurnContext) -> SegmentFrames;

    /// The segment's frames with any faults it asks the server to act out
    /// (what the server runs; only scripted agents have faults).
    fn beats(&self, context: TurnContext) -> SegmentBeats {
        Box::pin(
            self.segment(context)
                .map(|frame| Beat::Frame(Box::new(frame))),
        )
    }

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
