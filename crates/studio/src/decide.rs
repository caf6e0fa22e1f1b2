//! How every Studio decision is made: fold the conversation, decide from
//! that state, append the decision at exactly the position it was decided
//! at, and on a conflict (another writer got there first: a second server,
//! a `/cancel`, a canvas mutation) fold again and decide again. A keyed
//! request's repeat is answered from the record that applied the first.
//!
//! Owns: that loop and its bound ([`MAX_DECISION_ATTEMPTS`]).
//! Must never: append anywhere but at the position it decided at, or
//! refuse anything from a state not folded to the stream's end.

use std::sync::Arc;

use ledgerwire_ledger::record::now_ms;
use ledgerwire_ledger::{Durability, ExpectedPosition, LedgerError, NewRecord, Payload, StreamKey};
use ledgerwire_wire::WireError;

use super::conversation::Conversation;
use super::keyed::{Decided, RequestKey};
use super::records::RequestApplied;
use super::refusals::{busy, count_refusal, ledger_failure};
use super::service::Studio;

/// Most times a decision is re-folded after losing a race for the stream.
pub const MAX_DECISION_ATTEMPTS: usize = 64;

impl Studio {
    /// Folds, decides, and appends the decision where it was decided;
    /// decides again after losing a race. For a request carrying `key`:
    /// if a request with that key was applied, its recorded outcome comes
    /// back and nothing is appended; otherwise the decision's records
    /// carry the key and `outcome` of the value, in the same append.
    pub(super) async fn decide<T>(
        &self,
        stream: &StreamKey,
        key: Option<&RequestKey>,
        outcome: impl Fn(&T) -> String,
        mut decide: impl FnMut(&Conversation, u64) -> Result<(Vec<NewRecord>, T), WireError>,
    ) -> Result<Decided<T>, WireError> {
        for attempt in 0..MAX_DECISION_ATTEMPTS {
            // The first attempt decides on the state this instance knows
            // (a conversation it holds none of: a new one) without a read:
            // the append at its position conflicts if another writer moved
            // the stream. Anything but an append is answered only from a
            // state folded to the stream's end.
            let (folded, checked) = match self.inner.folds.known(stream).await {
                Some(known) if attempt == 0 => (known, false),
                None if attempt == 0 => (Arc::default(), false),
                _ => (self.fold(stream).await?, true),
            };
            if let Some(key) = key
                && let Some(before) = folded.state.applied_outcome(key.as_str())
            {
                return Ok(Decided::Before(before.to_owned()));
            }
            let decided = decide(&folded.state, now_ms());
            let appends = decided
                .as_ref()
                .is_ok_and(|(records, _)| !records.is_empty());
            if !appends && !checked {
                continue;
            }
            let (mut records, value) = decided.map_err(count_refusal)?;
            if records.is_empty() {
                return Ok(Decided::Now(value));
            }
            if let Some(key) = key {
                let applied = RequestApplied {
                    key: key.as_str().to_owned(),
                    outcome: outcome(&value),
                };
                records.push(applied.to_record());
            }
            let expected = ExpectedPosition::Exactly(folded.position);
            drop(folded);
            match self
                .inner
                .folds
                .append(stream, expected, records, Durability::Durable)
                .await
            {
                Ok(_) => return Ok(Decided::Now(value)),
                Err(LedgerError::Conflict { .. }) => continue,
                // Damage refuses before anything is written: the fold
                // from the store answers it by name.
                Err(LedgerError::Corrupt { .. }) if !checked => continue,
                Err(error) => return Err(ledger_failure(&error)),
            }
        }
        Err(count_refusal(busy(self.inner.config.heartbeat_ms)))
    }
}
