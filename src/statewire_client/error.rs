//! Why a Statewire client stopped: the host refused or ended the attach,
//! the transport failed, a packet broke the protocol, or a local bound
//! or deadline was reached.
//!
//! Owns: [`ClientError`]. Must never: lose the host's `fin` (it is kept
//! whole, code and sentence).

use crate::statewire::packet::Fin;

/// Why the client stopped.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("the host refused the attach: {0:?}")]
    Refused(Fin),
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("transport: {0}")]
    Transport(String),
    #[error("{0} is not selected on this attach")]
    Unselected(String),
    #[error("the {0} outbox is full")]
    OutboxFull(String),
    #[error("timed out")]
    Timeout,
    #[error("the attach ended: {0:?}")]
    Ended(Option<Fin>),
}
