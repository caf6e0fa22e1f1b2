//! The log contract, written once and run against every store the build
//! has (`log-format/LOG-FORMAT.md`, "The log contract"): appends at a
//! position, conflicts, atomic multi-record appends, buffered then
//! flushed, tails that wake without polling, reads from the middle and a
//! page at a time, global order, stream listings, folds and their
//! snapshots, damage reported as damage, and (for stores that keep
//! anything) a reopen.
//!
//! Each behaviour is a generic `async fn` over [`StoreUnderTest`]; the
//! `conformance!` macro instantiates every one of them for a store.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt};
use ledgerwire::ledger::memory::MemoryStore;
use ledgerwire::ledger::probe::{Probe, ProbeFold};
use ledgerwire::ledger::{
    Durability, ExpectedPosition, FoldCache, Ledger, LedgerError, NewRecord, Payload, StreamKey,
};

use crate::support::{scratch, stream};

/// A store the suite runs against: how to make a fresh one, damage one
/// record of it, and open it again.
#[async_trait::async_trait]
pub trait StoreUnderTest: Sized + Send {
    async fn fresh() -> Self;
    fn ledger(&self) -> Ledger;
    /// Flips bits of one stored record, as a disk could, and leaves the
    /// store as the next reader finds it.
    async fn damage(&mut self, stream: &StreamKey, position: u64);
    /// Closes the store and opens it again from what it keeps.
    async fn reopen(&mut self);
}

/// The memory store: nothing survives it, so it has no reopen test.
pub struct Memory(Arc<MemoryStore>);

#[async_trait::async_trait]
impl StoreUnderTest for Memory {
    async fn fresh() -> Self {
        Memory(Arc::new(MemoryStore::new()))
    }
    fn ledger(&self) -> Ledger {
        Ledger::new(self.0.clone())
    }
    async fn damage(&mut self, stream: &StreamKey, position: u64) {
        self.0.damage(stream, position);
    }
    async fn reopen(&mut self) {
        unreachable!("the memory store keeps nothing to open again");
    }
}

/// The local store in a scratch directory.
pub struct Local {
    dir: tempfile::TempDir,
    ledger: Option<Ledger>,
}

#[async_trait::async_trait]
impl StoreUnderTest for Local {
    async fn fresh() -> Self {
        let dir = scratch();
        let (ledger, _) = crate::support::open(dir.path());
        Local {
            dir,
            ledger: Some(ledger),
        }
    }
    fn ledger(&self) -> Ledger {
        self.ledger.clone().expect("an open store")
    }
    async fn damage(&mut self, stream: &StreamKey, position: u64) {
        self.close().await;
        crate::support::tear_record(self.dir.path(), stream, position);
        self.ledger = Some(crate::support::open(self.dir.path()).0);
    }
    async fn reopen(&mut self) {
        self.close().await;
        self.ledger = Some(crate::support::open(self.dir.path()).0);
    }
}

impl Local {
    /// Flushes and drops the store (its lock is free once this returns).
    async fn close(&mut self) {
        if let Some(ledger) = self.ledger.take() {
            ledger.flush().await.expect("flush");
        }
    }
}

/// The PostgreSQL store on a database of its own in the test cluster.
pub struct Postgres {
    url: String,
    ledger: Option<Ledger>,
}

#[async_trait::async_trait]
impl StoreUnderTest for Postgres {
    async fn fresh() -> Self {
        let (url, ledger) = crate::postgres::cluster::fresh_store().await;
        Postgres {
            url,
            ledger: Some(ledger),
        }
    }
    fn ledger(&self) -> Ledger {
        self.ledger.clone().expect("an open store")
    }
    async fn damage(&mut self, stream: &StreamKey, position: u64) {
        crate::postgres::flip_stored_byte(&self.url, stream, position).await;
        self.reopen().await;
    }
    async fn reopen(&mut self) {
        if let Some(ledger) = self.ledger.take() {
            ledger.flush().await.expect("flush");
        }
        self.ledger = Some(crate::postgres::cluster::open_ledger(&self.url).await);
    }
}

