//! The web Studio (`GET /`): its files as served, and the page itself in
//! headless Chromium against a real server on 127.0.0.1, through
//! WebDriver.

mod access;
mod audit;
mod browser;
mod chat;
mod inspector;
mod page;
mod pauses;
mod recovery;

use std::net::SocketAddr;
use std::sync::Arc;

use ledgerwire::agent::builtin::BuiltinAgent;

use crate::support::{open, quick_studio, scratch, start_studio, start_with_agent};

/// A server with the built-in data agent (real charts and switchable
/// choices); the directory must outlive the test.
pub async fn builtin_server() -> (tempfile::TempDir, SocketAddr) {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let (addr, server) =
        start_with_agent(ledger, quick_studio(), Arc::new(BuiltinAgent::default())).await;
    std::mem::forget(server);
    (dir, addr)
}

/// A server with the minimal agent (`clarify`, `slow`, plans).
pub async fn minimal_server() -> (tempfile::TempDir, SocketAddr) {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let addr = start_studio(ledger, quick_studio()).await;
    (dir, addr)
}
