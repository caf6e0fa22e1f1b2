//! The Studio wire, contract v1 (`schema_version: 1`, deltas 1–24).
//!
//! Owns the exact JSON of the four requests and the thirteen frames, the
//! error grammar, every client-controlled bound, and the checks that refuse
//! what the contract does not allow. It must never hold conversation
//! state, perform I/O, or accept a member the contract does not name in a
//! request. One file per concept:
//!
//! - [`ids`]: id newtypes; [`limits`]: the named bounds;
//! - [`error`]: [`WireError`], its codes and retry modes;
//!   [`pointer`](mod@pointer): how a refusal names a member;
//! - [`request`]: the four requests; [`seed`]: Search seeds (delta 18);
//! - [`composition`]: the manifest and its seven operations;
//! - [`plan`], [`elicitation`]: the two pauses and their answers;
//! - [`frame`]: the thirteen frames;
//! - [`validate`]: the edge parse functions;
//! - [`schema`]: the JSON Schema of the whole wire.

pub mod composition;
pub mod elicitation;
pub mod error;
pub mod frame;
pub mod ids;
pub mod limits;
pub mod plan;
pub mod pointer;
pub mod request;
#[cfg(feature = "axum")]
mod response;
pub mod schema;
pub mod seed;
pub mod validate;

pub use error::{ErrorCode, Retry, RetryMode, WireError};
pub use frame::{Frame, FrameEvent};
pub use request::{RequestKind, StudioRequest};
pub use validate::{
    parse_cancel_request, parse_composition_mutation, parse_frame, parse_interrupt_response,
    parse_request, parse_turn_request,
};

/// The contract version every frame and request belongs to.
pub const SCHEMA_VERSION: u32 = 1;
