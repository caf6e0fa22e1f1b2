//! A Rust Statewire client, for the programs that use the server as a
//! client (`chat --statewire`, the load generator, the crash campaign),
//! the tests and the benchmarks. It lives outside the door: the server
//! never depends on it.
//!
//! - [`session`]: what the client offers and persists (pure).
//! - [`connection`]: one live attach over WebSocket.
//! - [`ClientError`]: why the client stopped.
//! - [`harness`]: `harness-sdk`'s commands and documents over a
//!   connection.
//!
//! Owns: the client side of the Statewire protocol. Must never: be
//! imported by the door it talks to, or send a command it has not stored.

pub mod connection;
mod error;
pub mod harness;
pub mod session;

pub use connection::{Connection, RETRY_INITIAL_MS, RETRY_MAX_MS};
pub use error::ClientError;
pub use session::{
    ClientConfig, ClientSelection, LaneOutbox, MAX_OUTBOX_COMMANDS, ProtocolOfferConfig, Session,
    StoredCommand, validate_selection,
};
