//! The host's own failures, and the `fin` each ends what it broke with:
//! damage to a thread's records is named and final (`thread-damaged`), an
//! unavailable store is the retryable `store-unavailable` (503), anything
//! else the generic, retryable `server-error`.
//!
//! Owns: [`HostError`] and the mapping of a failure to its `fin`. Must
//! never: present damage as retryable, or an outage as damage.

use crate::packet::{Fin, FinCode, FrameViolation};
use ledgerwire_ledger::LedgerError;

/// Why the host could not be built or could not serve.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("registration: {0}")]
    Registration(String),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// A failure of the host's own, as the `fin` that ends what it broke.
pub(super) fn server_fin(error: impl Failure) -> Fin {
    match error.ledger() {
        Some(LedgerError::Corrupt {
            position,
            corruption,
            ..
        }) => {
            tracing::error!(%error, "refusing a damaged statewire thread");
            Fin::new(
                FinCode::ThreadDamaged,
                format!(
                    "this thread's records are damaged from position {position} ({corruption}), so it cannot be served; an operator must restore the store from a backup (`ledgerwire log verify` names the damage)"
                ),
            )
        }
        Some(LedgerError::Fold {
            position, reason, ..
        }) => {
            tracing::error!(%error, "refusing a statewire thread that does not fold");
            Fin::new(
                FinCode::ThreadDamaged,
                format!(
                    "this thread's record at position {position} cannot be read ({reason}), so it cannot be served; an operator must look at it (`ledgerwire log dump` shows it)"
                ),
            )
        }
        Some(LedgerError::Unavailable { .. }) => {
            // The store reports its outage once; each refusal is routine.
            tracing::debug!(%error, "the store is unavailable to a statewire thread");
            Fin::new(
                FinCode::StoreUnavailable,
                "the store cannot be reached now and nothing of this statement was recorded; attach again and retry shortly (here or on another instance): unanswered commands are sent again and run once",
            )
        }
        _ => {
            tracing::error!(%error, "statewire host failure");
            Fin::new(
                FinCode::ServerError,
                "the host could not record the statement",
            )
        }
    }
}

/// A ledger failure met outside the host (the HTTP transport's relay),
/// as the `fin` the host would end with.
pub fn store_fin(error: &LedgerError) -> Fin {
    server_fin(error)
}

/// The same failure, as the violation a frame's handler returns.
pub(super) fn server_violation(error: impl Failure) -> FrameViolation {
    let fin = server_fin(error);
    FrameViolation {
        code: fin.code,
        message: fin.message,
    }
}

/// A frame's violation as the `fin` that ends its attach.
pub(super) fn fin_violation(violation: &FrameViolation) -> Fin {
    Fin::new(violation.code, violation.message.clone())
}

/// An error the host can fail with: the ledger error inside it, if any,
/// decides whether it is damage.
pub(super) trait Failure: std::fmt::Display {
    fn ledger(&self) -> Option<&LedgerError> {
        None
    }
}

impl Failure for LedgerError {
    fn ledger(&self) -> Option<&LedgerError> {
        Some(self)
    }
}

impl Failure for HostError {
    fn ledger(&self) -> Option<&LedgerError> {
        match self {
            HostError::Ledger(error) => Some(error),
            HostError::Registration(_) => None,
        }
    }
}

/// A failure described only in words (never damage).
impl Failure for String {}

impl<T: Failure + ?Sized> Failure for &T {
    fn ledger(&self) -> Option<&LedgerError> {
        (**self).ledger()
    }
}
