//! The operator commands on a PostgreSQL store (`--store URL`): the same
//! verification, dump, counts and replays as on a local one, through the
//! neutral ledger.
//!
//! Owns: the `--store URL` paths of `log` and `replay`.
//!
//! Must never: write into the database (opening creates the tables of
//! an empty one, as `serve` would, and nothing else), but for `log
//! probe`'s records.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use super::{
    ProbeConfig, ToolError, dump_ledger, print_stats, print_verify, probe_ledger,
    replay_check_ledger, replay_check_recorded_ledger, replay_ledger,
};
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

/// `log dump --store URL`.
pub async fn postgres_dump(
    url: &str,
    stream: Option<&str>,
    from: u64,
    out: &mut impl Write,
) -> Result<(), ToolError> {
    let (_, ledger) = open_postgres(url).await?;
    dump_ledger(&ledger, stream, from, out).await
}

/// `replay --store URL`.
pub async fn postgres_replay(
    url: &str,
    conversation: &str,
    principal: Option<&str>,
    out: &mut impl Write,
) -> Result<(), ToolError> {
    let (_, ledger) = open_postgres(url).await?;
    replay_ledger(&ledger, conversation, principal, out).await
}

/// `replay --check --store URL`, with `agent` or (`None`) the agent the
/// conversation's segments recorded.
pub async fn postgres_replay_check(
    url: &str,
    conversation: &str,
    principal: Option<&str>,
    agent: Option<&dyn crate::agent::Agent>,
    scenarios: &Path,
    out: &mut impl Write,
) -> Result<(), ToolError> {
    let (_, ledger) = open_postgres(url).await?;
    match agent {
        Some(agent) => replay_check_ledger(&ledger, conversation, principal, agent, out).await,
        None => {
            replay_check_recorded_ledger(&ledger, conversation, principal, scenarios, out).await
        }
    }
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
