//! The operator commands that differ on a PostgreSQL store (`--store
//! URL`): opening it, verification and counts without a journal to
//! check, and probes into a database. `log dump` and `replay` take any
//! store (`open_store`).
//!
//! Owns: the `--store URL` paths of `log verify`, `log stats` and `log
//! probe`.
//!
//! Must never: write into the database (opening creates the tables of
//! an empty one, as `serve` would, and nothing else), but for `log
//! probe`'s records.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use super::{ProbeConfig, ToolError, print_stats, print_verify, probe_ledger};
use crate::ledger::postgres::{PostgresSettings, PostgresStore};
use crate::ledger::{Ledger, VerifyReport};

/// Opens the PostgreSQL store at `url`.
pub async fn open_postgres(url: &str) -> Result<(Arc<PostgresStore>, Ledger), ToolError> {
    let settings = PostgresSettings::from_url(url)?;
    let store = Arc::new(PostgresStore::open(&settings).await?);
    let ledger = Ledger::new(store.clone());
    Ok((store, ledger))
}

/// `log verify --store URL`: every record below the scan's horizon
/// checked; fails on any problem.
pub async fn postgres_verify(url: &str, out: &mut impl Write) -> Result<VerifyReport, ToolError> {
    let (_, ledger) = open_postgres(url).await?;
    print_verify(ledger.verify().await?, out)
}

/// `log stats --store URL`.
pub async fn postgres_stats(url: &str, out: &mut impl Write) -> Result<(), ToolError> {
    let (_, ledger) = open_postgres(url).await?;
    print_stats(&ledger.verify().await?, out)
}

/// `log probe --store URL`: probe records appended to a database that
/// holds only probe streams.
pub async fn postgres_probe(url: &str, config: &ProbeConfig) -> Result<(), ToolError> {
    let (store, ledger) = open_postgres(url).await?;
    let place = Path::new(store.description());
    let result = probe_ledger(&ledger, config, place).await;
    ledger.flush().await?;
    result
}
