//! Owns: the write path's counters, reported in the contract's neutral shape.
//! Must never: hold state anything decides on (they are for reports only).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::contract::StoreStats;

/// Write-path counters.
#[derive(Default)]
pub(crate) struct Counters {
    /// Writer rounds: each is one journal entry.
    pub rounds: AtomicU64,
    pub records: AtomicU64,
    /// Group commits (one `fdatasync` each), their waiters and time in µs.
    pub flushes: AtomicU64,
    pub flushed_waiters: AtomicU64,
    pub sync_micros: AtomicU64,
    /// The indexer's batches, its own journal syncs and its sled inserts.
    pub index_batches: AtomicU64,
    pub index_syncs: AtomicU64,
    pub index_entries: AtomicU64,
    /// Contract calls answered on a read thread (two thread hand-offs each).
    pub read_thread_jobs: AtomicU64,
}

impl Counters {
    /// The counters now; `unindexed`: the indexer's backlog, in records.
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
