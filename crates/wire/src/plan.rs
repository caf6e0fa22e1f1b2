//! Plans: the card a user approves, amends or rejects, and its frames.
//!
//! `plan.proposed` pauses a turn (delta 1); `plan.versioned` announces a
//! replacement; `plan.approved` (delta 22) records what was approved. Every
//! member added after v1 is optional and omitted when absent, so a client
//! built against an earlier delta reads these frames unchanged.
//!
//! Owns: the plan's JSON and its answers' shapes. Must never: drop a
//! member an earlier delta's client reads.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::ids::{ChoiceId, InterruptId, OptionId, PlanStepId, PlanVersionId};

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanStep {
    pub id: PlanStepId,
    /// The short label shown on the card.
    pub label: String,
    /// The detail shown when the step is opened.
    pub description: String,
    /// The tool arguments behind the step (delta 17).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Map<String, Value>>,
    /// True on the one step whose result answers the question (delta 22).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gives_answer: Option<bool>,
}

/// An evidence requirement behind the plan (delta 17).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanRequirement {
    pub id: String,
    pub kind: String,
    /// Composed by the server; a client shows it as is.
    pub sentence: String,
    pub decision_ids: Vec<String>,
}

/// A computed step of the plan (delta 17).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanOperation {
    pub id: String,
    pub kind: String,
    pub sentence: String,
    /// Absent on an operation that carries out no single requirement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirement_id: Option<String>,
}

/// One output the user asked for and how the plan answers it (delta 20).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanAsk {
    pub ask: String,
    /// The steps whose results answer the ask; empty when it is declined whole.
    pub answered_by: Vec<PlanStepId>,
    /// Why the plan does not compute it (or part of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declined: Option<String>,
    /// On an ask answered in part: the part not computed, in the user's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_computed: Option<String>,
}

/// A row of choices on the plan card.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanDecision {
    /// Stable across switches: "<requirement id>:<axis>" or "decision/<slot>" (delta 23).
    pub choice_id: ChoiceId,
    /// The choice's short name, e.g. "Basis".
    pub question: String,
    /// The label of the option in force.
    pub chosen: String,
    /// The options a user may switch to.
    pub options: Vec<PlanDecisionOption>,
}

/// One option of a plan decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanDecisionOption {
    pub option_id: OptionId,
    pub label: String,
}

/// A switch that did not apply; set on the plan re-offered after it (delta 22).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SwitchFailed {
    pub choice_id: ChoiceId,
    pub option_id: OptionId,
    /// The refusal's code, e.g. `switch_cancelled`; an open vocabulary.
    pub code: String,
    /// Why, in a reader's words.
    pub reason: String,
    /// Whether asking again can succeed (delta 23).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
}

/// `plan.proposed`: the plan awaiting approval. Last frame of its stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanProposed {
    pub seq: u64,
    pub interrupt_id: InterruptId,
    pub plan_version_id: PlanVersionId,
    pub version: u32,
    pub steps: Vec<PlanStep>,
    /// The plan's approval key, distinct from `version` (delta 17).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirements: Option<Vec<PlanRequirement>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operations: Option<Vec<PlanOperation>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asks: Option<Vec<PlanAsk>>,
    /// One sentence: what is counted, for whom, when, from which source (delta 22).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Sentences qualifying the answer; empty when there are none (delta 23).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caveats: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decisions: Option<Vec<PlanDecision>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch_failed: Option<SwitchFailed>,
}

/// `plan.versioned`: a new plan replaces `supersedes`; a `plan.proposed`
/// follows. `version` may be lower than the superseded one's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanVersioned {
    pub seq: u64,
    pub plan_version_id: PlanVersionId,
    pub version: u32,
    pub supersedes: PlanVersionId,
}

/// A step as the approved plan records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApprovedStep {
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gives_answer: Option<bool>,
}

/// A choice as the approved plan records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApprovedChoice {
    /// The choice's short name, e.g. "Basis".
    pub question: String,
    /// The label chosen.
    pub chosen: String,
    /// The label before the turn's first switch of it (delta 23).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_from: Option<String>,
    /// The plan card's id for the same row (delta 24); absent on older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice_id: Option<ChoiceId>,
}

/// `plan.approved`: sent once per interrupt, before the resumed run's
/// first frame (delta 22).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanApproved {
    pub seq: u64,
    pub plan_version_id: PlanVersionId,
    pub version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    pub steps: Vec<ApprovedStep>,
    pub choices: Vec<ApprovedChoice>,
    /// The approved card's caveats (delta 23); absent on older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caveats: Option<Vec<String>>,
}
