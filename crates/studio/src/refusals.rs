//! What a client is answered when the service cannot do what it asked:
//! another segment is streaming, the ledger failed, the conversation's
//! records are damaged, or the server is shutting down.
//!
//! Owns: the wording and retry mode of those refusals. Must never: make
//! damage retryable (no retry can succeed until an operator acts), or a
//! passing failure final.

use ledgerwire_ledger::LedgerError;

use super::config::HEARTBEAT_MS;
use ledgerwire_wire::WireError;

/// How long a client refused during a shutdown waits before retrying, in
/// seconds (a restart takes about that).
pub const DRAINING_RETRY_AFTER_SECONDS: u64 = 2;

fn seconds_ceil(ms: u64) -> u64 {
    ms.div_ceil(1000).max(1)
}

pub(super) fn ledger_failure(error: &LedgerError) -> WireError {
    // An unavailable store is the store's to report (once per outage);
    // the client is told to retry, so it is not an error of ours.
    if error.is_transient() {
        tracing::debug!(%error, "ledger refused a studio append for now");
    } else {
        tracing::error!(%error, "ledger refused a studio append");
    }
    WireError::transient(
        seconds_ceil(HEARTBEAT_MS),
        "The server could not record this request; nothing was applied. Retry shortly.",
    )
}

/// What a client is answered when the ledger cannot give a conversation:
/// damage is named and never retryable; anything else is transient.
pub(super) fn refusal(error: &LedgerError) -> WireError {
    match error {
        LedgerError::Corrupt {
            position,
            corruption,
            ..
        } => {
            tracing::error!(%error, "refusing a damaged conversation");
            WireError::damaged(format!(
                "This conversation's records are damaged from position {position} ({corruption}), so it cannot be served; an operator must restore the store from a backup (`ledgerwire log verify` names the damage)."
            ))
        }
        LedgerError::Fold {
            position, reason, ..
        } => {
            tracing::error!(%error, "refusing a conversation that does not fold");
            WireError::damaged(format!(
                "This conversation's record at position {position} cannot be read ({reason}), so it cannot be served; an operator must look at it (`ledgerwire replay` shows it)."
            ))
        }
        other => ledger_failure(other),
    }
}

/// A request that would start a segment while the server shuts down:
/// the client retries on the restarted server.
pub(super) fn draining() -> WireError {
    WireError::transient(
        DRAINING_RETRY_AFTER_SECONDS,
        "The server is shutting down; send this request again in a moment.",
    )
}

pub(super) fn busy(remaining_ms: u64) -> WireError {
    WireError::transient(seconds_ceil(remaining_ms), BUSY_DETAIL)
}

const BUSY_DETAIL: &str = "Another response is streaming in this conversation; retry once it ends.";

/// Counts `error` if it is a [`busy`] refusal; called once per answer
/// (a decision may be tried on a state held in memory first, and only
/// the answer given counts).
pub(super) fn count_refusal(error: WireError) -> WireError {
    if error.detail == BUSY_DETAIL {
        metrics::counter!(ledgerwire_foundations::telemetry::STUDIO_LEASE_CONFLICTS).increment(1);
    }
    error
}

#[cfg(test)]
mod tests {
    use super::*;
    use ledgerwire_ledger::Corruption;
    use ledgerwire_wire::frame::{ErrorFrame, Frame};

    #[test]
    fn damage_is_named_never_retryable_and_the_documented_fixture() {
        let error = LedgerError::Corrupt {
            stream: "studio/p/c".into(),
            position: 12,
            corruption: Corruption::Checksum {
                stored: 0x1a2b_3c4d,
                computed: 0,
            },
        };
        let frame = Frame::Error(ErrorFrame {
            seq: 5,
            error: refusal(&error),
        });
        let fixture: serde_json::Value = serde_json::from_str(include_str!(
            "../../../fixtures/studio/frame-error-conversation-damaged.json"
        ))
        .unwrap();
        assert_eq!(serde_json::to_value(frame).unwrap(), fixture);
        assert_eq!(refusal(&LedgerError::Closed).http_status(), 409);
    }
}
