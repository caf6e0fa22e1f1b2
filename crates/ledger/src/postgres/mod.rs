//! The PostgreSQL store: the log contract kept by one database that
//! several `serve` instances share. Chosen with `serve --store
//! postgres://…` (or `DATABASE_URL`); the local store stays the default.
//!
//! Owns: the mapping of the contract onto its parts, one concept a file:
//! `settings` (URL, pools, session settings), `schema` (tables and their
//! version), `append` (appends and flushes), `read` (a stream, the
//! stream list, the check of a stored record), `scan` (the global order),
//! `notify` (tails across instances), `snapshots`, `error`.
//! `log-format/LOG-FORMAT.md` ("The PostgreSQL store") documents the
//! tables, what durable and buffered mean here and the global order.
//! Must never: hand out a record whose checksum or placement does not
//! check, acknowledge a durable append before PostgreSQL committed it
//! with `synchronous_commit = on`, let two appends extend one position,
//! or hold a lock or a transaction across a network wait.

mod append;
mod batch;
pub mod error;
mod notify;
mod read;
mod scan;
pub mod schema;
pub mod settings;
mod snapshots;

pub use append::{GLOBAL_OFFSET_BITS, MAX_ANY_ATTEMPTS};
pub use batch::{DEFAULT_BATCHES_IN_FLIGHT, MAX_BATCH_BYTES};
pub use error::PostgresError;
pub use notify::{
    CATCH_UP_INTERVAL_MS, LISTENER_APPLICATION_NAME, NOTIFY_BATCH_WINDOW_MS, NOTIFY_CHANNEL,
};
pub use scan::{SCAN_HORIZON_WAIT_MS, SCAN_PAGE_RECORDS};
pub use schema::SCHEMA_VERSION;
pub use settings::{PostgresSettings, is_postgres_url};

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use futures_util::stream::BoxStream;
use tokio::sync::watch;
use tokio_postgres::NoTls;

use crate::contract::{LogStore, SnapshotStore, StoreCondition, StoreStats};
use crate::error::{Corruption, LedgerError, Result};
use crate::record::{NewRecord, Record, StreamKey};
use crate::{AppendOutcome, Durability, ExpectedPosition, Ledger};
use error::Availability;
use notify::Heads;
use snapshots::PostgresSnapshots;

/// What the store's parts and background tasks share.
pub(super) struct Shared {
    /// Sessions with `synchronous_commit = on`: durable appends, flushes.
    durable: Pool,
    /// Sessions with `synchronous_commit = off`: buffered appends, reads.
    buffered: Pool,
    availability: Arc<Availability>,
    heads: Arc<Heads>,
    counters: Arc<Counters>,
    /// Appends waiting for their batch, and the batches running.
    batcher: batch::Batcher,
    /// Streams a read found damaged, with the first bad position: refused
    /// from then on, as the local store refuses them.
    damaged: Mutex<BTreeMap<String, (u64, Corruption)>>,
}

impl Shared {
    /// Records damage found at `stream` `position` and words it.
    fn damaged(&self, stream: &str, position: u64, corruption: Corruption) -> LedgerError {
        tracing::error!(stream, position, %corruption, "a stored record fails its checks");
        let mut damaged = self.damaged.lock().unwrap_or_else(|p| p.into_inner());
        let (position, corruption) = damaged
            .entry(stream.to_owned())
            .or_insert((position, corruption))
            .clone();
        LedgerError::Corrupt {
            stream: stream.to_owned(),
            position,
            corruption,
        }
    }

    fn check_not_damaged(&self, stream: &StreamKey) -> Result<()> {
        let damaged = self.damaged.lock().unwrap_or_else(|p| p.into_inner());
        match damaged.get(stream.as_str()) {
            Some((position, corruption)) => Err(LedgerError::Corrupt {
                stream: stream.to_string(),
                position: *position,
                corruption: corruption.clone(),
            }),
            None => Ok(()),
        }
    }
}

