//! The database transactions a run on a PostgreSQL store cost: the
//! database's own count of committed transactions
//! (`pg_stat_database.xact_commit`) before the server starts and after
//! it has stopped, divided by the conversations it served (warm-up
//! included, since its transactions are in the count too).
//!
//! Why after the stop: a PostgreSQL backend reports its counts to the
//! statistics at most once a second while it runs, and always when it
//! exits; only once every session of the server has ended is the count
//! whole.
//!
//! Owns: that one connection and its two readings. Must never: count
//! while the server's sessions may still hold unreported transactions
//! (it waits for them to end, at most [`SESSIONS_END_TIMEOUT_MS`]), or
//! wait without a bound.

use std::time::Duration;

use crate::ledger::postgres::PostgresSettings;

/// Longest the counter waits for the stopped server's sessions to end,
/// in milliseconds.
pub const SESSIONS_END_TIMEOUT_MS: u64 = 10_000;

/// Longest connecting to the database may take, in milliseconds.
const CONNECT_TIMEOUT_MS: u64 = 5_000;

/// Pause between two looks at the sessions, in milliseconds.
const SESSIONS_POLL_MS: u64 = 20;

const COMMITTED: &str =
    "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()";
const OTHER_SESSIONS: &str = "SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()";

/// A connection to the database a run's server uses, reading its count
/// of committed transactions.
pub struct TransactionCounter {
    client: tokio_postgres::Client,
    connection: tokio::task::JoinHandle<()>,
}

impl TransactionCounter {
    /// Connects to the store at `url`.
    pub async fn connect(url: &str) -> Result<Self, String> {
        // The store's own settings (`ledgerwire_batches=…`) are not the
        // driver's.
        let mut config = PostgresSettings::from_url(url)
            .map_err(|error| error.to_string())?
            .database();
        config.connect_timeout(Duration::from_millis(CONNECT_TIMEOUT_MS));
        let (client, connection) = config
            .connect(tokio_postgres::NoTls)
            .await
            .map_err(|error| format!("cannot connect to count transactions: {error}"))?;
        let connection = tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Self { client, connection })
    }

    /// The transactions committed in the database so far.
    pub async fn committed(&self) -> Result<u64, String> {
        let row = self
            .client
            .query_one(COMMITTED, &[])
            .await
            .map_err(|error| format!("cannot read pg_stat_database: {error}"))?;
        Ok(row.get::<_, i64>(0) as u64)
    }

    /// The count once every other session of the database has ended (the
    /// server stopped), so each has reported its transactions.
    pub async fn committed_after_sessions_end(&self) -> Result<u64, String> {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(SESSIONS_END_TIMEOUT_MS);
        loop {
            let others: i64 = self
                .client
                .query_one(OTHER_SESSIONS, &[])
                .await
                .map_err(|error| format!("cannot read pg_stat_activity: {error}"))?
                .get(0);
            if others == 0 {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "{others} sessions of the server were still open {SESSIONS_END_TIMEOUT_MS} ms after it stopped"
                ));
            }
            tokio::time::sleep(Duration::from_millis(SESSIONS_POLL_MS)).await;
        }
        self.committed().await
    }
}

impl Drop for TransactionCounter {
    fn drop(&mut self) {
        self.connection.abort();
    }
}
