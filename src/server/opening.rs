//! The store while `serve` opens it: the server listens at once and the
//! local store opens on a blocking thread (a rebuild of its index from
//! the journal can take minutes on a large store); until it is open every
//! call is refused as unavailable, so `/readyz` answers 503 with its
//! sentence and the doors give their usual retryable answers. Once open,
//! every call goes to the store.
//!
//! Owns: the opening phase, handing calls on once the store is there,
//! and telling the server when it is (or that it failed to open).
//! Must never: acknowledge, read or scan anything before the store is
//! open, or hold the store's own state.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use futures_util::stream::BoxStream;
use tokio::sync::watch;

use crate::ledger::contract::{LogStore, SnapshotStore, StoreCondition, StoreStats};
use crate::ledger::error::{LedgerError, Result};
use crate::ledger::local::LocalError;
use crate::ledger::record::{NewRecord, Record, StreamKey};
use crate::ledger::{AppendOutcome, Durability, ExpectedPosition, Ledger};
use crate::store::{OpenError, Opening, StoreChoice};

/// The task opening the store `serve` already serves (refusing every call
/// until it is done).
pub(super) type OpenTask = tokio::task::JoinHandle<std::result::Result<(), OpenError>>;

/// The ledger `serve` serves: a local store opens on a blocking thread
/// behind an [`OpeningStore`] (the task returned), a database at once.
pub(super) async fn open(
    choice: &StoreChoice,
) -> std::result::Result<(Ledger, Option<OpenTask>), OpenError> {
    if let StoreChoice::Postgres(_) = choice {
        return Ok((choice.open(Opening::Create).await?, None));
    }
    let opening = Arc::new(OpeningStore::new("local"));
    let ledger = Ledger::new(opening.clone());
    let (choice, runtime) = (choice.clone(), tokio::runtime::Handle::current());
    let task = tokio::task::spawn_blocking(move || {
        let ledger = runtime.block_on(choice.open(Opening::Create))?;
        opening.opened(ledger.store().clone());
        Ok(())
    });
    Ok((ledger, Some(task)))
}

/// Waits for the store to open, then calls `ready`; an open that fails
/// leaves its error in `failed` and stops the server through `stop`.
/// Never ends (it holds `stop`, whose drop would stop the server).
pub(super) async fn announce(
    opening: Option<OpenTask>,
    ready: impl FnOnce(),
    stop: tokio::sync::oneshot::Sender<()>,
    failed: Arc<std::sync::Mutex<Option<OpenError>>>,
) {
    let outcome = match opening {
        Some(task) => task
            .await
            .unwrap_or_else(|error| Err(LocalError::Io(std::io::Error::other(error)).into())),
        None => Ok(()),
    };
    let _stop = match outcome {
        Ok(()) => {
            tracing::info!("serving");
            ready();
            Some(stop)
        }
        Err(error) => {
            *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(error);
            let _ = stop.send(());
            None
        }
    };
    std::future::pending::<()>().await
}

/// Why calls are refused while the store opens (the reason `/readyz`
/// and the doors' retryable answers carry).
pub const OPENING_REASON: &str = "it is still opening (an index being rebuilt from the journal, which the log announces, can take minutes)";

/// A call's future as the store contract hands it back.
type Call<'f, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'f>>;

/// A refused call's future.
fn refused<'f, T: Send + 'f>(error: LedgerError) -> Call<'f, T> {
    Box::pin(std::future::ready(Err(error)))
}

/// A store that is opening, then the store itself.
pub struct OpeningStore {
    engine: &'static str,
    store: OnceLock<Arc<dyn LogStore>>,
}

impl OpeningStore {
    /// A store of `engine` that is not open yet.
    pub fn new(engine: &'static str) -> Self {
        Self {
            engine,
            store: OnceLock::new(),
        }
    }

    /// The store is open: every call goes to it from now on.
    pub fn opened(&self, store: Arc<dyn LogStore>) {
        let _ = self.store.set(store);
    }

    fn open(&self) -> Result<&Arc<dyn LogStore>> {
        self.store.get().ok_or_else(|| LedgerError::Unavailable {
            reason: OPENING_REASON.to_owned(),
        })
    }
}