/// The store's counters since it opened.
#[derive(Default)]
pub(super) struct Counters {
    records_appended: AtomicU64,
    durable_appends: AtomicU64,
    durable_micros: AtomicU64,
    buffered_appends: AtomicU64,
    flushes: AtomicU64,
    conflicts: AtomicU64,
    /// Transactions of appends (batches, each of one or more appends), and
    /// those of them that were durable.
    batches: AtomicU64,
    durable_batches: AtomicU64,
    notifications_sent: AtomicU64,
    notifications_received: AtomicU64,
    catch_up_reads: AtomicU64,
    listener_connects: AtomicU64,
}

impl Counters {
    fn bump(&self, counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn appended(&self, durability: Durability, records: u64, took: Duration) {
        self.records_appended.fetch_add(records, Ordering::Relaxed);
        match durability {
            Durability::Durable => {
                self.bump(&self.durable_appends);
                self.durable_micros
                    .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
            }
            Durability::Buffered => self.bump(&self.buffered_appends),
        }
    }

    fn batched(&self, durability: Durability, _appends: usize) {
        self.bump(&self.batches);
        if durability == Durability::Durable {
            self.bump(&self.durable_batches);
        }
    }

    fn flushed(&self, took: Duration) {
        self.bump(&self.flushes);
        self.durable_micros
            .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
    }
}

/// Aborts a background task when the store goes.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The store. Its pools, LISTEN connection and notifier close with it.
pub struct PostgresStore {
    shared: Arc<Shared>,
    snapshots: PostgresSnapshots,
    description: String,
    _tasks: [AbortOnDrop; 2],
}

/// A bounded pool of sessions committing as `synchronous_commit` says.
fn pool(
    settings: &PostgresSettings,
    synchronous_commit: bool,
    size: usize,
) -> Result<Pool, PostgresError> {
    use settings::{CONNECT_TIMEOUT_MS, POOL_WAIT_TIMEOUT_MS};
    let manager = Manager::from_config(
        settings.session(synchronous_commit),
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(size)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(Duration::from_millis(POOL_WAIT_TIMEOUT_MS)))
        .create_timeout(Some(Duration::from_millis(CONNECT_TIMEOUT_MS)))
        .recycle_timeout(Some(Duration::from_millis(CONNECT_TIMEOUT_MS)))
        .build()
        .map_err(|error| PostgresError::Connection(error.to_string()))
}

impl PostgresStore {
    /// Connects, creates the tables in an empty database (or checks their
    /// version), and starts the LISTEN connection and the notifier.
    pub async fn open(settings: &PostgresSettings) -> Result<Self, PostgresError> {
        let durable = pool(settings, true, settings.durable_connections)?;
        let buffered = pool(settings, false, settings.buffered_connections)?;
        let mut client = durable.get().await?;
        schema::prepare(&mut client).await?;
        drop(client);
        let shared = Arc::new(Shared {
            durable,
            buffered: buffered.clone(),
            availability: Arc::default(),
            heads: Arc::default(),
            counters: Arc::default(),
            batcher: batch::Batcher::new(settings.batches_in_flight),
            damaged: Mutex::default(),
        });
        let listener = tokio::spawn(notify::listen(
            settings.session(false),
            shared.heads.clone(),
            shared.availability.clone(),
            shared.counters.clone(),
        ));
        let notifier = tokio::spawn(notify::send_batches(
            shared.heads.clone(),
            buffered.clone(),
            shared.counters.clone(),
        ));
        Ok(Self {
            shared,
            snapshots: PostgresSnapshots { pool: buffered },
            description: settings.describe(),
            _tasks: [AbortOnDrop(listener), AbortOnDrop(notifier)],
        })
    }

    /// [`PostgresStore::open`] as a [`Ledger`].
    pub async fn open_ledger(settings: &PostgresSettings) -> Result<Ledger, PostgresError> {
        Ok(Ledger::new(Arc::new(Self::open(settings).await?)))
    }

    /// The database, for logs (never a password).
    pub fn description(&self) -> &str {
        &self.description
    }
}

#[async_trait]
impl LogStore for PostgresStore {
    fn engine(&self) -> &'static str {
        "postgres"
    }

