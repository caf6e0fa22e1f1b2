//! A Rust Statewire client, for the programs that use the server as a
//! client (`chat --statewire`, the load generator, the crash campaign),
//! the tests and the benchmarks. It lives outside the door: the server
//! never depends on it.
//!
//! - [`session`]: what the client offers and persists (pure).
//! - [`connection`]: one live attach over WebSocket.
//! - [`harness`]: `harness-sdk`'s commands and documents over a
//!   connection.
//!
//! Owns: the client side of the Statewire protocol. Must never: be
//! imported by the door it talks to, or send a command it has not stored.

pub mod connection;
pub mod harness;
pub mod session;

use crate::statewire::packet::Fin;

pub use connection::{Connection, RETRY_INITIAL_MS, RETRY_MAX_MS};
pub use session::{
    ClientConfig, ClientSelection, LaneOutbox, MAX_OUTBOX_COMMANDS, ProtocolOfferConfig, Session,
    StoredCommand, validate_selection,
};

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