#[async_trait]
impl LogStore for OpeningStore {
    fn engine(&self) -> &'static str {
        self.engine
    }

    fn dense_global_positions(&self) -> bool {
        self.store
            .get()
            .is_none_or(|store| store.dense_global_positions())
    }

    fn shared_by_processes(&self) -> bool {
        self.store
            .get()
            .is_some_and(|store| store.shared_by_processes())
    }

    // The calls every request makes hand back the store's own future
    // (written out as `async_trait` expands them): a wrapper future per
    // call would cost an allocation on every append and read.
    fn append<'s, 'k, 'f>(
        &'s self,
        stream: &'k StreamKey,
        expected: ExpectedPosition,
        records: Vec<NewRecord>,
        durability: Durability,
    ) -> Call<'f, AppendOutcome>
    where
        's: 'f,
        'k: 'f,
    {
        match self.open() {
            Ok(store) => store.append(stream, expected, records, durability),
            Err(error) => refused(error),
        }
    }

    fn append_records<'s, 'k, 'f>(
        &'s self,
        stream: &'k StreamKey,
        expected: ExpectedPosition,
        records: Vec<NewRecord>,
        durability: Durability,
    ) -> Call<'f, (AppendOutcome, Vec<Record>)>
    where
        's: 'f,
        'k: 'f,
    {
        match self.open() {
            Ok(store) => store.append_records(stream, expected, records, durability),
            Err(error) => refused(error),
        }
    }

    fn head<'s, 'k, 'f>(&'s self, stream: &'k StreamKey) -> Call<'f, u64>
    where
        's: 'f,
        'k: 'f,
    {
        match self.open() {
            Ok(store) => store.head(stream),
            Err(error) => refused(error),
        }
    }

    fn read<'s, 'k, 'f>(
        &'s self,
        stream: &'k StreamKey,
        from: u64,
        max_records: usize,
    ) -> Call<'f, Vec<Record>>
    where
        's: 'f,
        'k: 'f,
    {
        match self.open() {
            Ok(store) => store.read(stream, from, max_records),
            Err(error) => refused(error),
        }
    }

    async fn append_copies(
        &self,
        stream: &StreamKey,
        at: u64,
        records: &[Record],
    ) -> Result<AppendOutcome> {
        self.open()?.append_copies(stream, at, records).await
    }

    /// Nothing was acknowledged before the store opened, so there is
    /// nothing to make durable then.
    async fn flush(&self) -> Result<()> {
        match self.store.get() {
            Some(store) => store.flush().await,
            None => Ok(()),
        }
    }

    /// Before the store opens nobody reads, so nobody tails: a receiver
    /// that never changes.
    fn watch(&self, stream: &StreamKey) -> watch::Receiver<u64> {
        match self.store.get() {
            Some(store) => store.watch(stream),
            None => watch::channel(0).1,
        }
    }

    fn scan_global(&self, from: u64) -> BoxStream<'static, Result<Record>> {
        match self.open() {
            Ok(store) => store.scan_global(from),
            Err(error) => Box::pin(futures_util::stream::once(async { Err(error) })),
        }
    }

    async fn streams(&self, after: Option<&StreamKey>, max: usize) -> Result<Vec<StreamKey>> {
        self.open()?.streams(after, max).await
    }

    fn snapshots(&self) -> &dyn SnapshotStore {
        self
    }

    fn condition(&self) -> StoreCondition {
        match self.store.get() {
            Some(store) => store.condition(),
            None => StoreCondition {
                unavailable: Some(OPENING_REASON.to_owned()),
                ..StoreCondition::default()
            },
        }
    }

    fn stats(&self) -> StoreStats {
        self.store
            .get()
            .map(|store| store.stats())
            .unwrap_or_default()
    }
}

#[async_trait]
impl SnapshotStore for OpeningStore {
    async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.open()?.snapshots().get(key).await
    }

    async fn put(&self, key: &[u8], value: Vec<u8>) -> Result<()> {
        self.open()?.snapshots().put(key, value).await
    }

    async fn clear(&self) -> Result<()> {
        self.open()?.snapshots().clear().await
    }
}