/// Instantiates every behaviour of the suite for one store.
macro_rules! conformance {
    ($module:ident, $store:ty, [$($extra:ident),*]) => {
        mod $module {
            conformance!(@tests $store,
                appends_read_back_in_order_with_positions_and_global_order,
                a_stale_expected_position_is_a_typed_conflict_and_writes_nothing,
                a_multi_record_append_lands_whole_or_not_at_all,
                racing_writers_never_both_extend_the_same_position,
                appends_out_of_bounds_are_refused_and_write_nothing,
                buffered_appends_are_visible_at_once_and_a_flush_resolves,
                a_tail_yields_old_records_then_wakes_for_new_ones,
                reads_start_anywhere_and_come_a_page_at_a_time,
                the_global_scan_yields_every_record_once_in_order,
                streams_are_listed_in_key_order_a_page_at_a_time,
                cached_and_snapshotted_folds_equal_a_fold_from_zero,
                a_snapshot_that_cannot_be_written_does_not_fail_the_fold,
                a_damaged_record_is_damage_and_its_stream_is_refused,
                copies_keep_kind_payload_and_timestamp_at_the_position_asked,
                appended_records_are_what_a_read_hands_out_and_fold_in_without_one
                $(, $extra)*);
        }
    };
    (@tests $store:ty, $($test:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                super::$test::<$store>().await;
            }
        )*
    };
}

conformance!(memory, super::Memory, []);
conformance!(
    local,
    super::Local,
    [a_reopened_store_keeps_every_record_and_continues_global_positions]
);
conformance!(
    postgres,
    super::Postgres,
    [a_reopened_store_keeps_every_record_and_continues_global_positions]
);

fn probe(n: u64) -> NewRecord {
    Probe::new(0, n, 16).to_record()
}

async fn append(ledger: &Ledger, key: &StreamKey, at: u64, count: u64, durability: Durability) {
    let records = (at..at + count).map(probe).collect();
    ledger
        .append(key, ExpectedPosition::Exactly(at), records, durability)
        .await
        .expect("append");
}

async fn positions(ledger: &Ledger, key: &StreamKey, from: u64) -> Vec<u64> {
    let records = ledger.read_to_end(key, from).await.expect("read");
    records.iter().map(|r| r.position()).collect()
}

