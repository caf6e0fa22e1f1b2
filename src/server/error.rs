//! Why `serve` cannot start.
//!
//! Owns: [`ServeError`], each failure with the sentence an operator
//! reads. Must never: decide whether to retry (the caller exits).

use std::net::SocketAddr;

use crate::ledger::LedgerError;
use crate::ledger::local::LocalError;
use crate::ledger::postgres::PostgresError;
use crate::store::OpenError;

/// Errors that stop the server from starting.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    Store(#[from] LocalError),
    #[error(transparent)]
    Postgres(#[from] PostgresError),
    #[error("cannot listen on {addr}: {source}; choose another --addr")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("server error: {0}")]
    Io(#[from] std::io::Error),
    #[error("the Statewire host cannot start: {0}")]
    Statewire(#[from] crate::statewire::host::HostError),
}
