//! ledgerwire: the Studio and Statewire server on one durable log.
//!
//! Owns: the module map below. Must never: let a module import one from a
//! layer above its own.
//!
//! One module per concept, in layers that point down (ARCHITECTURE.md
//! names the order; `tests/it/tidy.rs` checks it):
//!
//! 1. Foundations: [`telemetry`] (metric names and export),
//!    [`lifecycle`] (the shutdown phases every door follows), [`api_docs`]
//!    (how a door describes its routes to the OpenAPI document).
//! 2. [`ledger`]: the checksummed append log and its folds. Knows no door.
//! 3. [`wire`]: the Studio contract's types, bounds and edge validation.
//! 4. [`agent`]: the agent behind the Studio (trait and built-in agents).
//! 5. The doors: [`studio`] (contract v1 on the ledger) and [`statewire`]
//!    (the Statewire host), which never import each other.
//! 6. [`harness_sdk`]: the Studio's conversations as Statewire threads,
//!    then [`statewire_client`] (a Rust client of the Statewire door).
//! 7. [`record_kinds`] (every door's record kinds in one registry),
//!    [`log_commands`] (`ledgerwire log …` and `replay`), [`web`] (the
//!    page compiled in), then [`server`] (both doors on one HTTP server).
//! 8. Programs that use the rest as clients: [`chat`], [`crashtest`],
//!    [`loadgen`] (`ledgerwire bench`), [`audit_client`] (`--url`).

// The layer crates, under the names the modules here have always used.
pub use ledgerwire_agent as agent;
pub use ledgerwire_foundations::{api_docs, lifecycle, telemetry};
pub use ledgerwire_harness_sdk as harness_sdk;
pub use ledgerwire_ledger as ledger;
pub use ledgerwire_statewire as statewire;
pub use ledgerwire_studio as studio;
pub use ledgerwire_wire as wire;

pub mod audit_client;
pub mod chat;
pub mod crashtest;
pub mod loadgen;
pub mod log_commands;
pub mod record_kinds;
pub mod server;
pub mod statewire_client;
pub mod web;
