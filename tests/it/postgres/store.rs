//! What the PostgreSQL store shows beyond the conformance suite: a global
//! scan never passes a writer parked in an open transaction, tails wake
//! across two stores on one database (LISTEN/NOTIFY), a newer schema is
//! refused, a flush makes buffered appends durable, and the database
//! stopped as by a crash and restarted loses nothing acknowledged and
//! half-applies nothing while the store recovers by itself.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt};
use ledgerwire::ledger::postgres::{
    LISTENER_APPLICATION_NAME, PostgresSettings, PostgresStore, SCHEMA_VERSION,
};
use ledgerwire::ledger::probe::Probe;
use ledgerwire::ledger::record::{self, FORMAT_VERSION, Header};
use ledgerwire::ledger::{Durability, ExpectedPosition, Ledger, LedgerError, Payload};

use super::cluster::{self, connect_url, fresh_store, open_ledger};
use crate::support::stream;

fn probe(n: u64) -> ledgerwire::ledger::NewRecord {
    Probe::new(0, n, 16).to_record()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_parked_in_an_open_transaction_is_never_skipped_by_a_global_scan() {
    let (url, ledger) = fresh_store().await;
    // A session that took a transaction id and has not committed: its
    // records, when it commits, sit below every later append's.
    let parked = connect_url(&url).await;
    parked.batch_execute("BEGIN").await.unwrap();
    let xid: i64 = parked
        .query_one("SELECT pg_current_xact_id()::text::int8", &[])
        .await
        .unwrap()
        .get(0);
    let later = ledger
        .append(
            &stream("t/later"),
            ExpectedPosition::Exactly(0),
            vec![probe(0)],
            Durability::Durable,
        )
        .await
        .unwrap();
    assert!(later.first_global_position > (xid as u64) << 10);
    let mut scan = tokio::spawn({
        let ledger = ledger.clone();
        async move { ledger.scan_global(0).try_collect::<Vec<_>>().await }
    });
    // The scan waits for the parked transaction rather than pass it.
    let waiting = tokio::time::timeout(Duration::from_millis(300), &mut scan).await;
    assert!(waiting.is_err(), "the scan ended past an open transaction");
    // The parked writer appends, as the store's statement would, and commits.
    let key = stream("t/parked");
    let header = Header {
        format_version: FORMAT_VERSION,
        kind: Probe::KIND.code,
        position: 0,
        global_position: 0,
        timestamp_ms: 1,
    };
    let envelope = record::encode(&header, &key, &probe(0).payload);
    parked
        .execute(
            "INSERT INTO ledgerwire_streams (stream, head) VALUES ($1, 1)",
            &[&key.as_str()],
        )
        .await
        .unwrap();
    parked
        .execute(
            "INSERT INTO ledgerwire_records (stream, position, global, envelope)
             VALUES ($1, 0, pg_current_xact_id()::text::int8 << 10, $2)",
            &[&key.as_str(), &envelope],
        )
        .await
        .unwrap();
    parked.batch_execute("COMMIT").await.unwrap();
    let scanned = tokio::time::timeout(Duration::from_secs(20), scan)
        .await
        .expect("the scan ends once the transaction did")
        .unwrap()
        .unwrap();
    let streams: Vec<&str> = scanned.iter().map(|r| r.stream()).collect();
    assert_eq!(streams, ["t/parked", "t/later"]);
    let report = ledger.verify().await.unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tail_on_one_store_wakes_for_an_append_through_another() {
    let (url, writer) = fresh_store().await;
    let reader = open_ledger(&url).await;
    let key = stream("t/across");
    let mut tail = Box::pin(reader.tail(&key, 0));
    // Appends through the writer reach the reader's tail and, once the
    // reader's listener is up (it connects on its own), are announced to
    // it, one notification per batch.
    let next = append_until_announced(&writer, &reader, &mut tail, 0).await;
    // The reader's notification connection goes; appends meanwhile still
    // reach its tail, and it connects again and hears of later ones.
    let admin = connect_url(&url).await;
    admin
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = current_database() AND application_name = $1",
            &[&LISTENER_APPLICATION_NAME],
        )
        .await
        .unwrap();
    append_and_follow(&writer, &mut tail, next, Durability::Durable).await;
    let reconnected = async {
        while reader.stats().engine["listener_connects"] < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), reconnected)
        .await
        .expect("the listener connected again");
    append_until_announced(&writer, &reader, &mut tail, next + 1).await;
}

