//! Which ledger a command works on, chosen once from the command line,
//! and the one function that opens it.
//!
//! Owns: [`StoreArgs`] (the `--data`, `--store` and `--url` flags every
//! command that reads a ledger takes), [`StoreChoice`] (a local directory
//! or a PostgreSQL database) and [`StoreChoice::open`]. `serve` and the
//! `log` commands all come here. Must never: read or write a record, or
//! open a store the operator did not name.

use std::path::PathBuf;
use std::sync::Arc;

use crate::ledger::local::{LocalError, LocalStore, OpenMode};
use crate::ledger::postgres::{PostgresError, PostgresSettings, PostgresStore, is_postgres_url};
use crate::ledger::{Ledger, LedgerError};

/// The data directory when none is named.
pub const DEFAULT_DATA_DIR: &str = "./ledgerwire-data";

/// The ledger a command names: a local store's directory, a PostgreSQL
/// store, or a running server's audit API.
#[derive(clap::Args, Clone, Debug)]
pub struct StoreArgs {
    /// The local store's directory (stopped server).
    #[arg(long, default_value = DEFAULT_DATA_DIR)]
    pub data: PathBuf,
    /// Read a running server instead, through its audit API (sends
    /// LEDGERWIRE_ADMIN_TOKEN).
    #[arg(long, conflicts_with = "data")]
    pub url: Option<String>,
    /// A PostgreSQL store instead (postgres://…).
    #[arg(long, conflicts_with_all = ["data", "url"])]
    pub store: Option<String>,
}

/// Where a command's ledger is.
#[derive(Clone, Debug)]
pub enum Target {
    /// A running server's audit API, at this base URL.
    Server(String),
    /// A store opened in this process.
    Store(StoreChoice),
}

impl StoreArgs {
    /// The target the flags name.
    pub fn target(self) -> Result<Target, StoreChoiceError> {
        match self.url {
            Some(url) => Ok(Target::Server(url)),
            None => StoreChoice::new(self.data, self.store.as_deref()).map(Target::Store),
        }
    }

    /// The store the flags name, for a command that needs one in this
    /// process (`command` names it in the refusal of `--url`).
    pub fn local_or_database(self, command: &'static str) -> Result<StoreChoice, StoreChoiceError> {
        match self.target()? {
            Target::Store(choice) => Ok(choice),
            Target::Server(_) => Err(StoreChoiceError::NeedsStore(command)),
        }
    }
}

/// A store named wrongly.
#[derive(Debug, thiserror::Error)]
pub enum StoreChoiceError {
    /// `--store` is neither a PostgreSQL URL nor a directory.
    #[error("--store: {0}; write postgres://user@host:port/database, or a directory")]
    Store(String),
    /// `--url` given to a command that must open the store itself.
    #[error("`{0}` works on the store itself, not through a running server: drop --url")]
    NeedsStore(&'static str),
}

/// A ledger's store: where its records live.
#[derive(Clone, Debug)]
pub enum StoreChoice {
    /// The local store in this directory (the default; one process).
    Local(PathBuf),
    /// A PostgreSQL database, which several instances may share.
    Postgres(Box<PostgresSettings>),
}

/// How a local store is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opening {
    /// For `serve`, and a tool that writes (`log probe`, the destination
    /// of `log copy`): created if missing; the integrity scan runs in the
    /// background while the ledger serves.
    Create,
    /// For a tool on a stopped server's store: it must exist, and every
    /// record is checked before the tool reads one.
    Existing,
}

/// Why a named store did not open.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    Local(#[from] LocalError),
    #[error(transparent)]
    Postgres(#[from] PostgresError),
}

impl StoreChoice {
    /// `store` when given (a `postgres://` URL or a directory), else the
    /// local store in `data`.
    pub fn new(data: PathBuf, store: Option<&str>) -> Result<Self, StoreChoiceError> {
        match store {
            Some(url) if is_postgres_url(url) => PostgresSettings::from_url(url)
                .map(|settings| StoreChoice::Postgres(Box::new(settings)))
                .map_err(|error| StoreChoiceError::Store(error.to_string())),
            Some("") => Err(StoreChoiceError::Store("empty".to_owned())),
            Some(directory) => Ok(StoreChoice::Local(PathBuf::from(directory))),
            None => Ok(StoreChoice::Local(data)),
        }
    }

    /// Opens the store as a [`Ledger`]; a database gets its tables if it
    /// has none.
    pub async fn open(&self, opening: Opening) -> Result<Ledger, OpenError> {
        match self {
            StoreChoice::Local(directory) => {
                let store = match opening {
                    Opening::Create => {
                        LocalStore::open_scrubbing(directory, OpenMode::CreateIfMissing)?
                    }
                    Opening::Existing => LocalStore::open(directory, OpenMode::MustExist)?.0,
                };
                tracing::info!(path = %directory.display(), "ledger open");
                Ok(Ledger::new(Arc::new(store)))
            }
            StoreChoice::Postgres(settings) => {
                let ledger = PostgresStore::open_ledger(settings).await?;
                tracing::info!(database = %settings.describe(), "ledger open (PostgreSQL)");
                Ok(ledger)
            }
        }
    }
}
