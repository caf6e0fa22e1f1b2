//! The Studio: the chat-and-canvas experience served over contract v1.
//!
//! The contract's vocabulary (requests, frames, bounds and refusals) is
//! [`crate::wire`], a layer below, shared with the agent.
//!
//! - [`records`]: the conversation's record kinds in the ledger.
//! - [`conversation`]: the conversation state, a pure fold of its records.
//! - [`canvas`]: the composition manifest's pure operations.
//! - [`auth`]: bearer token to principal, the one seam for identity.
//! - [`service`]: decisions (fold, decide, append where decided); `segment`
//!   streams a turn while it holds the lease, from the agent context
//!   `turn_context` builds out of the fold.
//! - `keyed`: requests that apply at most once per key (re-exported by
//!   `service`).
//! - [`seq`]: why a seq never repeats within a turn, across crashes.
//! - [`follow`]: the reconnect extension, and what a reconnect ends with.
//! - [`routes`]: the HTTP routes and SSE framing (`openapi`: what they
//!   answer, for the OpenAPI document); [`reads`]: the
//!   read-only routes (a conversation's canvas, its timeline and the
//!   replay check of its segments).
//! - [`rerun`]: recorded segments run through an agent again and compared
//!   (`ledgerwire replay --check`).
//!
//! Must never: keep a conversation's state anywhere but in the ledger
//! (memory holds fold caches only).
//! Owns: the Studio door over the ledger.

pub mod auth;
pub mod canvas;
pub mod conversation;
mod exchanges;
pub mod follow;
mod keyed;
mod openapi;
pub mod reads;
pub mod records;
mod refusals;
pub mod rerun;
pub mod routes;
mod segment;
pub mod seq;
pub mod service;
pub mod sse;
mod turn_context;
pub mod turns;

// The paths this crate's modules were written with, when the Studio was a
// module of the one ledgerwire crate.
use ledgerwire_agent as agent;
use ledgerwire_foundations::{api_docs, lifecycle, telemetry};
use ledgerwire_ledger as ledger;
use ledgerwire_wire as wire;
