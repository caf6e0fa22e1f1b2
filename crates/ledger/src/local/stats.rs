//! The write path's counters: what the writer and the indexer count as
//! they go, reported in the contract's neutral shape.
//!
//! Owns: the counters and their meaning. Must never: hold state anything
//! decides on (they are for reports: the bench, `/healthz`, the audit).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::ledger::contract::StoreStats;

/// Write-path counters.
#[derive(Default)]
pub(crate) struct Counters {
    /// Writer rounds: each is one journal entry.
    pub rounds: AtomicU64,
    pub records: AtomicU64,
    /// Group commits (one `fdatasync` of the journal each), the durable
    /// appends and flushes they acknowledged, and their time in µs.
    pub flushes: AtomicU64,
    pub flushed_waiters: AtomicU64,
    pub sync_micros: AtomicU64,
    /// Batches of rounds the indexer applied, the journal syncs it made
    /// itself (for rounds no commit synced) and its sled inserts.
    pub index_batches: AtomicU64,
    pub index_syncs: AtomicU64,
    pub index_entries: AtomicU64,
    /// Calls of the contract answered on a read thread: each costs two
    /// thread hand-offs, which the recent records spare the rest.
    pub read_thread_jobs: AtomicU64,
}

impl Counters {
    /// The counters now; `unindexed`: records journaled the indexer has
    /// not applied yet (its backlog, read from the recent records).
    pub fn report(&self, unindexed: u64) -> StoreStats {
        let count = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let engine = [
            ("read_thread_jobs", count(&self.read_thread_jobs)),
            ("rounds", count(&self.rounds)),
            ("index_batches", count(&self.index_batches)),
            ("index_syncs", count(&self.index_syncs)),
            ("index_entries", count(&self.index_entries)),
            ("records_unindexed", unindexed),
        ];
        StoreStats {
            records_appended: count(&self.records),
            syncs: count(&self.flushes),
            synced_appends: count(&self.flushed_waiters),
            sync_micros: count(&self.sync_micros),
            engine: engine.map(|(name, n)| (name.to_owned(), n)).into(),
        }
    }
}
