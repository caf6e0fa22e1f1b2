//! ledgerwire: the Studio and Statewire server on one durable log.
//!
//! Layout, one module per concept (see ARCHITECTURE.md):
//! - [`agent`]: the agent behind the Studio (trait and built-in agents).
//! - [`audit_client`]: `log … --url`, reading a running server's audit API.
//! - [`chat`]: the `ledgerwire chat` terminal client.
//! - [`crashtest`]: `ledgerwire crashtest`, the kill-anywhere campaign.
//! - [`harness`]: `harness-sdk`, the Studio's conversations as Statewire
//!   threads (the application protocol between the two doors).
//! - [`ledger`]: the checksummed, sled-backed append log, its streams,
//!   durability, folds and integrity checks. All state is a fold of it.
//! - [`loadgen`]: `ledgerwire bench`, the load generator.
//! - [`lifecycle`]: shutdown phases (serving, draining, cut) both doors follow.
//! - [`scratch`]: encoding into a reused per-thread buffer (one
//!   allocation a record or frame).
//! - [`server`]: the HTTP server (axum) and its routes.
//! - [`studio`]: the Studio contract v1: wire types, conversation fold,
//!   leases, routes.
//! - [`statewire`]: the Statewire host: negotiation, transports, lanes
//!   and synced documents, on the ledger.
//! - [`telemetry`]: the metrics every layer records, and their export.
//! - [`tools`]: the operator commands behind `ledgerwire log …`.
//! - [`web`]: the web Studio, a page at `/` compiled into the binary.

pub mod agent;
pub mod audit_client;
pub mod chat;
pub mod crashtest;
pub mod harness;
pub mod ledger;
pub mod lifecycle;
pub mod loadgen;
pub mod scratch;
pub mod server;
pub mod statewire;
pub mod studio;
pub mod telemetry;
pub mod tools;
pub mod web;
