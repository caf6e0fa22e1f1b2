//! The handle the doors and tools hold: one open store behind
//! [`Ledger`], with reads paged, tails woken by the store's heads, and
//! every append counted.
//!
//! Owns: [`Ledger`], the page sizes its reads and listings ask a store
//! for, and the append metrics. Must never: hold a whole stream in memory
//! (reads go a page at a time), poll for new records (a tail waits on the
//! store's watch), or name a store engine: it speaks only [`LogStore`].

use std::sync::Arc;

use futures_util::stream::BoxStream;
use futures_util::{Stream, StreamExt, TryStreamExt};

use crate::append::{AppendOutcome, Durability, ExpectedPosition};
use crate::contract::{LogStore, SnapshotStore, StoreCondition, StoreStats};
use crate::error::{LedgerError, Result};
use crate::fold::{self, Fold, Folded};
use crate::record::{NewRecord, Record, StreamKey};
use crate::verify::{self, VerifyReport};

/// Records one read of a stream asks its store for at a time: a fold or a
/// tail of a long stream holds one page, never the whole stream.
pub const READ_PAGE_RECORDS: usize = 256;

/// Stream keys one listing asks its store for at a time.
pub const LIST_PAGE_STREAMS: usize = 256;

/// A handle to an open store. Cheap to clone; the store closes when the
/// last clone is dropped.
#[derive(Clone)]
pub struct Ledger {
    store: Arc<dyn LogStore>,
}

impl Ledger {
    pub fn new(store: Arc<dyn LogStore>) -> Self {
        Self { store }
    }

    /// The store behind the handle.
    pub fn store(&self) -> &Arc<dyn LogStore> {
        &self.store
    }

    /// The engine's name: `local`, `postgres`, `memory`.
    pub fn engine(&self) -> &'static str {
        self.store.engine()
    }

    /// Appends `records` to `stream` atomically if the stream is at
    /// `expected`; fails with [`LedgerError::Conflict`] otherwise.
    pub async fn append(
        &self,
        stream: &StreamKey,
        expected: ExpectedPosition,
        records: Vec<NewRecord>,
        durability: Durability,
    ) -> Result<AppendOutcome> {
        let started = std::time::Instant::now();
        let result = self
            .store
            .append(stream, expected, records, durability)
            .await;
        count_append(durability, result.as_ref().map(drop), started);
        result
    }

    /// [`Ledger::append`], with the records appended as a read of them
    /// would hand them out (for folds of this process's own appends).
    pub async fn append_records(
        &self,
        stream: &StreamKey,
        expected: ExpectedPosition,
        records: Vec<NewRecord>,
        durability: Durability,
    ) -> Result<(AppendOutcome, Vec<Record>)> {
        let started = std::time::Instant::now();
        let result = self
            .store
            .append_records(stream, expected, records, durability)
            .await;
        count_append(durability, result.as_ref().map(drop), started);
        result
    }

    /// The stream's head as this process knows it, sent whenever it grows
    /// (at once for this process's appends; see [`LogStore::watch`]).
    pub fn watch(&self, stream: &StreamKey) -> tokio::sync::watch::Receiver<u64> {
        self.store.watch(stream)
    }

    /// Resolves once every append acknowledged before the call is durable.
    pub async fn flush(&self) -> Result<()> {
        self.store.flush().await
    }

    /// The stream's next position: the number of records it holds.
    pub async fn head(&self, stream: &StreamKey) -> Result<u64> {
        self.store.head(stream).await
    }

    /// Up to `max_records` records of `stream` from `from`.
    pub async fn read_page(
        &self,
        stream: &StreamKey,
        from: u64,
        max_records: usize,
    ) -> Result<Vec<Record>> {
        self.store.read(stream, from, max_records).await
    }

    /// Every record of `stream` from `from` to its end. For bounded
    /// streams (a conversation, a lane); a long one is read with
    /// [`Ledger::read`] a page at a time.
    pub async fn read_to_end(&self, stream: &StreamKey, from: u64) -> Result<Vec<Record>> {
        self.read(stream, from).try_collect().await
    }

    /// `stream` from `from` to the end it has when the last page is read,
    /// a page at a time.
    pub fn read(
        &self,
        stream: &StreamKey,
        from: u64,
    ) -> impl Stream<Item = Result<Record>> + Send + use<> {
        let ledger = self.clone();
        let stream = stream.clone();
        async_stream::try_stream! {
            let mut next = from;
            loop {
                let page = ledger.read_page(&stream, next, READ_PAGE_RECORDS).await?;
                let full = page.len() == READ_PAGE_RECORDS;
                for record in page {
                    next = record.position() + 1;
                    yield record;
                }
                if !full {
                    break;
                }
            }
        }
    }

    /// Reads `stream` from `from` and then waits for and yields every
    /// record appended later, without polling. Ends only on an error.
    pub fn tail(
        &self,
        stream: &StreamKey,
        from: u64,
    ) -> impl Stream<Item = Result<Record>> + Send + use<> {
        let ledger = self.clone();
        let stream = stream.clone();
        async_stream::try_stream! {
            // Subscribe before reading: an append after this line sends
            // a head, one before it is visible to the read.
            let mut heads = ledger.store.watch(&stream);
            let mut next = from;
            loop {
                let page = ledger.read_page(&stream, next, READ_PAGE_RECORDS).await?;
                let progressed = !page.is_empty();
                for record in page {
                    next = record.position() + 1;
                    yield record;
                }
                if !progressed {
                    // The guard `wait_for` returns must be gone before the
                    // stream yields (an await point), hence the bool.
                    let woke = heads.wait_for(|&head| head > next).await.is_ok();
                    if !woke {
                        Err(LedgerError::Closed)?;
                    }
                }
            }
        }
    }

    /// Every record from global position `from`, in global order, up to
    /// the horizon fixed when the scan starts.
    pub fn scan_global(&self, from: u64) -> BoxStream<'static, Result<Record>> {
        self.store.scan_global(from)
    }

    /// Every stream key, in key order, a page at a time.
    pub fn streams(&self) -> impl Stream<Item = Result<StreamKey>> + Send + use<> {
        let ledger = self.clone();
        async_stream::try_stream! {
            let mut after: Option<StreamKey> = None;
            loop {
                let page = ledger
                    .store
                    .streams(after.as_ref(), LIST_PAGE_STREAMS)
                    .await?;
                let full = page.len() == LIST_PAGE_STREAMS;
                for stream in page {
                    after = Some(stream.clone());
                    yield stream;
                }
                if !full {
                    break;
                }
            }
        }
    }

    /// Where folds keep their snapshots.
    pub fn snapshots(&self) -> &dyn SnapshotStore {
        self.store.snapshots()
    }

    /// Deletes every fold snapshot. Allowed at any time: snapshots are
    /// derivable, so no result changes; folds just start from further back.
    pub async fn drop_snapshots(&self) -> Result<()> {
        self.store.snapshots().clear().await
    }

    /// Whether the store serves, and what it refuses.
    pub fn condition(&self) -> StoreCondition {
        self.store.condition()
    }

    /// Counters since the store was opened.
    pub fn stats(&self) -> StoreStats {
        self.store.stats()
    }

    /// Folds `stream` from its first record, ignoring caches and snapshots.
    pub async fn fold<F: Fold>(&self, stream: &StreamKey) -> Result<Folded<F::State>> {
        let mut folded = Folded::default();
        let mut records = std::pin::pin!(self.read(stream, 0));
        while let Some(record) = records.next().await {
            fold::apply_one::<F>(&mut folded, stream, &record?)?;
        }
        Ok(folded)
    }

    /// Checks every record below the horizon the scan fixes when it
    /// starts: checksums, each stream's positions and global order.
    pub async fn verify(&self) -> Result<VerifyReport> {
        verify::check_global_order(self.scan_global(0), self.store.dense_global_positions()).await
    }
}

