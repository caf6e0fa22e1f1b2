//! The Studio's records in the ledger: one stream per conversation, keyed
//! `studio/<principal>/<conversation_id>`, holding every request, answer,
//! frame sent, segment lease change, cancel and canvas mutation.
//!
//! Owns: the payload types of record kinds 16 to 24 (see
//! log-format/LOG-FORMAT.md). JSON members (requests, frames) are stored as
//! the exact JSON text sent or accepted, so a replay shows byte for byte
//! what a client received.
//! Must never: change a payload type once written (add a new kind instead).

use serde::{Deserialize, Serialize};

use crate::ledger::{Payload, RecordKind, StreamKey};

use super::auth::Principal;
use crate::wire::ids::ConversationId;

/// The stream of one conversation. The principal is a digest of the
/// bearer token, so conversations of two principals never share a stream.
pub fn conversation_stream(
    principal: &Principal,
    conversation: &ConversationId,
) -> Result<StreamKey, crate::ledger::LedgerError> {
    StreamKey::new(format!(
        "studio/{}/{}",
        principal.as_str(),
        conversation.as_str()
    ))
}

/// A `turn.request` accepted as turn number `turn` (1, 2, …).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnRequested {
    pub turn: u32,
    /// The request as accepted, normalised JSON text.
    pub request: String,
}

/// An `interrupt.response` accepted for a pause of `turn`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterruptAnswered {
    pub turn: u32,
    pub interrupt_id: String,
    /// The response as accepted, normalised JSON text.
    pub response: String,
}

/// A frame as it was written to a client, JSON text without the SSE framing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameSent {
    pub turn: u32,
    pub segment: u32,
    pub seq: u64,
    pub frame: String,
}

/// A segment claimed the conversation: it alone streams until it releases
/// the lease or the lease expires.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentClaimed {
    /// Segment number in the conversation (1, 2, …).
    pub segment: u32,
    pub turn: u32,
    /// The claiming server instance and request, for audit.
    pub owner: String,
    pub at_ms: u64,
    pub ttl_ms: u64,
    /// The seq of the segment's first frame.
    pub first_seq: u64,
}

/// The owner renewed its lease.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentRenewed {
    pub segment: u32,
    pub at_ms: u64,
}

/// Why a segment stopped streaming.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SegmentEnd {
    /// Ended on a pause (`plan.proposed`, `elicitation.request`).
    Paused,
    /// Ended on `done`.
    Done,
    /// Ended on a stream-fatal `error` frame.
    Failed,
    /// The client went away.
    Disconnected,
}

/// The owner released its lease.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentReleased {
    pub segment: u32,
    pub at_ms: u64,
    pub end: SegmentEnd,
}

/// `/cancel` asked the live segment to stop.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelRequested {
    pub segment: u32,
    pub at_ms: u64,
}

/// The approval of a plan pause, recorded once per interrupt id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanApprovalRecorded {
    pub turn: u32,
    pub interrupt_id: String,
}

/// A `composition.mutate` that applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompositionMutated {
    /// The mutation as accepted, normalised JSON text.
    pub mutation: String,
}

/// A keyed request was applied by the records appended with this one (in
/// the same append): a request carrying the same key again is answered
/// `outcome` and applies nothing. Statewire's `harness-sdk` commands are
/// keyed by their identity, so a command finished again after a crash
/// starts nothing twice.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestApplied {
    pub key: String,
    /// What the request's caller was answered, JSON text.
    pub outcome: String,
}

/// The agent that serves a segment, appended with its claim: what
/// `replay --check` reruns by default.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentAgent {
    pub segment: u32,
    /// The agent's name (`builtin`, `minimal`, `scenario`, …).
    pub name: String,
    /// The version of its behaviour.
    pub version: String,
}

macro_rules! studio_payload {
    ($($ty:ty => $kind:ident),* $(,)?) => {
        $(impl Payload for $ty {
            const KIND: RecordKind = RecordKind::$kind;
        })*
    };
}

studio_payload!(
    TurnRequested => StudioTurnRequested,
    InterruptAnswered => StudioInterruptAnswered,
    FrameSent => StudioFrameSent,
    SegmentClaimed => StudioSegmentClaimed,
    SegmentRenewed => StudioSegmentRenewed,
    SegmentReleased => StudioSegmentReleased,
    CancelRequested => StudioCancelRequested,
    PlanApprovalRecorded => StudioPlanApproved,
    CompositionMutated => StudioCompositionMutated,
    RequestApplied => StudioRequestApplied,
    SegmentAgent => StudioSegmentAgent,
);
