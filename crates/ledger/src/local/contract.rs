//! The local store behind the log contract: a call answered from the recent
//! records when they cover it, else on the read threads (a global scan on a
//! blocking thread of its own).
//!
//! Owns: the contract onto [`LocalStore`], its snapshots tree as a
//! [`SnapshotStore`], its counters. Must never: read sled or a file on the
//! calling task (a runtime's worker).

use async_trait::async_trait;
use futures_util::stream::BoxStream;
use tokio::sync::watch;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{LocalStore, Result as LocalResult, Shared, lock, scan};
use crate::contract::{LogStore, SnapshotStore, StoreCondition, StoreStats};
use crate::error::{LedgerError, Result};
use crate::record::{NewRecord, Record, StreamKey};
use crate::{AppendOutcome, Durability, ExpectedPosition};

/// Records a global-order scan keeps ahead, per stream and in the channel.
pub const SCAN_PAGE_RECORDS: usize = 16;

/// Runs `work` on the store's read threads and returns its result.
async fn on_read_thread<T: Send + 'static>(
    shared: &Shared,
    work: impl FnOnce() -> LocalResult<T> + Send + 'static,
) -> Result<T> {
    shared
        .stats
        .read_thread_jobs
        .fetch_add(1, Ordering::Relaxed);
    shared
        .read_threads
        .run(move || work().map_err(LedgerError::from))
        .await
}

#[async_trait]
impl LogStore for LocalStore {
    fn engine(&self) -> &'static str {
        "local"
    }

    async fn append(
        &self,
        stream: &StreamKey,
        expected: ExpectedPosition,
        records: Vec<NewRecord>,
        durability: Durability,
    ) -> Result<AppendOutcome> {
        let command = Self::append_command(stream, expected, records, durability, None)?;
        Ok(self.call(command).await?)
    }

    /// One buffered append per run of equal timestamps, kept.
    async fn append_copies(
        &self,
        stream: &StreamKey,
        mut at: u64,
        records: &[Record],
    ) -> Result<AppendOutcome> {
        let mut outcome = None;
        for run in records.chunk_by(|a, b| a.timestamp_ms() == b.timestamp_ms()) {
            let copies = run
                .iter()
                .map(|record| NewRecord {
                    kind: record.kind(),
                    payload: record.payload().to_vec(),
                })
                .collect();
            let (expected, timestamp_ms) =
                (ExpectedPosition::Exactly(at), Some(run[0].timestamp_ms()));
            let buffered = Durability::Buffered;
            let command = Self::append_command(stream, expected, copies, buffered, timestamp_ms)?;
            let appended = self.call(command).await?;
            at = appended.next_position;
            outcome.get_or_insert(appended).next_position = at;
        }
        let max = crate::MAX_RECORDS_PER_APPEND;
        outcome.ok_or(LedgerError::BatchSize { len: 0, max })
    }

    async fn flush(&self) -> Result<()> {
        Ok(self.call(super::writer::Command::Flush).await?)
    }

    async fn head(&self, stream: &StreamKey) -> Result<u64> {
        self.shared.check_not_corrupt(stream)?;
        if let Some(head) = self.shared.recent.head(stream) {
            return Ok(head);
        }
        let store = self.clone();
        let stream = stream.clone();
        on_read_thread(&self.shared, move || store.head_blocking(&stream)).await
    }

    async fn read(&self, stream: &StreamKey, from: u64, max_records: usize) -> Result<Vec<Record>> {
        self.shared.check_not_corrupt(stream)?;
        if let Some(records) = self.shared.recent.read(stream, from, max_records) {
            return Ok(records);
        }
        let store = self.clone();
        let stream = stream.clone();
        on_read_thread(&self.shared, move || {
            store
                .read_blocking(&stream, from)?
                .take(max_records)
                .collect::<LocalResult<Vec<_>>>()
        })
        .await
    }

    fn watch(&self, stream: &StreamKey) -> watch::Receiver<u64> {
        let mut watchers = lock(&self.shared.watchers);
        watchers.prune_if_due();
        let sender = watchers.senders.entry(stream.clone());
        sender.or_insert_with(|| watch::channel(0).0).subscribe()
    }

    fn scan_global(&self, from: u64) -> BoxStream<'static, Result<Record>> {
        let (sender, mut receiver) = tokio::sync::mpsc::channel(SCAN_PAGE_RECORDS);
        let store = self.clone();
        tokio::task::spawn_blocking(move || {
            for record in scan::global_order(&store, from) {
                let record = record.map_err(LedgerError::from);
                let failed = record.is_err();
                if sender.blocking_send(record).is_err() || failed {
                    return;
                }
            }
        });
        Box::pin(async_stream::stream! {
            while let Some(record) = receiver.recv().await {
                yield record;
            }
        })
    }

    async fn streams(&self, after: Option<&StreamKey>, max: usize) -> Result<Vec<StreamKey>> {
        let store = self.clone();
        let after = after.cloned();
        on_read_thread(&self.shared, move || {
            store
                .streams_blocking(after.as_ref())
                .take(max)
                .collect::<LocalResult<Vec<_>>>()
        })
        .await
    }

    fn snapshots(&self) -> &dyn SnapshotStore {
        &self.snapshots
    }

    fn condition(&self) -> StoreCondition {
        let report = self.scrub_report();
        let damage_elsewhere = report
            .iter()
            .flat_map(|report| &report.problems)
            .filter(|problem| problem.stream.is_none())
            .map(|problem| problem.problem.clone())
            .collect();
        StoreCondition {
            poisoned: self.poisoned(),
            unavailable: None,
            damaged: self.corrupt_streams(),
            damage_elsewhere,
            scanning: report.is_none(),
        }
    }

    fn stats(&self) -> StoreStats {
        let shared = &self.shared;
        let journaled = shared.journaled_next_global.load(Ordering::Acquire);
        let unindexed = journaled.saturating_sub(shared.applied_next_global());
        shared.stats.report(unindexed)
    }
}

/// The `snapshots` tree of the store's sled database.
#[derive(Clone)]
pub(crate) struct LocalSnapshots {
    pub(crate) shared: Arc<Shared>,
}

#[async_trait]
impl SnapshotStore for LocalSnapshots {
    async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let tree = self.shared.snapshots.clone();
        let key = key.to_vec();
        on_read_thread(&self.shared, move || {
            Ok(tree.get(key)?.map(|value| value.to_vec()))
        })
        .await
    }

    async fn put(&self, key: &[u8], value: Vec<u8>) -> Result<()> {
        // Not flushed: derivable, and sled persists writes in order.
        let tree = self.shared.snapshots.clone();
        let key = key.to_vec();
        on_read_thread(&self.shared, move || {
            tree.insert(key, value)?;
            Ok(())
        })
        .await
    }

    async fn clear(&self) -> Result<()> {
        let tree = self.shared.snapshots.clone();
        on_read_thread(&self.shared, move || Ok(tree.clear()?)).await
    }
}
