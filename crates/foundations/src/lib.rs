//! ledgerwire-foundations: what every layer shares and nothing else.
//!
//! Owns: the metric names and their export ([`telemetry`]), the shutdown
//! phases every door follows ([`lifecycle`]), and how a door describes its
//! routes to the OpenAPI document ([`api_docs`]). Must never: know a
//! record, a door, a store or a frame; everything here sits below the
//! ledger.

pub mod api_docs;
pub mod lifecycle;
pub mod telemetry;
