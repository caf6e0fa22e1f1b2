//! The write path's counters: what the writer and the
//! indexer count as they go, and the snapshot of them callers read.
//! Owns: the counters and their meaning. Must never: hold state anything
//! decides on (they are for reports: the bench, `/healthz`, the audit).

use std::sync::atomic::AtomicU64;

/// Write-path counters (see [`LedgerStats`]).
#[derive(Default)]
pub(crate) struct Counters {
    pub rounds: AtomicU64,
    pub records: AtomicU64,
    pub flushes: AtomicU64,
    pub flushed_waiters: AtomicU64,
    pub sync_micros: AtomicU64,
    pub index_batches: AtomicU64,
    pub index_syncs: AtomicU64,
    pub index_entries: AtomicU64,
    /// Calls of the contract answered on a read thread (a read sled
    /// or a journal file serves, a snapshot): each costs two thread
    /// hand-offs, which the recent records spare the rest.
    pub read_thread_jobs: AtomicU64,
}

/// How the write path has behaved since open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LedgerStats {
    /// Writer rounds: each is one journal entry.
    pub rounds: u64,
    pub records_appended: u64,
    /// Flushes (one `fdatasync` of the journal each).
    pub flushes: u64,
    /// Durable appends and flush requests acknowledged by those flushes;
    /// divided by `flushes`, the group-commit factor.
    pub flushed_waiters: u64,
    /// Time the flushes spent making the journal durable (the sync
    /// call), in microseconds; divided by `flushes`, one sync's time.
    pub sync_micros: u64,
    /// Batches of rounds the indexer applied to sled (each stores the
    /// next global position once).
    pub index_batches: u64,
    /// Journal syncs the indexer made itself, for rounds no commit would
    /// sync (buffered appends only), before applying them to sled.
    pub index_syncs: u64,
    /// Entries the indexer inserted into sled (each one or more records
    /// of one stream); `records_appended` divided by it is how many
    /// records an insert carries.
    pub index_entries: u64,
    /// Records journaled that the indexer has not yet applied to sled
    /// (its backlog, at most `MAX_UNINDEXED_BYTES` of records): read from
    /// the recent records until then. 0 once the write path is idle.
    pub records_unindexed: u64,
}
