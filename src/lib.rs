//! ledgerwire: the Studio and Statewire server on one durable log.
//!
//! Owns: the server, the command line and the tools, on top of the layer
//! crates under `crates/`. Must never: let a module import one from a
//! layer above its own.
//!
//! The layer crates, bottom up (the compiler keeps their order; each
//! `lib.rs` says what it owns): `ledgerwire-foundations` ([`telemetry`],
//! [`lifecycle`], [`api_docs`]), `ledgerwire-ledger` ([`ledger`]: the
//! checksummed log, its folds and stores; knows no door),
//! `ledgerwire-wire` ([`wire`]: the Studio contract's types),
//! `ledgerwire-agent` ([`agent`]), the two doors `ledgerwire-studio`
//! ([`studio`]) and `ledgerwire-statewire` ([`statewire`]), which never
//! import each other, and `ledgerwire-harness-sdk` ([`harness_sdk`]).
//!
//! This package's modules, in layers that point down (ARCHITECTURE.md
//! names the order; `tests/it/tidy.rs` checks it):
//!
//! 1. [`record_kinds`] (every door's record kinds in one registry),
//!    [`store`] (which ledger a command names, and opening it) and
//!    [`statewire_client`] (a Rust client of the Statewire door, kept
//!    out of the door);
//! 2. [`log_commands`] (`ledgerwire log …` and `replay`), [`web`] (the
//!    page compiled in), then [`server`] (both doors on one HTTP server);
//! 3. programs that use the rest as clients: [`chat`], [`crashtest`],
//!    [`loadgen`] (`ledgerwire bench`), [`audit_client`] (`--url`);
//! 4. [`cli`]: the command line, which runs all of the above.

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
pub mod cli;
pub mod crashtest;
pub mod loadgen;
pub mod log_commands;
pub mod record_kinds;
pub mod server;
pub mod statewire_client;
pub mod store;
pub mod web;
