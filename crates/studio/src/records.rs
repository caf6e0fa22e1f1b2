//! The Studio's records in the ledger: one stream per conversation, keyed
//! `studio/<principal>/<conversation_id>`, holding every request, answer,
//! frame sent, segment lease change, cancel and canvas mutation.
//!
//! Owns: the payload types of record kinds 16 to 28 (see
//! log-format/LOG-FORMAT.md). JSON members (requests, frames) are stored as
//! the exact JSON text sent or accepted, so a replay shows byte for byte
//! what a client received.
//! Must never: change a payload type once written (add a new kind instead).

use serde::{Deserialize, Serialize};

use ledgerwire_agent::model::exchange::ModelExchange;
use ledgerwire_ledger::{Kind, KindEntry, Payload, StreamKey};

use super::auth::Principal;
use ledgerwire_wire::ids::ConversationId;

/// The JSON text of a wire value: what a record holds, and what a client
/// receives.
pub(super) fn json<T: Serialize>(value: &T) -> String {
    // Wire types serialise infallibly (no maps with non-string keys), and
    // serde_json writes UTF-8 only.
    serde_json::to_string(value).unwrap_or_default()
}

/// The stream of one conversation. The principal is a digest of the
/// bearer token, so conversations of two principals never share a stream.
pub fn conversation_stream(
    principal: &Principal,
    conversation: &ConversationId,
) -> Result<StreamKey, ledgerwire_ledger::LedgerError> {
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

/// A call the model agent made for a segment, as builds before text
/// streaming recorded it (kind 27): read, upgraded to
/// [`ModelExchangedV2`], never written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelExchanged {
    pub turn: u32,
    pub segment: u32,
    /// Answered pauses of the turn the segment started from.
    pub answers: u32,
    /// The call's place among the segment's calls.
    pub index: u32,
    /// SHA-256 of the request's messages, hex.
    pub request_digest: String,
    /// The request body, JSON text.
    pub request: String,
    /// The reply's content, when the call completed.
    pub reply: Option<String>,
    /// Why the call failed, when it did.
    pub error: Option<String>,
    /// The failure was an unusable reply rather than none.
    pub bad_output: bool,
    pub elapsed_ms: u64,
}

/// A call the model agent made for a segment (kind 28): what was asked
/// (the request body, never the key), what came back, how long it took,
/// and where the answer's text was cut into the deltas streamed from it.
/// A completed or failed call is recorded durably before any frame that
/// follows from it; a call whose text starts to stream is first recorded
/// as `streaming`, so a segment cut short in the middle of it says so. A
/// retried segment reuses a completed call, and `replay --check` replays
/// the segment from these with no model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelExchangedV2 {
    pub turn: u32,
    pub segment: u32,
    /// Answered pauses of the turn the segment started from.
    pub answers: u32,
    /// The call's place among the segment's calls.
    pub index: u32,
    /// SHA-256 of the request's messages, hex.
    pub request_digest: String,
    /// The request body, JSON text (empty on a `streaming` record).
    pub request: String,
    /// The reply's content, when the call completed.
    pub reply: Option<String>,
    /// Why the call failed, when it did.
    pub error: Option<String>,
    /// The failure was an unusable reply rather than none.
    pub bad_output: bool,
    /// The call's time; on a `streaming` record, its time to that text.
    pub elapsed_ms: u64,
    /// What a failed call had sent up to its last text delta.
    pub partial: String,
    /// Byte offsets in the reply (or `partial`) where a text delta went out.
    pub text_cuts: Vec<u32>,
    /// The call's text began to stream; its reply is not in yet.
    pub streaming: bool,
}

impl ModelExchangedV2 {
    /// The record of `exchange`, made by `segment` of `turn`.
    pub fn of(turn: u32, segment: u32, exchange: ModelExchange) -> Self {
        Self {
            turn,
            segment,
            answers: exchange.answers,
            index: exchange.index,
            request_digest: exchange.request_digest,
            request: exchange.request,
            reply: exchange.reply,
            error: exchange.error,
            bad_output: exchange.bad_output,
            elapsed_ms: exchange.elapsed_ms,
            partial: exchange.partial,
            text_cuts: exchange.text_cuts,
            streaming: exchange.streaming,
        }
    }

    /// A model call's record of either kind, upgraded.
    pub fn read(record: &ledgerwire_ledger::Record) -> Option<Result<Self, postcard::Error>> {
        Self::from_record(record)
            .or_else(|| ModelExchanged::from_record(record).map(|old| old.map(Self::from)))
    }

    /// The exchange as the agent reads it back (`with_request`: keep the
    /// request body, which only a replay of this segment needs).
    pub fn exchange(&self, with_request: bool) -> ModelExchange {
        ModelExchange {
            answers: self.answers,
            index: self.index,
            request_digest: self.request_digest.clone(),
            request: if with_request {
                self.request.clone()
            } else {
                String::new()
            },
            reply: self.reply.clone(),
            error: self.error.clone(),
            bad_output: self.bad_output,
            elapsed_ms: self.elapsed_ms,
            partial: self.partial.clone(),
            text_cuts: self.text_cuts.clone(),
            streaming: self.streaming,
        }
    }
}

impl From<ModelExchanged> for ModelExchangedV2 {
    /// An older record: its text went out whole, after the call.
    fn from(old: ModelExchanged) -> Self {
        Self {
            turn: old.turn,
            segment: old.segment,
            answers: old.answers,
            index: old.index,
            request_digest: old.request_digest,
            request: old.request,
            reply: old.reply,
            error: old.error,
            bad_output: old.bad_output,
            elapsed_ms: old.elapsed_ms,
            partial: String::new(),
            text_cuts: Vec::new(),
            streaming: false,
        }
    }
}

