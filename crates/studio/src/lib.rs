//! The Studio: the chat-and-canvas experience served over contract v1.
//!
//! The contract's vocabulary (requests, frames, bounds and refusals) is
//! [`ledgerwire_wire`], a layer below, shared with the agent. Each module
//! imports what it uses from the module that owns it; from the bottom up:
//!
//! - [`auth`]: bearer token to principal, the one seam for identity;
//!   [`config`]: the settings and their defaults; [`keyed`]: requests that
//!   apply at most once per key; [`seq`]: why a seq never repeats within a
//!   turn, across crashes; [`sse`]: the event framing.
//! - [`records`]: the conversation's record kinds in the ledger.
//! - [`conversation`]: the conversation state, a pure fold of its records,
//!   over [`turns`], [`canvas`] (the manifest's pure operations) and
//!   `exchanges` (the model calls a segment may reuse).
//! - `turn_context`: the agent's context, built from the fold.
//! - `refusals`: what a client is answered when the service cannot act.
//! - [`service`]: the [`Studio`](service::Studio) handle over the fold
//!   cache; `decide`: the one loop every decision goes through.
//! - [`follow`]: the reconnect extension, and what a reconnect ends with.
//! - `segment`: a segment streaming a turn while it holds the lease.
//! - [`start`]: turn requests and answers, keyed or not, starting a
//!   segment; `cancel` and `mutation`: the decisions that start none.
//! - [`rerun`]: recorded segments run through an agent again and compared
//!   (`ledgerwire replay --check`).
//! - [`routes`]: the HTTP routes and SSE responses (`openapi`: what they
//!   answer, for the OpenAPI document); [`reads`]: the read-only routes (a
//!   conversation's canvas, its timeline and the replay check of its
//!   segments).
//!
//! Must never: keep a conversation's state anywhere but in the ledger
//! (memory holds fold caches only).
//! Owns: the Studio door over the ledger.

pub mod auth;
mod cancel;
pub mod canvas;
pub mod config;
pub mod conversation;
mod decide;
mod exchanges;
pub mod follow;
pub mod keyed;
mod mutation;
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
pub mod start;
mod turn_context;
pub mod turns;
