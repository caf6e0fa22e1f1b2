//! ledgerwire: the Studio and Statewire server on one durable log.
//!
//! Layout, one module per concept (see ARCHITECTURE.md):
//! - [`ledger`]: the checksummed, sled-backed append log, its streams,
//!   durability, folds and integrity checks. All state is a fold of it.
//! - [`server`]: the HTTP server (axum) and its routes.
//! - [`statewire`]: the Statewire host: negotiation, transports, lanes
//!   and synced documents, on the ledger.
//! - [`tools`]: the operator commands behind `ledgerwire log …`.

pub mod ledger;
pub mod server;
pub mod statewire;
pub mod tools;
