//! Answers: a command's outcome as the `ans` entry a client reads, as the
//! text a record keeps, and lowered from the contract it is encoded in to
//! the contract of the attach that reads it. Pure: no I/O.
//!
//! Owns: the answer's shapes and lowering it along the adapters. Must
//! never: hand an attach an answer in a contract other than its own, or
//! let a converter's failure pass as the native value.

use serde_json::Value;

use crate::ids::ProtocolName;
use crate::negotiation::Selection;
use crate::packet::{Answer, Contract, FinCode, FrameViolation, Rejection};
use crate::records::RetainedAnswer;
use crate::version::Version;

use super::adapters;
use super::registry::Registry;

/// The outcome of executing one command.
pub(super) type Outcome = Result<Value, Rejection>;

/// An outcome as the answer to `seq` on `protocol`.
pub(super) fn answer(
    protocol: &ProtocolName,
    seq: u64,
    outcome: Outcome,
    contract: Option<Contract>,
) -> Answer {
    let (ok, err) = match outcome {
        Ok(value) => (Some(value), None),
        Err(rejection) => (None, Some(rejection)),
    };
    Answer {
        protocol: protocol.clone(),
        seq,
        ok,
        err,
        contract,
    }
}

/// An outcome as a record keeps it: whether it succeeded, and its JSON.
pub(super) fn outcome_json(outcome: &Outcome) -> (bool, String) {
    match outcome {
        Ok(value) => (true, value.to_string()),
        Err(rejection) => (
            false,
            serde_json::to_string(rejection).unwrap_or_else(|_| "{}".into()),
        ),
    }
}

/// A recorded outcome again.
pub(super) fn outcome_from(ok: bool, value: &Value) -> Outcome {
    if ok {
        Ok(value.clone())
    } else {
        Err(serde_json::from_value(value.clone())
            .unwrap_or_else(|_| Rejection::new("unreadable-answer", "")))
    }
}

/// The answer to a seq below the watermark whose answer is gone.
pub(super) fn expired() -> Rejection {
    Rejection::new(
        "answer-expired",
        "the command was admitted but its answer is no longer retained",
    )
}

/// A seq past the one the lane expects next.
pub(super) fn gap(protocol: &ProtocolName, watermark: u64, seq: u64) -> FrameViolation {
    FrameViolation {
        code: FinCode::SequenceGap,
        message: format!("{protocol}: seq {seq} after watermark {watermark}"),
    }
}

/// A native answer, encoded in `from`, as an attach with `selection`
/// reads it.
pub(super) fn lowered(
    registry: &Registry,
    selection: &Selection,
    native: Answer,
    from: Version,
) -> Answer {
    let Some(to) = selection.get(native.protocol.as_str()).map(|p| p.version) else {
        return native;
    };
    let adapters = registry.adapters_of(&native.protocol);
    if adapters.is_empty() {
        return native;
    }
    let outcome = match (native.ok, native.err) {
        (Some(value), _) => Ok(value),
        (None, Some(rejection)) => Err(rejection),
        (None, None) => Ok(Value::Null),
    };
    let lowered = adapters::lower(&native.protocol, adapters, from, to, outcome);
    answer(&native.protocol, native.seq, lowered, native.contract)
}

/// A retained answer as an attach with `selection` reads it: with the
/// contract its command was admitted under, lowered from the one it is
/// encoded in.
pub(super) fn retained(
    registry: &Registry,
    selection: &Selection,
    protocol: &ProtocolName,
    seq: u64,
    retained: &RetainedAnswer,
) -> Answer {
    let contract = match (
        Version::parse(&retained.wire_version),
        Version::parse(&retained.protocol_version),
    ) {
        (Ok(wire), Ok(version)) => Some(Contract { wire, version }),
        _ => None,
    };
    let native = answer(
        protocol,
        seq,
        outcome_from(retained.ok, &retained.answer.0),
        contract,
    );
    let from =
        Version::parse(&retained.answer_version).unwrap_or_else(|_| registry.native_of(protocol));
    lowered(registry, selection, native, from)
}
