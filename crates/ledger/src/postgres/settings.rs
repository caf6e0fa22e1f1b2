//! How the PostgreSQL store connects: the URL an operator gives, the
//! bounds of its pools, and the session settings every connection
//! carries (its commit mode and its timeouts).
//!
//! Owns: the named limits below and the driver's configuration built
//! from them. Must never: open a connection without a timeout, or let a
//! pool grow without a bound.

use std::str::FromStr;
use std::time::Duration;

use super::error::PostgresError;

/// Most connections of the pool durable appends and flushes use. Each
/// durable commit waits for its WAL flush on its own connection, so
/// concurrent durable appends share PostgreSQL's group commit only as
/// far as they have connections to wait on.
pub const DEFAULT_DURABLE_CONNECTIONS: usize = 32;

/// Most connections of the pool buffered appends, reads and snapshots use.
pub const DEFAULT_BUFFERED_CONNECTIONS: usize = 16;

/// Most connections either pool may be given (`?ledgerwire_durable=`).
pub const MAX_POOL_CONNECTIONS: usize = 256;

/// Longest a statement waits for a row lock (a head row another append
/// holds) before it fails as retryable.
pub const LOCK_TIMEOUT_MS: u64 = 2_000;

/// Longest one statement may run.
pub const STATEMENT_TIMEOUT_MS: u64 = 15_000;

/// Longest a session may sit in an open transaction doing nothing (the
/// store opens none across a network wait; this bounds anyone else's).
pub const IDLE_IN_TRANSACTION_SESSION_TIMEOUT_MS: u64 = 15_000;

/// Longest a connection attempt may take.
pub const CONNECT_TIMEOUT_MS: u64 = 5_000;

/// Longest a caller waits for a free connection of a full pool.
pub const POOL_WAIT_TIMEOUT_MS: u64 = 5_000;

/// Idle time after which TCP keepalives probe a connection, so a
/// database that vanished without closing its sockets is noticed.
pub const KEEPALIVE_IDLE_MS: u64 = 10_000;

/// Unacknowledged-data time after which the kernel gives a connection up.
pub const TCP_USER_TIMEOUT_MS: u64 = 20_000;

/// Whether `location` names a PostgreSQL database rather than a directory.
pub fn is_postgres_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// What the store is opened with.
#[derive(Clone)]
pub struct PostgresSettings {
    pub(super) config: tokio_postgres::Config,
    pub durable_connections: usize,
    pub buffered_connections: usize,
    /// Batches of appends run at once (`super::batch`).
    pub batches_in_flight: usize,
}

impl std::fmt::Debug for PostgresSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password.
        f.debug_struct("PostgresSettings")
            .field("database", &self.describe())
            .field("durable_connections", &self.durable_connections)
            .field("buffered_connections", &self.buffered_connections)
            .field("batches_in_flight", &self.batches_in_flight)
            .finish()
    }
}

impl PostgresSettings {
    /// Parses a `postgres://` URL (libpq's form, `?host=/dir` for a
    /// socket directory). `ledgerwire_durable` and `ledgerwire_buffered`
    /// in the query set the pools' sizes, `ledgerwire_batches` the
    /// batches of appends in flight; the driver ignores nothing else, so
    /// they are taken out before it parses.
    pub fn from_url(url: &str) -> Result<Self, PostgresError> {
        let (url, [durable, buffered, batches]) = take_pool_sizes(url)?;
        let config = tokio_postgres::Config::from_str(&url)
            .map_err(|error| PostgresError::Url(error.to_string()))?;
        Ok(Self {
            config,
            durable_connections: durable.unwrap_or(DEFAULT_DURABLE_CONNECTIONS),
            buffered_connections: buffered.unwrap_or(DEFAULT_BUFFERED_CONNECTIONS),
            batches_in_flight: batches.unwrap_or(super::batch::DEFAULT_BATCHES_IN_FLIGHT),
        })
    }