/// Appends from position `next` on until one more notification reaches
/// the reader than before (bounded); the position after the last append.
async fn append_until_announced(
    writer: &Ledger,
    reader: &Ledger,
    tail: &mut (
             impl futures_util::Stream<Item = ledgerwire::ledger::Result<ledgerwire::ledger::Record>>
             + Unpin
         ),
    mut next: u64,
) -> u64 {
    let received = || reader.stats().engine["notifications_received"];
    let (before, started, first) = (received(), std::time::Instant::now(), next);
    while received() == before {
        assert!(
            next - first < MAX_APPENDS_UNANNOUNCED && started.elapsed() < Duration::from_secs(10),
            "no notification reached the reader after {} appends: {:?}",
            next - first,
            reader.stats()
        );
        append_and_follow(writer, tail, next, Durability::Buffered).await;
        next += 1;
    }
    next
}

/// Appends through another store before a notification reaches the
/// reader, at most (each is a round trip; a batch goes out every 10 ms).
const MAX_APPENDS_UNANNOUNCED: u64 = 5_000;

/// Appends record `n` of `t/across` through `writer` and reads it from
/// the other store's `tail`.
async fn append_and_follow(
    writer: &Ledger,
    tail: &mut (
             impl futures_util::Stream<Item = ledgerwire::ledger::Result<ledgerwire::ledger::Record>>
             + Unpin
         ),
    n: u64,
    durability: Durability,
) {
    writer
        .append(
            &stream("t/across"),
            ExpectedPosition::Exactly(n),
            vec![probe(n)],
            durability,
        )
        .await
        .unwrap();
    let next = tokio::time::timeout(Duration::from_secs(10), tail.next())
        .await
        .expect("the tail woke for the other store's append");
    assert_eq!(next.unwrap().unwrap().position(), n);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_with_a_newer_schema_is_refused_naming_both_versions() {
    let (url, ledger) = fresh_store().await;
    drop(ledger);
    let admin = connect_url(&url).await;
    admin
        .execute(
            "UPDATE ledgerwire_meta SET value = $1 WHERE key = 'schema_version'",
            &[&(SCHEMA_VERSION + 1)],
        )
        .await
        .unwrap();
    let settings = PostgresSettings::from_url(&url).unwrap();
    let refused = PostgresStore::open(&settings).await.err().expect("refused");
    let sentence = refused.to_string();
    assert!(
        sentence.contains(&format!("version {}", SCHEMA_VERSION + 1))
            && sentence.contains(&format!("build's {SCHEMA_VERSION}")),
        "{sentence}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_writes_the_wal_past_every_buffered_append() {
    let (url, ledger) = fresh_store().await;
    let admin = connect_url(&url).await;
    ledger
        .append(
            &stream("t/b"),
            ExpectedPosition::Exactly(0),
            vec![probe(0)],
            Durability::Buffered,
        )
        .await
        .unwrap();
    let written: String = admin
        .query_one("SELECT pg_current_wal_insert_lsn()::text", &[])
        .await
        .unwrap()
        .get(0);
    ledger.flush().await.unwrap();
    let flushed_past: bool = admin
        .query_one(
            "SELECT pg_current_wal_flush_lsn() >= $1::text::pg_lsn",
            &[&written],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        flushed_past,
        "the flush left WAL before {written} unflushed"
    );
    assert!(ledger.stats().syncs >= 1);
}

/// Appends of three records each by `writer` until `stop`, keeping what
/// was acknowledged.
async fn write_until(
    ledger: Ledger,
    writer: u32,
    acked: Arc<tokio::sync::watch::Sender<Vec<(u32, u64)>>>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let key = stream(&format!("load/{writer}"));
    let mut position = 0;
    while !*stop.borrow() {
        let records = (position..position + 3)
            .map(|n| Probe::new(writer, n, 8).to_record())
            .collect();
        let append = ledger.append(
            &key,
            ExpectedPosition::Exactly(position),
            records,
            Durability::Durable,
        );
        tokio::select! {
            _ = stop.changed() => return,
            outcome = append => match outcome {
                Ok(outcome) => {
                    acked.send_modify(|acked| acked.push((writer, outcome.next_position)));
                    position = outcome.next_position;
                }
                // A commit cut by the crash may have landed.
                Err(LedgerError::Unavailable { .. }) => {
                    position = loop {
                        match ledger.head(&key).await {
                            Ok(head) => break head,
                            Err(error) => {
                                assert!(error.is_transient(), "{error}");
                                let _ = tokio::time::timeout(
                                    Duration::from_millis(50),
                                    stop.changed(),
                                )
                                .await;
                                if *stop.borrow() {
                                    return;
                                }
                            }
                        }
                    };
                }
                Err(other) => panic!("writer {writer}: {other}"),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_stopped_as_by_a_crash_and_restarted_loses_nothing_acknowledged() {
    let own = cluster::dedicated();
    let url = own.fresh_database().await;
    let ledger = open_ledger(&url).await;
    let acked = Arc::new(tokio::sync::watch::channel(Vec::new()).0);
    let mut progress = acked.subscribe();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let writers: Vec<_> = (0..4)
        .map(|writer| {
            tokio::spawn(write_until(
                ledger.clone(),
                writer,
                acked.clone(),
                stopped.clone(),
            ))
        })
        .collect();
    // Some appends land, then the database goes as by a crash.
    progress.wait_for(|acked| acked.len() >= 8).await.unwrap();
    tokio::task::block_in_place(|| own.pg_ctl_stop_immediate());
    let refused = ledger
        .append(
            &stream("t/while-down"),
            ExpectedPosition::Exactly(0),
            vec![probe(0)],
            Durability::Durable,
        )
        .await
        .unwrap_err();
    assert!(refused.is_transient(), "{refused}");
    let reason = ledger.condition().unavailable.expect("marked unavailable");
    assert!(!reason.is_empty());
    tokio::task::block_in_place(|| own.pg_ctl_start());
    // The store serves again by itself.
    ledger
        .append(
            &stream("t/after"),
            ExpectedPosition::Exactly(0),
            vec![probe(0)],
            Durability::Durable,
        )
        .await
        .expect("an append once the database is back");
    let before = acked.borrow().len();
    progress
        .wait_for(|acked| acked.len() >= before + 8)
        .await
        .unwrap();
    let _ = stop.send(true);
    for writer in writers {
        writer.await.unwrap();
    }
    // Every acknowledged append is there, whole; no append is in part.
    let acked = acked.borrow().clone();
    for writer in 0..4u32 {
        let key = stream(&format!("load/{writer}"));
        let records = ledger.read_to_end(&key, 0).await.unwrap();
        assert_eq!(records.len() % 3, 0, "writer {writer}: part of an append");
        let highest = acked
            .iter()
            .filter(|(w, _)| *w == writer)
            .map(|(_, next)| *next)
            .max()
            .unwrap_or(0);
        assert!(
            records.len() as u64 >= highest,
            "writer {writer} lost records"
        );
        for record in &records {
            let probe = Probe::from_record(record).unwrap().unwrap();
            assert_eq!((probe.writer, probe.n), (writer, record.position()));
        }
    }
    let report = ledger.verify().await.unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
}