async fn appends_read_back_in_order_with_positions_and_global_order<S: StoreUnderTest>() {
    let store = S::fresh().await;
    let ledger = store.ledger();
    let (a, b) = (stream("t/a"), stream("t/b"));
    let first = ledger
        .append(
            &a,
            ExpectedPosition::Exactly(0),
            vec![probe(0), probe(1)],
            Durability::Durable,
        )
        .await
        .unwrap();
    assert_eq!((first.first_position, first.next_position), (0, 2));
    let other = ledger
        .append(
            &b,
            ExpectedPosition::Any,
            vec![probe(0)],
            Durability::Buffered,
        )
        .await
        .unwrap();
    assert!(other.first_global_position > first.first_global_position + 1);
    let records = ledger.read_to_end(&a, 0).await.unwrap();
    assert_eq!(records.len(), 2);
    assert_eq!(records[1].position(), 1);
    assert_eq!(
        records[1].global_position(),
        records[0].global_position() + 1
    );
    assert_eq!(
        Probe::from_record(&records[1]).unwrap().unwrap(),
        Probe::new(0, 1, 16)
    );
    assert_eq!(ledger.head(&a).await.unwrap(), 2);
    assert_eq!(ledger.head(&stream("t/none")).await.unwrap(), 0);
    assert!(
        ledger
            .read_to_end(&stream("t/none"), 0)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn a_stale_expected_position_is_a_typed_conflict_and_writes_nothing<S: StoreUnderTest>() {
    let store = S::fresh().await;
    let ledger = store.ledger();
    let key = stream("t/conflict");
    append(&ledger, &key, 0, 1, Durability::Durable).await;
    for expected in [0, 2] {
        let error = ledger
            .append(
                &key,
                ExpectedPosition::Exactly(expected),
                vec![probe(9)],
                Durability::Durable,
            )
            .await
            .unwrap_err();
        assert!(
            matches!(error, LedgerError::Conflict { actual: 1, .. }),
            "{error}"
        );
        assert!(!error.is_transient(), "a conflict needs a new decision");
    }
    assert_eq!(ledger.head(&key).await.unwrap(), 1);
}

async fn a_multi_record_append_lands_whole_or_not_at_all<S: StoreUnderTest>() {
    let store = S::fresh().await;
    let ledger = store.ledger();
    let key = stream("t/atomic");
    append(&ledger, &key, 0, 5, Durability::Durable).await;
    assert_eq!(positions(&ledger, &key, 0).await, vec![0, 1, 2, 3, 4]);
    // A losing multi-record append leaves no record behind.
    let lost = ledger
        .append(
            &key,
            ExpectedPosition::Exactly(3),
            (0..4).map(probe).collect(),
            Durability::Durable,
        )
        .await;
    assert!(matches!(lost, Err(LedgerError::Conflict { actual: 5, .. })));
    assert_eq!(ledger.head(&key).await.unwrap(), 5);
    // Global positions of one append are consecutive.
    let records = ledger.read_to_end(&key, 0).await.unwrap();
    for pair in records.windows(2) {
        assert_eq!(pair[1].global_position(), pair[0].global_position() + 1);
    }
}

/// Another store's record `n` of `t/original`, stamped long ago (`ms`).
fn foreign_record(n: u64, ms: u64) -> ledgerwire::ledger::Record {
    let original = stream("t/original");
    let header = ledgerwire::ledger::record::Header {
        format_version: ledgerwire::ledger::record::FORMAT_VERSION,
        kind: 7,
        position: n,
        global_position: 40 + n,
        timestamp_ms: ms,
    };
    let bytes = ledgerwire::ledger::record::encode(&header, &original, &[n as u8; 12]);
    ledgerwire::ledger::Record::decode(bytes.into(), original.as_str(), n).expect("a record")
}

async fn copies_keep_kind_payload_and_timestamp_at_the_position_asked<S: StoreUnderTest>() {
    let store = S::fresh().await;
    let ledger = store.ledger();
    let key = stream("t/copy");
    // Two runs of equal timestamps in one call (the local store stamps
    // each of its appends once).
    let originals: Vec<_> = [1_000, 1_000, 2_000]
        .into_iter()
        .zip(0..)
        .map(|(ms, n)| foreign_record(n, ms))
        .collect();
    let outcome = ledger
        .store()
        .append_copies(&key, 0, &originals)
        .await
        .unwrap();
    assert_eq!((outcome.first_position, outcome.next_position), (0, 3));
    let copies = ledger.read_to_end(&key, 0).await.unwrap();
    let what = |records: &[ledgerwire::ledger::Record]| -> Vec<_> {
        records
            .iter()
            .map(|r| {
                (
                    r.position(),
                    r.kind(),
                    r.payload().to_vec(),
                    r.timestamp_ms(),
                )
            })
            .collect()
    };
    assert_eq!(what(&copies), what(&originals));
    // At a stale position: the typed conflict, and nothing written.
    let stale = ledger.store().append_copies(&key, 1, &originals[..1]).await;
    assert!(
        matches!(stale, Err(LedgerError::Conflict { actual: 3, .. })),
        "{stale:?}"
    );
    let empty = ledger.store().append_copies(&key, 3, &[]).await;
    assert!(
        matches!(empty, Err(LedgerError::BatchSize { len: 0, .. })),
        "{empty:?}"
    );
    assert_eq!(ledger.head(&key).await.unwrap(), 3);
}

async fn racing_writers_never_both_extend_the_same_position<S: StoreUnderTest>() {
    let store = S::fresh().await;
    let ledger = store.ledger();
    let key = stream("t/race");
    let winners = Arc::new(AtomicUsize::new(0));
    // 16 writers race for each of 10 positions; exactly one wins each.
    for position in 0..10 {
        let racers: Vec<_> = (0..16)
            .map(|writer| {
                let (ledger, key, winners) = (ledger.clone(), key.clone(), winners.clone());
                tokio::spawn(async move {
                    let record = Probe::new(writer, position, 8).to_record();
                    let outcome = ledger
                        .append(
                            &key,
                            ExpectedPosition::Exactly(position),
                            vec![record],
                            Durability::Buffered,
                        )
                        .await;
                    match outcome {
                        Ok(_) => {
                            winners.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(LedgerError::Conflict { .. }) => {}
                        Err(other) => panic!("unexpected error: {other}"),
                    }
                })
            })
            .collect();
        for racer in racers {
            racer.await.unwrap();
        }
        assert_eq!(winners.swap(0, Ordering::SeqCst), 1, "position {position}");
    }
    assert_eq!(ledger.head(&key).await.unwrap(), 10);
    ledger.flush().await.unwrap();
    assert!(ledger.verify().await.unwrap().is_clean());
}

async fn appends_out_of_bounds_are_refused_and_write_nothing<S: StoreUnderTest>() {
    let store = S::fresh().await;
    let ledger = store.ledger();
    let key = stream("t/bounds");
    let empty = ledger
        .append(&key, ExpectedPosition::Any, vec![], Durability::Buffered)
        .await;
    assert!(matches!(empty, Err(LedgerError::BatchSize { len: 0, .. })));
    let many = (0..=ledgerwire::ledger::MAX_RECORDS_PER_APPEND as u64)
        .map(probe)
        .collect();
    let many = ledger
        .append(&key, ExpectedPosition::Any, many, Durability::Buffered)
        .await;
    assert!(matches!(many, Err(LedgerError::BatchSize { .. })));
    let huge = NewRecord {
        kind: 1,
        payload: vec![0; ledgerwire::ledger::record::MAX_PAYLOAD_BYTES + 1],
    };
    let huge = ledger
        .append(
            &key,
            ExpectedPosition::Any,
            vec![probe(0), huge],
            Durability::Buffered,
        )
        .await;
    assert!(matches!(huge, Err(LedgerError::PayloadTooLarge { .. })));
    assert_eq!(ledger.head(&key).await.unwrap(), 0);
}

async fn buffered_appends_are_visible_at_once_and_a_flush_resolves<S: StoreUnderTest>() {
    let store = S::fresh().await;
    let ledger = store.ledger();
    let key = stream("t/buffered");
    append(&ledger, &key, 0, 3, Durability::Buffered).await;
    assert_eq!(positions(&ledger, &key, 0).await, vec![0, 1, 2]);
    ledger.flush().await.unwrap();
    // A durable append after buffered ones of the same stream lands after
    // them.
    append(&ledger, &key, 3, 1, Durability::Durable).await;
    assert_eq!(positions(&ledger, &key, 0).await, vec![0, 1, 2, 3]);
    assert!(ledger.stats().records_appended >= 4);
}

async fn a_tail_yields_old_records_then_wakes_for_new_ones<S: StoreUnderTest>() {
    let store = S::fresh().await;
    let ledger = store.ledger();
    let key = stream("t/tail");
    append(&ledger, &key, 0, 1, Durability::Buffered).await;
    let mut tail = Box::pin(ledger.tail(&key, 0));
    assert_eq!(tail.next().await.unwrap().unwrap().position(), 0);
    // Nothing more yet: the next item comes only after an append.
    let waiting = tokio::time::timeout(Duration::from_millis(50), tail.next()).await;
    assert!(
        waiting.is_err(),
        "the tail yielded a record nobody appended"
    );
    let writer = {
        let (ledger, key) = (ledger.clone(), key.clone());
        tokio::spawn(async move {
            for n in 1..=3 {
                append(&ledger, &key, n, 1, Durability::Durable).await;
            }
        })
    };
    for expected in 1..=3 {
        let next = tokio::time::timeout(Duration::from_secs(10), tail.next())
            .await
            .expect("the tail woke for the append");
        assert_eq!(next.unwrap().unwrap().position(), expected);
    }
    writer.await.unwrap();
}

async fn reads_start_anywhere_and_come_a_page_at_a_time<S: StoreUnderTest>() {
    let store = S::fresh().await;
    let ledger = store.ledger();
    let key = stream("t/pages");
    let total = ledgerwire::ledger::READ_PAGE_RECORDS as u64 * 2 + 7;
    let mut at = 0;
    while at < total {
        let count = (total - at).min(100);
        append(&ledger, &key, at, count, Durability::Buffered).await;
        at += count;
    }
    for from in [0, 1, 255, 256, 300, total - 1, total, total + 5] {
        let read: Vec<u64> = ledger
            .read(&key, from)
            .map_ok(|r| r.position())
            .try_collect()
            .await
            .unwrap();
        assert_eq!(
            read,
            (from.min(total)..total).collect::<Vec<_>>(),
            "from {from}"
        );
    }
    let page = ledger.read_page(&key, 10, 5).await.unwrap();
    let page: Vec<u64> = page.iter().map(|r| r.position()).collect();
    assert_eq!(page, vec![10, 11, 12, 13, 14]);
}

async fn the_global_scan_yields_every_record_once_in_order<S: StoreUnderTest>() {
    let store = S::fresh().await;
    let ledger = store.ledger();
    let keys: Vec<_> = (0..7).map(|n| stream(&format!("t/g{n}"))).collect();
    // Interleaved, so global order crosses streams at every step.
    for round in 0..40u64 {
        for key in &keys {
            append(&ledger, key, round, 1, Durability::Buffered).await;
        }
    }
    ledger.flush().await.unwrap();
    let all: Vec<_> = ledger.scan_global(0).try_collect().await.unwrap();
    assert_eq!(all.len(), 7 * 40);
    for pair in all.windows(2) {
        assert!(pair[0].global_position() < pair[1].global_position());
    }
    let middle = all[100].global_position();
    let rest: Vec<_> = ledger.scan_global(middle).try_collect().await.unwrap();
    assert_eq!(rest.len(), all.len() - 100);
    assert_eq!(rest[0].global_position(), middle);
    let report = ledger.verify().await.unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!((report.records, report.streams), (7 * 40, 7));
}

async fn streams_are_listed_in_key_order_a_page_at_a_time<S: StoreUnderTest>() {
    let store = S::fresh().await;
    let ledger = store.ledger();
    let count = ledgerwire::ledger::LIST_PAGE_STREAMS + 3;
    for n in (0..count).rev() {
        append(
            &ledger,
            &stream(&format!("s/{n:04}")),
            0,
            1,
            Durability::Buffered,
        )
        .await;
    }
    let listed = crate::support::streams(&ledger).await;
    let names: Vec<String> = listed.iter().map(ToString::to_string).collect();
    let expected: Vec<String> = (0..count).map(|n| format!("s/{n:04}")).collect();
    assert_eq!(names, expected);
    let store = ledger.store();
    let after = store.streams(Some(&stream("s/0002")), 2).await.unwrap();
    assert_eq!(after, vec![stream("s/0003"), stream("s/0004")]);
}

async fn cached_and_snapshotted_folds_equal_a_fold_from_zero<S: StoreUnderTest>() {
    let store = S::fresh().await;
    let ledger = store.ledger();
    let key = stream("t/fold");
    for n in 0..50 {
        append(&ledger, &key, n, 1, Durability::Buffered).await;
    }
    let from_zero = ledger.fold::<ProbeFold>(&key).await.unwrap();
    assert_eq!(from_zero.state.records, 50);
    // A cache snapshotting every 8 records.
    let cache = FoldCache::<ProbeFold>::with_limits(ledger.clone(), 8, 4);
    assert_eq!(cache.state(&key).await.unwrap().state, from_zero.state);
    assert!(cache.stored_snapshot(&key).await.unwrap().is_some());
    // New records after the snapshot are folded on top of it.
    append(&ledger, &key, 50, 1, Durability::Buffered).await;
    cache.clear();
    let resumed = cache.state(&key).await.unwrap();
    assert_eq!(resumed.position, 51);
    let again = ledger.fold::<ProbeFold>(&key).await.unwrap();
    assert_eq!(resumed.state, again.state);
    // Snapshots may go at any time without changing the result.
    ledger.drop_snapshots().await.unwrap();
    cache.clear();
    assert!(cache.stored_snapshot(&key).await.unwrap().is_none());
    assert_eq!(cache.state(&key).await.unwrap().state, resumed.state);
}

async fn appended_records_are_what_a_read_hands_out_and_fold_in_without_one<S: StoreUnderTest>() {
    let store = S::fresh().await;
    let ledger = store.ledger();
    let key = stream("t/own");
    append(&ledger, &key, 0, 3, Durability::Durable).await;
    let records = (3..7).map(probe).collect();
    let (outcome, appended) = ledger
        .append_records(
            &key,
            ExpectedPosition::Exactly(3),
            records,
            Durability::Buffered,
        )
        .await
        .unwrap();
    assert_eq!((outcome.first_position, outcome.next_position), (3, 7));
    let read = ledger.read_to_end(&key, 3).await.unwrap();
    let seen = |records: &[ledgerwire::ledger::Record]| {
        records
            .iter()
            .map(|r| {
                let fields = (
                    r.position(),
                    r.global_position(),
                    r.kind(),
                    r.timestamp_ms(),
                );
                (fields, r.payload().to_vec(), r.crc())
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(seen(&appended), seen(&read), "checksums included");
    assert_eq!(appended[0].global_position(), outcome.first_global_position);
    // A cache's own appends (a new stream's too) are folded in, snapshots
    // written as they come due, and end where a fold from zero ends.
    let cache = FoldCache::<ProbeFold>::with_limits(ledger.clone(), 4, 8);
    let fresh = stream("t/own-new");
    for n in 0..10 {
        let at = ExpectedPosition::Exactly(n);
        let (outcome, folded) = cache
            .append(&fresh, at, vec![probe(n)], Durability::Buffered)
            .await
            .unwrap();
        assert_eq!(outcome.next_position, n + 1);
        assert_eq!(folded.expect("folded without a read").position, n + 1);
    }
    let known = cache.known(&fresh).await.expect("held");
    let from_zero = ledger.fold::<ProbeFold>(&fresh).await.unwrap();
    assert_eq!((known.position, &known.state), (10, &from_zero.state));
    assert_eq!(
        cache
            .stored_snapshot(&fresh)
            .await
            .unwrap()
            .map(|s| s.position),
        Some(8)
    );
    // Another writer's append is not in the state held; the cache's next
    // append there conflicts, and a fold from the store has it.
    append(&ledger, &fresh, 10, 1, Durability::Buffered).await;
    assert_eq!(cache.known(&fresh).await.unwrap().position, 10);
    let stale = cache
        .append(
            &fresh,
            ExpectedPosition::Exactly(10),
            vec![probe(10)],
            Durability::Buffered,
        )
        .await;
    assert!(
        matches!(stale, Err(LedgerError::Conflict { actual: 11, .. })),
        "{stale:?}"
    );
    assert_eq!(cache.state(&fresh).await.unwrap().position, 11);
}

/// A fold state no snapshot can hold: it refuses to be serialised.
#[derive(Clone, Debug, Default, serde::Deserialize)]
struct Unencodable(u64);

impl serde::Serialize for Unencodable {
    fn serialize<E: serde::Serializer>(&self, _: E) -> Result<E::Ok, E::Error> {
        Err(serde::ser::Error::custom("this state has no encoding"))
    }
}

struct UnencodableFold;

impl ledgerwire::ledger::Fold for UnencodableFold {
    type State = Unencodable;
    const NAME: &'static str = "test-unencodable";
    const VERSION: u32 = 1;

    fn apply(
        state: &mut Self::State,
        _: &ledgerwire::ledger::Record,
    ) -> Result<(), ledgerwire::ledger::FoldError> {
        state.0 += 1;
        Ok(())
    }
}

async fn a_snapshot_that_cannot_be_written_does_not_fail_the_fold<S: StoreUnderTest>() {
    let store = S::fresh().await;
    let ledger = store.ledger();
    let key = stream("t/unsnapshottable");
    append(&ledger, &key, 0, 5, Durability::Buffered).await;
    let cache = FoldCache::<UnencodableFold>::with_limits(ledger.clone(), 2, 4);
    assert_eq!(cache.state(&key).await.unwrap().state.0, 5);
    assert!(cache.stored_snapshot(&key).await.unwrap().is_none());
}

async fn a_damaged_record_is_damage_and_its_stream_is_refused<S: StoreUnderTest>() {
    let mut store = S::fresh().await;
    let (bad, good) = (stream("t/damaged"), stream("t/fine"));
    append(&store.ledger(), &bad, 0, 5, Durability::Durable).await;
    append(&store.ledger(), &good, 0, 1, Durability::Durable).await;
    store.damage(&bad, 3).await;
    let ledger = store.ledger();
    // Records before the damage read; the damaged one is named by stream
    // and position, never handed out, and never retried into success.
    let read = ledger.read_to_end(&bad, 0).await;
    match read {
        Err(LedgerError::Corrupt {
            stream, position, ..
        }) => {
            assert_eq!((stream.as_str(), position), ("t/damaged", 3));
        }
        other => panic!("expected damage at position 3, got {other:?}"),
    }
    let error = ledger.fold::<ProbeFold>(&bad).await.unwrap_err();
    assert!(matches!(error, LedgerError::Corrupt { .. }), "{error}");
    assert!(!error.is_transient());
    // Other streams are served.
    assert_eq!(positions(&ledger, &good, 0).await, vec![0]);
    // The global check reports it.
    let report = ledger.verify().await.unwrap();
    assert!(!report.is_clean());
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.stream.as_deref() == Some("t/damaged") && p.position == Some(3)),
        "{:?}",
        report.problems
    );
}

async fn a_reopened_store_keeps_every_record_and_continues_global_positions<S: StoreUnderTest>() {
    let mut store = S::fresh().await;
    let key = stream("t/reopen");
    append(&store.ledger(), &key, 0, 2, Durability::Buffered).await;
    append(
        &store.ledger(),
        &stream("t/other"),
        0,
        1,
        Durability::Durable,
    )
    .await;
    let before: Vec<_> = store.ledger().scan_global(0).try_collect().await.unwrap();
    store.reopen().await;
    let ledger = store.ledger();
    let after: Vec<_> = ledger.scan_global(0).try_collect().await.unwrap();
    let globals = |records: &[ledgerwire::ledger::Record]| {
        records
            .iter()
            .map(|r| (r.stream().to_owned(), r.position(), r.global_position()))
            .collect::<Vec<_>>()
    };
    assert_eq!(globals(&after), globals(&before));
    let next = ledger
        .append(
            &key,
            ExpectedPosition::Exactly(2),
            vec![probe(2)],
            Durability::Durable,
        )
        .await
        .unwrap();
    let last = before.iter().map(|r| r.global_position()).max().unwrap();
    assert!(next.first_global_position > last);
}
