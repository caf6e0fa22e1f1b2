//! The four requests a client posts, discriminated on `kind`.
//!
//! Requests are parsed strictly: an unknown member is refused, because the
//! contract is frozen and a misspelt member (`autoAdd`) would otherwise be
//! dropped without a word. Members the contract made optional stay
//! `Option` so that a body re-serialises exactly as it was posted; the
//! accessors ([`TurnRequest::surface`], [`TurnRequest::auto_add`]) apply
//! the defaults.
//!
//! Owns: the requests' JSON. Must never: accept a member the contract
//! does not name.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ids::{ChoiceId, ComponentId, ConversationId, InterruptId, OptionId, QuestionId};
use super::seed::SeedSpec;

pub use super::composition::CompositionMutation;

/// `turn.request`: start or continue a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnRequest {
    /// `session_id`, its earlier name, is read as an alias (delta 5).
    #[serde(alias = "session_id")]
    pub conversation_id: ConversationId,
    /// The user's prose.
    pub message: String,
    /// Omitted means `studio` (delta 6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub surface: Option<Surface>,
    /// Scopes the turn to one card.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component_ref: Option<ComponentRef>,
    /// The Search handoff (delta 18).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_spec: Option<SeedSpec>,
    /// Omitted means true (delta 11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_add: Option<bool>,
}

impl TurnRequest {
    /// The surface in force: `studio` when the client sent none.
    pub fn surface(&self) -> Surface {
        self.surface.unwrap_or_default()
    }

    /// Whether created components join the composition: true unless the
    /// client said false.
    pub fn auto_add(&self) -> bool {
        self.auto_add.unwrap_or(true)
    }
}

/// Where the turn runs, which bounds what it may do.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Surface {
    #[default]
    Studio,
    /// Fetch one dataset; plan nothing.
    Download,
    Embed,
}

/// The card a turn is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ComponentRef {
    pub component_id: ComponentId,
    pub revision: u64,
    pub intent: ComponentIntent,
}

/// What the user wants of the referenced card.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ComponentIntent {
    /// "Edit Card": revise or rebuild it.
    Edit,
    /// "Ask follow up": the card's digest travels with the question.
    FollowUp,
}

/// `interrupt.response`: resume a paused turn on a new stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InterruptResponse {
    #[serde(alias = "session_id")]
    pub conversation_id: ConversationId,
    /// Echoed verbatim from the pausing frame.
    pub interrupt_id: InterruptId,
    pub decision: Decision,
    /// The amendment text of `amend`, or the one answer to an elicitation
    /// opened before delta 21. Accepted and ignored with approve and reject,
    /// so a client that always sends the member is not broken by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
    /// One answer per question id of the elicitation (delta 21).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers: Option<BTreeMap<QuestionId, Answer>>,
    /// ledgerwire's extension: an amendment that picks another option of
    /// one of the plan's choices, in place of amendment text. The contract
    /// describes switches and their failures but names no request that
    /// carries one; see docs/studio-wire.md.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch: Option<PlanSwitch>,
}

/// A switch of one plan choice to another of its options.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanSwitch {
    /// The row's `choice_id` on the plan card.
    pub choice_id: ChoiceId,
    /// One of that row's `options[].option_id`.
    pub option_id: OptionId,
}

/// What the user decided at a pause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Run the plan.
    Approve,
    /// Re-plan with `payload` (the amendment text) or `switch`.
    Amend,
    /// Drop the plan.
    Reject,
    /// Answer an elicitation.
    Answer,
    /// Dismiss a skippable elicitation whole (delta 12).
    Skip,
}

impl Decision {
    /// Whether the decision answers a plan pause (as opposed to an elicitation).
    pub fn is_plan_decision(self) -> bool {
        matches!(self, Decision::Approve | Decision::Amend | Decision::Reject)
    }
}

/// The answer to one question (delta 21).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Answer {
    /// One of the question's offered options.
    Option { option_id: OptionId },
    /// Free text; not empty.
    Text { text: String },
    /// Leave this choice to the agent; only on a skippable question.
    Skipped,
}

/// `turn.cancel`: stop the conversation's in-flight segment (delta 14).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelRequest {
    #[serde(alias = "session_id")]
    pub conversation_id: ConversationId,
}

/// Any request, as the union the schema describes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind")]
pub enum StudioRequest {
    #[serde(rename = "turn.request")]
    Turn(TurnRequest),
    #[serde(rename = "interrupt.response")]
    InterruptResponse(InterruptResponse),
    #[serde(rename = "composition.mutate")]
    CompositionMutate(CompositionMutation),
    #[serde(rename = "turn.cancel")]
    Cancel(CancelRequest),
}

impl StudioRequest {
    pub fn kind(&self) -> RequestKind {
        match self {
            StudioRequest::Turn(_) => RequestKind::Turn,
            StudioRequest::InterruptResponse(_) => RequestKind::InterruptResponse,
            StudioRequest::CompositionMutate(_) => RequestKind::CompositionMutate,
            StudioRequest::Cancel(_) => RequestKind::Cancel,
        }
    }

    pub fn conversation_id(&self) -> &ConversationId {
        match self {
            StudioRequest::Turn(request) => &request.conversation_id,
            StudioRequest::InterruptResponse(request) => &request.conversation_id,
            StudioRequest::CompositionMutate(request) => &request.conversation_id,
            StudioRequest::Cancel(request) => &request.conversation_id,
        }
    }
}

/// The `kind` discriminant alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestKind {
    Turn,
    InterruptResponse,
    CompositionMutate,
    Cancel,
}

impl RequestKind {
    /// Every kind. [`RequestKind::as_str`] matches exhaustively, so a new
    /// kind cannot compile until it is named there; list it here too, and
    /// the fixture-coverage test then demands a fixture for it.
    pub const ALL: [RequestKind; 4] = [
        RequestKind::Turn,
        RequestKind::InterruptResponse,
        RequestKind::CompositionMutate,
        RequestKind::Cancel,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RequestKind::Turn => "turn.request",
            RequestKind::InterruptResponse => "interrupt.response",
            RequestKind::CompositionMutate => "composition.mutate",
            RequestKind::Cancel => "turn.cancel",
        }
    }

    pub fn from_wire(kind: &str) -> Option<RequestKind> {
        RequestKind::ALL
            .into_iter()
            .find(|known| known.as_str() == kind)
    }

    /// The route that takes this kind.
    pub fn route(self) -> &'static str {
        match self {
            RequestKind::Turn => "/api/studio/turn",
            RequestKind::InterruptResponse => "/api/studio/interrupt",
            RequestKind::CompositionMutate => "/api/studio/composition",
            RequestKind::Cancel => "/api/studio/cancel",
        }
    }
}

/// The body of `POST /api/studio/stream`, the reconnect extension (not a
/// contract request: it has no `kind`). It reads the conversation's
/// current turn: its recorded frames after `after_seq` (or the
/// `Last-Event-ID` header), then the live segment's, ending on a frame
/// that ends a stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReconnectRequest {
    #[serde(alias = "session_id")]
    pub conversation_id: ConversationId,
    /// The last seq the client holds; frames after it are sent. Omitted:
    /// `Last-Event-ID`, or every frame of the turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_seq: Option<u64>,
}
