//! The vocabulary of record kinds: each kind's number, name and payload
//! type, and decoding any payload to JSON for `ledgerwire log dump`.
//!
//! Rules (see log-format/LOG-FORMAT.md, "Evolving record kinds"): a kind's
//! number is never reused and its payload type never changes once a build
//! wrote it. A new shape is a new kind; old kinds stay decodable forever.

use serde::{Serialize, de::DeserializeOwned};

use crate::ledger::probe::Probe;
use crate::ledger::record::{NewRecord, Record};
use crate::statewire::records::{
    CommandAdmitted, CommandAnswered, CommandAnsweredUnder, DocumentsCommitted,
};
use crate::studio::records as studio;

/// Every record kind this build knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum RecordKind {
    /// A diagnostic record written by `ledgerwire log probe` (crash tests
    /// and benchmarks). Payload: [`Probe`].
    Probe = 1,
    // Studio conversations (codes 16 to 63); payloads in `studio::records`.
    StudioTurnRequested = 16,
    StudioInterruptAnswered = 17,
    StudioFrameSent = 18,
    StudioSegmentClaimed = 19,
    StudioSegmentRenewed = 20,
    StudioSegmentReleased = 21,
    StudioCancelRequested = 22,
    StudioPlanApproved = 23,
    StudioCompositionMutated = 24,
    /// A keyed request's outcome, appended with the records it applied.
    /// Payload: [`studio::RequestApplied`].
    StudioRequestApplied = 25,
    /// The agent serving a segment, appended with its claim. Payload:
    /// [`studio::SegmentAgent`].
    StudioSegmentAgent = 26,
    /// Statewire: a command admitted on a durable lane, with its contract.
    /// Payload: [`CommandAdmitted`].
    StatewireCommandAdmitted = 64,
    /// Statewire: an admitted command's answer. Payload: [`CommandAnswered`].
    StatewireCommandAnswered = 65,
    /// Statewire: changes to a thread's durable documents, with the
    /// command that made them. Payload: [`DocumentsCommitted`].
    StatewireDocumentsCommitted = 66,
    /// Statewire: an admitted command's answer with the contract it is
    /// encoded in. Payload: [`CommandAnsweredUnder`].
    StatewireCommandAnsweredUnder = 67,
}

impl RecordKind {
    pub const ALL: &'static [RecordKind] = &[
        RecordKind::Probe,
        RecordKind::StudioTurnRequested,
        RecordKind::StudioInterruptAnswered,
        RecordKind::StudioFrameSent,
        RecordKind::StudioSegmentClaimed,
        RecordKind::StudioSegmentRenewed,
        RecordKind::StudioSegmentReleased,
        RecordKind::StudioCancelRequested,
        RecordKind::StudioPlanApproved,
        RecordKind::StudioCompositionMutated,
        RecordKind::StudioRequestApplied,
        RecordKind::StudioSegmentAgent,
        RecordKind::StatewireCommandAdmitted,
        RecordKind::StatewireCommandAnswered,
        RecordKind::StatewireDocumentsCommitted,
        RecordKind::StatewireCommandAnsweredUnder,
    ];

    pub fn code(self) -> u16 {
        self as u16
    }

    pub fn from_code(code: u16) -> Option<Self> {
        Self::ALL.iter().copied().find(|kind| kind.code() == code)
    }

    pub fn name(self) -> &'static str {
        match self {
            RecordKind::Probe => "probe",
            RecordKind::StudioTurnRequested => "studio.turn_requested",
            RecordKind::StudioInterruptAnswered => "studio.interrupt_answered",
            RecordKind::StudioFrameSent => "studio.frame_sent",
            RecordKind::StudioSegmentClaimed => "studio.segment_claimed",
            RecordKind::StudioSegmentRenewed => "studio.segment_renewed",
            RecordKind::StudioSegmentReleased => "studio.segment_released",
            RecordKind::StudioCancelRequested => "studio.cancel_requested",
            RecordKind::StudioPlanApproved => "studio.plan_approved",
            RecordKind::StudioCompositionMutated => "studio.composition_mutated",
            RecordKind::StudioRequestApplied => "studio.request_applied",
            RecordKind::StudioSegmentAgent => "studio.segment_agent",
            RecordKind::StatewireCommandAdmitted => "statewire.command_admitted",
            RecordKind::StatewireCommandAnswered => "statewire.command_answered",
            RecordKind::StatewireDocumentsCommitted => "statewire.documents_committed",
            RecordKind::StatewireCommandAnsweredUnder => "statewire.command_answered_under",
        }
    }
}

/// A payload type bound to its record kind.
pub trait Payload: Serialize + DeserializeOwned {
    const KIND: RecordKind;

    /// Encodes the payload as a record to append.
    fn to_record(&self) -> NewRecord {
        NewRecord {
            kind: Self::KIND.code(),
            // Serialising plain data into a Vec cannot fail.
            payload: crate::encode_buffer::encode_exact(|buffer| {
                let _ = postcard::to_io(self, buffer);
            }),
        }
    }

    /// Decodes a record of this kind; `None` if the record is another kind.
    fn from_record(record: &Record) -> Option<Result<Self, postcard::Error>> {
        (record.kind() == Self::KIND.code()).then(|| postcard::from_bytes(record.payload()))
    }
}

