//! The `log` commands on whichever store the operator names
//! ([`StoreChoice`]): a local store gets its offline checks of its own
//! files, a PostgreSQL store the checks the neutral [`Ledger`] makes.
//!
//! Owns: `log verify`, `log stats` and `log probe` over either store.
//! Must never: open a store but through [`StoreChoice::open`], or write
//! into a database (opening creates the tables of an empty one, as
//! `serve` would) but for `log probe`'s records.

use std::io::Write;
use std::path::Path;

use super::{ProbeConfig, ToolError, print_stats, print_verify, probe_ledger};
use crate::ledger::VerifyReport;
use crate::store::{Opening, StoreChoice};

/// `log verify`: every record checked (a local store's journal files
/// too); fails on any problem.
pub async fn verify_store(
    choice: &StoreChoice,
    out: &mut impl Write,
) -> Result<VerifyReport, ToolError> {
    match choice {
        StoreChoice::Local(data) => super::verify(data, out),
        StoreChoice::Postgres(_) => {
            let ledger = choice.open(Opening::Existing).await?;
            print_verify(ledger.verify().await?, out)
        }
    }
}

/// `log stats`: record counts, bytes and streams.
pub async fn stats_store(choice: &StoreChoice, out: &mut impl Write) -> Result<(), ToolError> {
    match choice {
        StoreChoice::Local(data) => super::stats(data, out),
        StoreChoice::Postgres(_) => {
            let ledger = choice.open(Opening::Existing).await?;
            print_stats(&ledger.verify().await?, out)
        }
    }
}

/// `log probe`: probe records appended to a store that holds only probe
/// streams (created if missing).
pub async fn probe_store(choice: &StoreChoice, config: &ProbeConfig) -> Result<(), ToolError> {
    let ledger = choice.open(Opening::Create).await?;
    let place = match choice {
        StoreChoice::Local(data) => data.display().to_string(),
        StoreChoice::Postgres(settings) => settings.describe(),
    };
    let result = probe_ledger(&ledger, config, Path::new(&place)).await;
    // The acknowledged appends are durable already; flushing buffered
    // ones is what a clean exit owes them.
    ledger.flush().await?;
    result
}
