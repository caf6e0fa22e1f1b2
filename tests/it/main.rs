//! The one integration-test crate (it links once). Each module tests one
//! area through the public API or against the real binary and server.

mod agent;
mod bench;
mod caveats;
mod chat;
mod chat_recovery;
mod client_ts;
mod conformance;
mod crash;
mod crashtest;
mod digest;
mod golden;
mod harness_sdk;
mod keyed;
mod local_store;
mod log_secrets;
mod openapi;
mod operating;
mod postgres;
mod power_loss;
mod reads;
mod recovery;
mod replay;
mod scenarios;
mod seeds;
mod server;
mod shutdown;
mod snapshots;
mod statewire;
mod studio;
mod studio_crash;
mod studio_wire;
mod support;
mod switches;
mod tidy;
mod web;
