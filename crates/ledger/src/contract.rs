//! The log contract: what every store behind the ledger promises, written
//! once so the doors, the tools and the conformance suite
//! (`tests/it/conformance/`) speak to any store the same way.
//!
//! Owns: the store trait ([`LogStore`]), its snapshot side
//! ([`SnapshotStore`]) and the neutral shapes of its condition and
//! counters. `log-format/LOG-FORMAT.md` ("The log contract") states the
//! promises in prose.
//! Must never: name an engine, a door or a record kind.

use std::collections::BTreeMap;

use async_trait::async_trait;
use futures_util::stream::BoxStream;
use tokio::sync::watch;

use crate::error::Result;
use crate::record::{NewRecord, Record, StreamKey};
use crate::{AppendOutcome, Durability, ExpectedPosition};

/// A store of streams of records.
///
/// Promises every implementation keeps:
/// - **Atomic appends at a position.** An append lands whole or not at
///   all; with [`ExpectedPosition::Exactly`] it lands only if the stream
///   holds exactly that many records, and otherwise fails with
///   [`LedgerError::Conflict`](crate::LedgerError::Conflict)
///   naming the actual head. Two appends never extend one position.
/// - **Durable means on stable storage.** A durable append is
///   acknowledged only once it, and every append acknowledged before it,
///   survives a crash of the process and of the machine. A buffered one
///   is visible to readers at once and becomes durable with the next
///   durable append or [`LogStore::flush`]; a crash may lose buffered
///   appends, only as a suffix of their stream, never one behind a
///   durable append that survived.
/// - **Orders.** Positions within a stream are 0, 1, 2, … with no gap.
///   Global positions are unique and increase along every stream (dense
///   from 0 unless [`LogStore::dense_global_positions`] says not); a
///   global-order scan yields every record below its horizon exactly once,
///   in global order, and never skips one that commits later below a
///   position it has passed.
/// - **Readers see only whole, checked records.** Every record handed out
///   has passed its CRC32C and placement checks; a record that fails them
///   makes its stream damaged ([`LedgerError::Corrupt`](crate::LedgerError::Corrupt)), which is never
///   retried into success.
/// - **Reads after writes.** Once an append is acknowledged, a read of its
///   stream starting after the call sees it.
#[async_trait]
pub trait LogStore: Send + Sync + 'static {
    /// The engine's name for reports: `local`, `postgres`, `memory`.
    fn engine(&self) -> &'static str;

    /// Whether every global position below the last one belongs to a
    /// record (the local and memory stores number them 0, 1, 2, …). A
    /// store whose global positions are unique and increasing but leave
    /// gaps (PostgreSQL's, built from transaction ids) says false, and
    /// `verify` then does not take a gap for a lost record.
    fn dense_global_positions(&self) -> bool {
        true
    }

    /// Whether other processes append to this store (several instances on
    /// one database): a watch then also learns of their appends, and a
    /// reader that must see them follows the streams it serves rather
    /// than trust its own process's appends alone.
    fn shared_by_processes(&self) -> bool {
        false
    }

    /// Appends `records` to `stream` atomically at `expected`.
    async fn append(
        &self,
        stream: &StreamKey,
        expected: ExpectedPosition,
        records: Vec<NewRecord>,
        durability: Durability,
    ) -> Result<AppendOutcome>;

    /// [`LogStore::append`], handing back the records appended exactly as
    /// a read of them would: what a fold of this process's own appends
    /// applies without reading them again. The default reads them back
    /// after the append; a store that knows them from the append itself
    /// overrides it, saving that read.
    async fn append_records(
        &self,
        stream: &StreamKey,
        expected: ExpectedPosition,
        records: Vec<NewRecord>,
        durability: Durability,
    ) -> Result<(AppendOutcome, Vec<Record>)> {
        let outcome = self.append(stream, expected, records, durability).await?;
        let count = (outcome.next_position - outcome.first_position) as usize;
        let appended = self.read(stream, outcome.first_position, count).await?;
        Ok((outcome, appended))
    }

    /// Appends copies of another store's `records` (1 to
    /// [`MAX_RECORDS_PER_APPEND`](crate::MAX_RECORDS_PER_APPEND))
    /// to `stream` at `at`, buffered, each keeping its kind, payload and
    /// timestamp; global positions are this store's own. What `log copy`
    /// writes; a conflict at `at` is the same typed error as
    /// [`LogStore::append`]'s.
    async fn append_copies(
        &self,
        stream: &StreamKey,
        at: u64,
        records: &[Record],
    ) -> Result<AppendOutcome>;

    /// Resolves once every append acknowledged before the call is durable.
    async fn flush(&self) -> Result<()>;

    /// The stream's next position: the number of records it holds.
    async fn head(&self, stream: &StreamKey) -> Result<u64>;

    /// Up to `max_records` records of `stream` from position `from`, in
    /// order. Fewer than `max_records` means the read reached the end the
    /// stream had when the read began.
    async fn read(&self, stream: &StreamKey, from: u64, max_records: usize) -> Result<Vec<Record>>;

    /// A receiver of the stream's head, sent whenever the store learns the
    /// stream grew: at once for this process's appends, within the
    /// store's stated delay for other processes'. Tails wait on it; they
    /// never poll.
    fn watch(&self, stream: &StreamKey) -> watch::Receiver<u64>;

    /// Every record from global position `from` in global order, up to
    /// the horizon the scan fixes when it starts (every append
    /// acknowledged before the call is below it).
    fn scan_global(&self, from: u64) -> BoxStream<'static, Result<Record>>;

    /// Up to `max` stream keys after `after`, in key order.
    async fn streams(&self, after: Option<&StreamKey>, max: usize) -> Result<Vec<StreamKey>>;

    /// Where folds keep their snapshots.
    fn snapshots(&self) -> &dyn SnapshotStore;

    /// Whether the store serves, and what it refuses.
    fn condition(&self) -> StoreCondition;

    /// Counters since the store was opened.
    fn stats(&self) -> StoreStats;
}

