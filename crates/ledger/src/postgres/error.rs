//! The PostgreSQL store's failures, and how each reaches a caller: every
//! failure to reach or use the database is the ledger's retryable
//! [`LedgerError::Unavailable`], worded with PostgreSQL's own reason; a
//! lost connection also marks the store unavailable for `/readyz` until
//! a statement succeeds again.
//!
//! Owns: `PostgresError` and its mapping to the neutral error.
//!
//! Must never: hand a caller the driver's error type, or word a failure
//! that may have applied nothing as damage.

use std::sync::Mutex;

use tokio_postgres::error::SqlState;

use crate::error::LedgerError;

/// Errors of the PostgreSQL store.
#[derive(Debug, thiserror::Error)]
pub enum PostgresError {
    #[error("invalid PostgreSQL URL: {0}")]
    Url(String),
    #[error("cannot get a PostgreSQL connection: {0}")]
    Connection(String),
    #[error("PostgreSQL failed to {doing}: {detail}")]
    Statement {
        doing: &'static str,
        detail: String,
        /// The connection or the server went, rather than one statement.
        lost: bool,
    },
    #[error(
        "the database holds ledgerwire schema version {found}, newer than this build's {known}; upgrade ledgerwire (an older build must not write into it)"
    )]
    NewerSchema { found: i64, known: i64 },
}

impl PostgresError {
    /// A failed statement, worded with PostgreSQL's reason and code.
    pub(super) fn statement(doing: &'static str, error: &tokio_postgres::Error) -> Self {
        let lost = is_lost(error);
        let detail = match error.as_db_error() {
            Some(db) => format!("{} (SQLSTATE {})", db.message(), db.code().code()),
            None => match std::error::Error::source(error) {
                Some(source) => format!("{error}: {source}"),
                None => error.to_string(),
            },
        };
        Self::Statement {
            doing,
            detail,
            lost,
        }
    }

    /// Whether the database could not be reached (rather than one
    /// statement failing on a working connection).
    pub(super) fn is_lost(&self) -> bool {
        matches!(
            self,
            Self::Connection(_) | Self::Statement { lost: true, .. }
        )
    }
}

impl From<deadpool_postgres::PoolError> for PostgresError {
    fn from(error: deadpool_postgres::PoolError) -> Self {
        use deadpool_postgres::PoolError;
        let detail = match &error {
            PoolError::Timeout(_) => format!(
                "every connection stayed busy or none could be made within {} ms",
                super::settings::POOL_WAIT_TIMEOUT_MS
            ),
            PoolError::Backend(error) => match std::error::Error::source(error) {
                Some(source) => format!("{error}: {source}"),
                None => error.to_string(),
            },
            other => other.to_string(),
        };
        Self::Connection(detail)
    }
}

impl From<PostgresError> for LedgerError {
    fn from(error: PostgresError) -> Self {
        LedgerError::Unavailable {
            reason: error.to_string(),
        }
    }
}

/// Whether a driver error means the connection or the server went: the
/// socket closed, a connection exception (class 08), the server shutting
/// down or refusing connections.
fn is_lost(error: &tokio_postgres::Error) -> bool {
    if error.is_closed() {
        return true;
    }
    match error.code() {
        Some(code) => {
            code.code().starts_with("08")
                || [
                    SqlState::ADMIN_SHUTDOWN,
                    SqlState::CRASH_SHUTDOWN,
                    SqlState::CANNOT_CONNECT_NOW,
                    SqlState::TOO_MANY_CONNECTIONS,
                ]
                .contains(code)
        }
        // No SQLSTATE: the failure is the transport's.
        None => true,
    }
}

/// Whether the database can be reached, as the store last found it, and
/// what an outage cost.
///
/// One outage is one WARN when it starts and one INFO when it ends, with
/// the number of calls refused meanwhile. Only a failure to get a working
/// connection starts an outage: a statement that loses its connection
/// while the store is up (a pooled connection that died with an earlier
/// database restart, the LISTEN connection being replaced) is refused
/// as retryable like any other, but the next connection decides, so
/// `/readyz` and the log do not flap while the pool renews itself.
#[derive(Default)]
pub(super) struct Availability {
    state: Mutex<Outage>,
}

#[derive(Default)]
struct Outage {
    /// Why the store is down; `None` while it is up.
    down: Option<String>,
    since: Option<std::time::Instant>,
    /// Calls refused since the outage began.
    refused: u64,
}

impl Availability {
    /// Records the outcome of a statement: a lost database marks the
    /// store unavailable; any success marks it back.
    pub(super) fn observe<T>(&self, result: Result<T, PostgresError>) -> Result<T, LedgerError> {
        match result {
            Ok(value) => {
                self.up();
                Ok(value)
            }
            Err(error) => {
                self.refused(&error);
                Err(error.into())
            }
        }
    }

    /// Counts a refused call; one that could not get a connection at all
    /// starts an outage.
    fn refused(&self, error: &PostgresError) {
        let mut state = self.lock();
        if state.down.is_some() {
            state.refused += 1;
        } else if matches!(error, PostgresError::Connection(_)) {
            drop(state);
            self.set_down(error.to_string());
            self.lock().refused += 1;
        } else if error.is_lost() {
            tracing::debug!(%error, "a PostgreSQL connection was lost; the next one decides whether the database is down");
        }
    }

    pub(super) fn up(&self) {
        let mut state = self.lock();
        if let Some(reason) = state.down.take() {
            let seconds = state
                .since
                .take()
                .map_or(0.0, |s| s.elapsed().as_secs_f64());
            let refused = std::mem::take(&mut state.refused);
            tracing::info!(
                was = %reason,
                outage_seconds = format!("{seconds:.1}"),
                refused,
                "PostgreSQL is reachable again"
            );
        }
    }

    pub(super) fn set_down(&self, reason: String) {
        let mut state = self.lock();
        if state.down.is_none() {
            tracing::warn!(%reason, "PostgreSQL cannot be reached; calls that need it are refused as retryable until it is back");
            state.since = Some(std::time::Instant::now());
        }
        state.down = Some(reason);
    }

    pub(super) fn reason(&self) -> Option<String> {
        self.lock().down.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Outage> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}