    fn dense_global_positions(&self) -> bool {
        false
    }

    fn shared_by_processes(&self) -> bool {
        true
    }

    async fn append(
        &self,
        stream: &StreamKey,
        expected: ExpectedPosition,
        records: Vec<NewRecord>,
        durability: Durability,
    ) -> Result<AppendOutcome> {
        let (outcome, _) =
            append::append(&self.shared, stream, expected, records, durability).await?;
        Ok(outcome)
    }

    async fn append_records(
        &self,
        stream: &StreamKey,
        expected: ExpectedPosition,
        records: Vec<NewRecord>,
        durability: Durability,
    ) -> Result<(AppendOutcome, Vec<Record>)> {
        let (outcome, envelopes) =
            append::append(&self.shared, stream, expected, records, durability).await?;
        // The records as a read would hand them out: checked as stored,
        // then given their global positions (consecutive in an append).
        let appended = envelopes
            .into_iter()
            .zip(outcome.first_position..)
            .zip(outcome.first_global_position..)
            .map(|((envelope, position), global)| {
                read::stored_record(stream.as_str(), position, global as i64, envelope).map_err(
                    |corruption| self.shared.damaged(stream.as_str(), position, corruption),
                )
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((outcome, appended))
    }

    async fn append_copies(
        &self,
        stream: &StreamKey,
        at: u64,
        records: &[Record],
    ) -> Result<AppendOutcome> {
        append::append_copies(&self.shared, stream, at, records).await
    }

    async fn flush(&self) -> Result<()> {
        append::flush(&self.shared).await
    }

    async fn head(&self, stream: &StreamKey) -> Result<u64> {
        self.shared.check_not_damaged(stream)?;
        read::head(&self.shared, stream).await
    }

    async fn read(&self, stream: &StreamKey, from: u64, max_records: usize) -> Result<Vec<Record>> {
        read::read(&self.shared, stream, from, max_records).await
    }

    fn watch(&self, stream: &StreamKey) -> watch::Receiver<u64> {
        self.shared.heads.watch(stream)
    }

    fn scan_global(&self, from: u64) -> BoxStream<'static, Result<Record>> {
        scan::scan_global(self.shared.clone(), from)
    }

    async fn streams(&self, after: Option<&StreamKey>, max: usize) -> Result<Vec<StreamKey>> {
        read::streams(&self.shared, after, max).await
    }

    fn snapshots(&self) -> &dyn SnapshotStore {
        &self.snapshots
    }

    fn condition(&self) -> StoreCondition {
        let damaged = self
            .shared
            .damaged
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(stream, (position, _))| (stream.clone(), *position))
            .collect();
        StoreCondition {
            poisoned: None,
            unavailable: self.shared.availability.reason(),
            damaged,
            damage_elsewhere: Vec::new(),
            scanning: false,
        }
    }

    fn stats(&self) -> StoreStats {
        let counters = &self.shared.counters;
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let commits = load(&counters.durable_batches) + load(&counters.flushes);
        let acknowledged = load(&counters.durable_appends) + load(&counters.flushes);
        let engine = [
            ("buffered_appends", &counters.buffered_appends),
            ("durable_appends", &counters.durable_appends),
            ("flushes", &counters.flushes),
            ("conflicts", &counters.conflicts),
            ("batches", &counters.batches),
            ("durable_batches", &counters.durable_batches),
            ("notifications_sent", &counters.notifications_sent),
            ("notifications_received", &counters.notifications_received),
            ("catch_up_reads", &counters.catch_up_reads),
            ("listener_connects", &counters.listener_connects),
        ]
        .into_iter()
        .map(|(name, counter)| (name.to_owned(), load(counter)))
        .collect();
        StoreStats {
            records_appended: load(&counters.records_appended),
            syncs: commits,
            synced_appends: acknowledged,
            sync_micros: load(&counters.durable_micros),
            engine,
        }
    }
}