/// The Studio's record kinds (codes 16 to 63 are the Studio's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum StudioKind {
    TurnRequested = 16,
    InterruptAnswered = 17,
    FrameSent = 18,
    SegmentClaimed = 19,
    SegmentRenewed = 20,
    SegmentReleased = 21,
    CancelRequested = 22,
    PlanApproved = 23,
    CompositionMutated = 24,
    /// A keyed request's outcome, appended with the records it applied.
    RequestApplied = 25,
    /// The agent serving a segment, appended with its claim.
    SegmentAgent = 26,
    /// A call of the model agent, before text streaming (read only).
    ModelExchanged = 27,
    /// A call of the model agent.
    ModelExchangedV2 = 28,
}

impl StudioKind {
    const ALL: [StudioKind; 13] = [
        StudioKind::TurnRequested,
        StudioKind::InterruptAnswered,
        StudioKind::FrameSent,
        StudioKind::SegmentClaimed,
        StudioKind::SegmentRenewed,
        StudioKind::SegmentReleased,
        StudioKind::CancelRequested,
        StudioKind::PlanApproved,
        StudioKind::CompositionMutated,
        StudioKind::RequestApplied,
        StudioKind::SegmentAgent,
        StudioKind::ModelExchanged,
        StudioKind::ModelExchangedV2,
    ];

    /// The Studio kind stored under `code`, if it is one.
    pub fn from_code(code: u16) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| *kind as u16 == code)
    }

    pub const fn kind(self) -> Kind {
        let name = match self {
            StudioKind::TurnRequested => "studio.turn_requested",
            StudioKind::InterruptAnswered => "studio.interrupt_answered",
            StudioKind::FrameSent => "studio.frame_sent",
            StudioKind::SegmentClaimed => "studio.segment_claimed",
            StudioKind::SegmentRenewed => "studio.segment_renewed",
            StudioKind::SegmentReleased => "studio.segment_released",
            StudioKind::CancelRequested => "studio.cancel_requested",
            StudioKind::PlanApproved => "studio.plan_approved",
            StudioKind::CompositionMutated => "studio.composition_mutated",
            StudioKind::RequestApplied => "studio.request_applied",
            StudioKind::SegmentAgent => "studio.segment_agent",
            StudioKind::ModelExchanged => "studio.model_exchanged",
            StudioKind::ModelExchangedV2 => "studio.model_exchanged_v2",
        };
        Kind::new(self as u16, name)
    }
}

macro_rules! studio_payload {
    ($($ty:ty => $kind:ident),* $(,)?) => {
        $(impl Payload for $ty {
            const KIND: Kind = StudioKind::$kind.kind();
        })*
    };
}

studio_payload!(
    TurnRequested => TurnRequested,
    InterruptAnswered => InterruptAnswered,
    FrameSent => FrameSent,
    SegmentClaimed => SegmentClaimed,
    SegmentRenewed => SegmentRenewed,
    SegmentReleased => SegmentReleased,
    CancelRequested => CancelRequested,
    PlanApprovalRecorded => PlanApproved,
    CompositionMutated => CompositionMutated,
    RequestApplied => RequestApplied,
    SegmentAgent => SegmentAgent,
    ModelExchanged => ModelExchanged,
    ModelExchangedV2 => ModelExchangedV2,
);

/// The Studio's kinds for the binary's registry. Requests, answers,
/// frames, mutations and outcomes are stored as JSON text and shown as
/// the JSON they hold.
pub const KINDS: &[KindEntry] = &[
    KindEntry::of::<TurnRequested>(&[&["request"]]),
    KindEntry::of::<InterruptAnswered>(&[&["response"]]),
    KindEntry::of::<FrameSent>(&[&["frame"]]),
    KindEntry::of::<SegmentClaimed>(&[]),
    KindEntry::of::<SegmentRenewed>(&[]),
    KindEntry::of::<SegmentReleased>(&[]),
    KindEntry::of::<CancelRequested>(&[]),
    KindEntry::of::<PlanApprovalRecorded>(&[]),
    KindEntry::of::<CompositionMutated>(&[&["mutation"]]),
    KindEntry::of::<RequestApplied>(&[&["outcome"]]),
    KindEntry::of::<SegmentAgent>(&[]),
    KindEntry::of::<ModelExchanged>(&[&["request"]]),
    KindEntry::of::<ModelExchangedV2>(&[&["request"]]),
];

#[cfg(test)]
mod tests {
    use super::*;
    use ledgerwire_ledger::record::{Header, encode};
    use ledgerwire_ledger::{Record, StreamKey};

    #[test]
    fn a_model_call_recorded_before_text_streamed_still_reads() {
        let old = ModelExchanged {
            turn: 2,
            segment: 3,
            answers: 1,
            index: 0,
            request_digest: "d".into(),
            request: "{}".into(),
            reply: Some("{\"tool\":\"answer\"}".into()),
            error: None,
            bad_output: false,
            elapsed_ms: 7,
        };
        let stream = StreamKey::new("studio/p/c").unwrap();
        let new = old.to_record();
        let header = Header {
            format_version: 1,
            kind: new.kind,
            position: 0,
            global_position: 0,
            timestamp_ms: 0,
        };
        let bytes = encode(&header, &stream, &new.payload);
        let record = Record::from_envelope(bytes.into()).unwrap();
        let read = ModelExchangedV2::read(&record).unwrap().unwrap();
        assert_eq!(read, ModelExchangedV2::from(old));
        assert!(read.text_cuts.is_empty() && !read.streaming);
        assert_eq!(read.exchange(false).reply, read.reply);
    }
}
