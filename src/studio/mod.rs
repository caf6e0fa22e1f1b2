//! The Studio: the chat-and-canvas experience served over contract v1.
//!
//! This module owns the Studio's wire vocabulary ([`wire`]): the requests a
//! client posts, the frames the server streams, their bounds and their
//! refusals. It must never reach the ledger, the network or a clock: routes
//! (issue 4) parse with it, fold conversation state elsewhere, and hand the
//! folded pending interrupt back to it for the checks that need state.

pub mod wire;