/// Counts an append and, if it was acknowledged, how long that took.
fn count_append(
    durability: Durability,
    result: std::result::Result<(), &LedgerError>,
    started: std::time::Instant,
) {
    static METRICS: ledgerwire_foundations::telemetry::Kept<AppendMetrics> =
        ledgerwire_foundations::telemetry::Kept::new();
    let durability = match durability {
        Durability::Durable => 0,
        Durability::Buffered => 1,
    };
    let outcome = match result {
        Ok(_) => 0,
        Err(LedgerError::Conflict { .. }) => 1,
        Err(_) => 2,
    };
    METRICS.with(AppendMetrics::register, |metrics| {
        metrics.appends[durability][outcome].increment(1);
        if result.is_ok() {
            metrics.seconds[durability].record(started.elapsed().as_secs_f64());
        }
    });
}

/// The handles of the append metrics, by durability (durable, buffered)
/// and outcome (ok, conflict, error). Registering them on every append
/// cost about 2% of a server's CPU.
struct AppendMetrics {
    appends: [[metrics::Counter; 3]; 2],
    seconds: [metrics::Histogram; 2],
}

impl AppendMetrics {
    fn register() -> Self {
        use ledgerwire_foundations::telemetry::{LEDGER_APPEND_SECONDS, LEDGER_APPENDS};
        let appends = |durability: &'static str| {
            ["ok", "conflict", "error"].map(|outcome| {
                metrics::counter!(LEDGER_APPENDS, "durability" => durability, "outcome" => outcome)
            })
        };
        let seconds = |durability: &'static str| metrics::histogram!(LEDGER_APPEND_SECONDS, "durability" => durability);
        Self {
            appends: [appends("durable"), appends("buffered")],
            seconds: [seconds("durable"), seconds("buffered")],
        }
    }
}