/// Why a payload could not be shown as JSON.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("record kind {0} is unknown to this build (written by a newer ledgerwire?)")]
    UnknownKind(u16),
    #[error("payload of kind {kind} does not decode: {error}")]
    Payload {
        kind: &'static str,
        error: postcard::Error,
    },
}

/// Decodes a record's payload into JSON, by kind. Members the record
/// keeps as JSON text (a frame, a request, an answer) are shown as the
/// JSON they hold, not as strings.
pub fn payload_json(record: &Record) -> Result<serde_json::Value, DecodeError> {
    let kind =
        RecordKind::from_code(record.kind()).ok_or(DecodeError::UnknownKind(record.kind()))?;
    let mut payload = payload_as_stored(record, kind)?;
    for path in json_text_members(kind) {
        nest_json_text(&mut payload, path);
    }
    Ok(payload)
}

/// The members of a kind's payload that hold JSON text, as paths of
/// member names (`*`: every element of an array).
fn json_text_members(kind: RecordKind) -> &'static [&'static [&'static str]] {
    match kind {
        RecordKind::StudioTurnRequested => &[&["request"]],
        RecordKind::StudioInterruptAnswered => &[&["response"]],
        RecordKind::StudioFrameSent => &[&["frame"]],
        RecordKind::StudioCompositionMutated => &[&["mutation"]],
        RecordKind::StudioRequestApplied => &[&["outcome"]],
        RecordKind::StatewireCommandAdmitted => &[&["params"]],
        RecordKind::StatewireCommandAnswered | RecordKind::StatewireCommandAnsweredUnder => {
            &[&["answer"]]
        }
        RecordKind::StatewireDocumentsCommitted => {
            &[&["cause", "answer"], &["changes", "*", "value"]]
        }
        _ => &[],
    }
}

/// Replaces the string at `path` in `value` by the JSON it holds; leaves
/// it a string if it is not JSON (a record is shown, never refused).
/// `path` names object members, array indexes, or `*` for every element.
pub fn nest_json_text(value: &mut serde_json::Value, path: &[&str]) {
    use serde_json::Value;
    match path.split_first() {
        None => {
            if let Value::String(text) = value
                && let Ok(nested) = serde_json::from_str::<Value>(text)
            {
                *value = nested;
            }
        }
        Some((&"*", rest)) => {
            if let Value::Array(items) = value {
                items.iter_mut().for_each(|item| nest_json_text(item, rest));
            }
        }
        Some((member, rest)) => {
            let inner = match member.parse::<usize>() {
                Ok(index) if value.is_array() => value.get_mut(index),
                _ => value.get_mut(*member),
            };
            if let Some(inner) = inner {
                nest_json_text(inner, rest);
            }
        }
    }
}

/// Decodes a record's payload into JSON with its JSON text members kept
/// as the exact text the log holds.
pub fn payload_json_as_stored(record: &Record) -> Result<serde_json::Value, DecodeError> {
    let kind =
        RecordKind::from_code(record.kind()).ok_or(DecodeError::UnknownKind(record.kind()))?;
    payload_as_stored(record, kind)
}

fn payload_as_stored(record: &Record, kind: RecordKind) -> Result<serde_json::Value, DecodeError> {
    let to_json = |error| DecodeError::Payload {
        kind: kind.name(),
        error,
    };
    match kind {
        RecordKind::Probe => decode_json::<Probe>(record),
        RecordKind::StudioTurnRequested => decode_json::<studio::TurnRequested>(record),
        RecordKind::StudioInterruptAnswered => decode_json::<studio::InterruptAnswered>(record),
        RecordKind::StudioFrameSent => decode_json::<studio::FrameSent>(record),
        RecordKind::StudioSegmentClaimed => decode_json::<studio::SegmentClaimed>(record),
        RecordKind::StudioSegmentRenewed => decode_json::<studio::SegmentRenewed>(record),
        RecordKind::StudioSegmentReleased => decode_json::<studio::SegmentReleased>(record),
        RecordKind::StudioCancelRequested => decode_json::<studio::CancelRequested>(record),
        RecordKind::StudioPlanApproved => decode_json::<studio::PlanApprovalRecorded>(record),
        RecordKind::StudioCompositionMutated => decode_json::<studio::CompositionMutated>(record),
        RecordKind::StudioRequestApplied => decode_json::<studio::RequestApplied>(record),
        RecordKind::StudioSegmentAgent => decode_json::<studio::SegmentAgent>(record),
        RecordKind::StatewireCommandAdmitted => decode_json::<CommandAdmitted>(record),
        RecordKind::StatewireCommandAnswered => decode_json::<CommandAnswered>(record),
        RecordKind::StatewireDocumentsCommitted => decode_json::<DocumentsCommitted>(record),
        RecordKind::StatewireCommandAnsweredUnder => decode_json::<CommandAnsweredUnder>(record),
    }
    .map_err(to_json)
}

fn decode_json<T: Payload>(record: &Record) -> Result<serde_json::Value, postcard::Error> {
    let value: T = postcard::from_bytes(record.payload())?;
    Ok(serde_json::to_value(value).unwrap_or(serde_json::Value::Null))
}
