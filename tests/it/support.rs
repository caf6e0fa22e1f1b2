//! Shared helpers for the integration tests.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use ledgerwire::ledger::{Ledger, OpenMode, StreamKey, VerifyReport};
use ledgerwire::server::BoundServer;

/// A fresh directory under Cargo's target tmpdir (same disk as real data).
pub fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch directory")
}

pub fn open(path: &Path) -> (Ledger, VerifyReport) {
    Ledger::open(path, OpenMode::CreateIfMissing).expect("open ledger")
}

pub fn stream(name: &str) -> StreamKey {
    StreamKey::new(name).expect("stream key")
}

/// The real `ledgerwire` binary built for this test run.
pub fn binary() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ledgerwire"));
    command.env("RUST_LOG", "warn");
    command
}

/// A server on a free loopback port, running until the test's runtime ends.
pub async fn start_server(ledger: Ledger) -> SocketAddr {
    let addr: SocketAddr = "127.0.0.1:0".parse().expect("loopback address");
    let server = BoundServer::bind_with(addr, ledger).await.expect("bind");
    let addr = server.local_addr().expect("local address");
    tokio::spawn(server.run(std::future::pending()));
    addr
}