    /// The database, host and user, for logs (never a password).
    pub fn describe(&self) -> String {
        let host = match self.config.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(name)) => name.clone(),
            #[cfg(unix)]
            Some(tokio_postgres::config::Host::Unix(path)) => path.display().to_string(),
            None => "localhost".to_owned(),
        };
        let port = self.config.get_ports().first().copied().unwrap_or(5432);
        format!(
            "postgres://{}@{host}:{port}/{}",
            self.config.get_user().unwrap_or(""),
            self.config.get_dbname().unwrap_or("")
        )
    }

    /// The driver's configuration for a plain connection to the database
    /// (the URL without the store's own settings), for tools.
    pub fn database(&self) -> tokio_postgres::Config {
        self.config.clone()
    }

    /// The driver's configuration for one of the store's connections:
    /// `synchronous_commit` as given, the timeouts above, keepalives.
    pub(super) fn session(&self, synchronous_commit: bool) -> tokio_postgres::Config {
        let mut config = self.config.clone();
        let mut options = config.get_options().unwrap_or_default().to_owned();
        let commit = if synchronous_commit { "on" } else { "off" };
        for setting in [
            format!("synchronous_commit={commit}"),
            format!("lock_timeout={LOCK_TIMEOUT_MS}"),
            format!("statement_timeout={STATEMENT_TIMEOUT_MS}"),
            format!("idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_SESSION_TIMEOUT_MS}"),
        ] {
            options.push_str(" -c ");
            options.push_str(&setting);
        }
        config
            .options(options.trim_start())
            .application_name("ledgerwire")
            .connect_timeout(Duration::from_millis(CONNECT_TIMEOUT_MS))
            .keepalives(true)
            .keepalives_idle(Duration::from_millis(KEEPALIVE_IDLE_MS));
        #[cfg(target_os = "linux")]
        config.tcp_user_timeout(Duration::from_millis(TCP_USER_TIMEOUT_MS));
        config
    }
}

/// Takes `ledgerwire_durable=N`, `ledgerwire_buffered=N` and
/// `ledgerwire_batches=N` out of the URL's query.
fn take_pool_sizes(url: &str) -> Result<(String, [Option<usize>; 3]), PostgresError> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), [None; 3]));
    };
    let mut sizes = [None; 3];
    let mut kept = Vec::new();
    for pair in query.split('&') {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let (slot, what) = match name {
            "ledgerwire_durable" => (&mut sizes[0], "connections"),
            "ledgerwire_buffered" => (&mut sizes[1], "connections"),
            "ledgerwire_batches" => (&mut sizes[2], "batches"),
            _ => {
                kept.push(pair);
                continue;
            }
        };
        let size = value
            .parse::<usize>()
            .ok()
            .filter(|size| (1..=MAX_POOL_CONNECTIONS).contains(size))
            .ok_or_else(|| {
                PostgresError::Url(format!(
                    "{name} must be 1 to {MAX_POOL_CONNECTIONS} {what}, not {value:?}"
                ))
            })?;
        *slot = Some(size);
    }
    let url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((url, sizes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_sizes_come_out_of_the_query_and_the_rest_stays() {
        let settings = PostgresSettings::from_url(
            "postgres://me:secret@127.0.0.1:5433/db?ledgerwire_durable=64&host=/tmp/s&ledgerwire_buffered=4&ledgerwire_batches=3",
        )
        .unwrap();
        assert_eq!(
            (
                settings.durable_connections,
                settings.buffered_connections,
                settings.batches_in_flight
            ),
            (64, 4, 3)
        );
        assert!(!format!("{settings:?}").contains("secret"));
        let session = settings.session(false);
        let options = session.get_options().unwrap();
        assert!(options.contains("synchronous_commit=off"), "{options}");
        assert!(options.contains("lock_timeout=2000"), "{options}");
        assert!(PostgresSettings::from_url("postgres://h/db?ledgerwire_durable=0").is_err());
        assert!(is_postgres_url("postgresql://h/db") && !is_postgres_url("./data"));
    }
}