/// Fold snapshots: derivable values a fold may start from. A store may
/// lose any of them at any time (a crash, an operator deleting them); a
/// fold then starts further back and reaches the same state.
#[async_trait]
pub trait SnapshotStore: Send + Sync {
    async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Stores `value` under `key`, replacing any; not made durable.
    async fn put(&self, key: &[u8], value: Vec<u8>) -> Result<()>;
    /// Deletes every snapshot.
    async fn clear(&self) -> Result<()>;
}

/// How a store stands, for `/healthz`, `/readyz` and the audit API.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct StoreCondition {
    /// Why appends are refused until a restart (a failed write or sync).
    pub poisoned: Option<String>,
    /// Why the store cannot be reached now; it serves again by itself
    /// when the cause goes (a database restarting).
    pub unavailable: Option<String>,
    /// Streams refused because a record failed its checks, with the
    /// first bad position, in key order.
    pub damaged: Vec<(String, u64)>,
    /// Damage the store found that names no stream (its own files).
    pub damage_elsewhere: Vec<String>,
    /// Whether a check of every record is still running (damage it finds
    /// is added to `damaged` when found).
    pub scanning: bool,
}

/// What a store has done since it was opened, in a shape every engine
/// fills; what only one engine counts goes in `engine`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct StoreStats {
    pub records_appended: u64,
    /// Syncs to stable storage (for the local store, `fdatasync`s of its
    /// journal; for a database, durable commits).
    pub syncs: u64,
    /// Durable appends and flushes those syncs acknowledged; divided by
    /// `syncs`, the group-commit factor.
    pub synced_appends: u64,
    /// Time spent in those syncs, in microseconds.
    pub sync_micros: u64,
    /// Counters of this engine only, by name.
    pub engine: BTreeMap<String, u64>,
}
