//! The PostgreSQL store's group commit: appends waiting together go as
//! one statement and one transaction; a conflict in it fails only its own
//! append; none of them is acknowledged before that transaction
//! committed; and two stores batching on one database keep every
//! stream's positions and the global order.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use ledgerwire::ledger::probe::Probe;
use ledgerwire::ledger::{
    AppendOutcome, Durability, ExpectedPosition, Ledger, LedgerError, NewRecord, Payload,
};

use super::cluster::{self, connect_url, open_ledger};
use crate::support::stream;

fn probe(writer: u32, n: u64) -> NewRecord {
    Probe::new(writer, n, 16).to_record()
}

/// A fresh database and a store on it running one batch at a time, so
/// appends made while one runs wait for the next, together.
async fn one_batch_at_a_time() -> (String, Ledger) {
    let url = cluster::cluster().fresh_database().await;
    let ledger = open_ledger(&format!("{url}?ledgerwire_batches=1")).await;
    (url, ledger)
}

fn batches(ledger: &Ledger) -> u64 {
    ledger.stats().engine["batches"]
}

type Append =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<AppendOutcome, LedgerError>> + Send>>;

/// An append, started: polled once, it has joined the queue.
fn started(
    ledger: &Ledger,
    name: &str,
    at: u64,
    records: Vec<NewRecord>,
    durability: Durability,
) -> Append {
    let (ledger, key) = (ledger.clone(), stream(name));
    let mut append: Append = Box::pin(async move {
        ledger
            .append(&key, ExpectedPosition::Exactly(at), records, durability)
            .await
    });
    assert!(
        (&mut append).now_or_never().is_none(),
        "{name} answered at once"
    );
    append
}

// A current-thread runtime: the batch tasks run only when the test
// awaits, so the appends started one after another are queued before
// the first batch can end.
#[tokio::test]
async fn a_conflict_in_a_batch_fails_only_its_own_append() {
    let (_url, ledger) = one_batch_at_a_time().await;
    for name in ["b/a", "b/b", "b/taken"] {
        let at = ExpectedPosition::Exactly(0);
        let record = vec![probe(0, 0)];
        ledger
            .append(&stream(name), at, record, Durability::Durable)
            .await
            .unwrap();
    }
    let before = batches(&ledger);
    // The first takes the one batch in flight; the others wait for it.
    let first = started(
        &ledger,
        "b/first",
        0,
        vec![probe(1, 0)],
        Durability::Durable,
    );
    let appends = [
        ("b/a", 1, 1, Durability::Buffered),
        ("b/b", 5, 1, Durability::Durable), // the head is at 1
        ("b/new", 0, 3, Durability::Durable),
        ("b/taken", 0, 1, Durability::Buffered), // exists already
        ("b/other", 0, 2, Durability::Buffered),
    ]
    .map(|(name, at, count, durability)| {
        let records = (0..count).map(|n| probe(2, n)).collect();
        (name, started(&ledger, name, at, records, durability))
    });
    first.await.unwrap();
    let mut landed = Vec::new();
    for (name, append) in appends {
        match (name, append.await) {
            ("b/b", Err(LedgerError::Conflict { actual, .. })) => assert_eq!(actual, 1),
            ("b/taken", Err(LedgerError::Conflict { actual, .. })) => assert_eq!(actual, 1),
            ("b/a" | "b/new" | "b/other", Ok(outcome)) => landed.push((name, outcome)),
            (name, other) => panic!("{name}: {other:?}"),
        }
    }
    assert_eq!(
        batches(&ledger) - before,
        2,
        "the first batch, then the five appends waiting behind it in one"
    );
    // One transaction: one id, each record its own offset in it.
    let ids: BTreeSet<u64> = landed
        .iter()
        .map(|(_, outcome)| outcome.first_global_position >> 10)
        .collect();
    assert_eq!(ids.len(), 1, "{landed:?}");
    let mut offsets = BTreeSet::new();
    for (name, outcome) in &landed {
        let records = ledger.read_to_end(&stream(name), 0).await.unwrap();
        assert_eq!(records.len() as u64, outcome.next_position, "{name}");
        for record in &records[outcome.first_position as usize..] {
            assert!(offsets.insert(record.global_position()), "{name}");
        }
    }
    assert_eq!(offsets.len(), 1 + 3 + 2);
    for (name, head) in [("b/b", 1), ("b/taken", 1)] {
        assert_eq!(ledger.head(&stream(name)).await.unwrap(), head, "{name}");
    }
    let report = ledger.verify().await.unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[tokio::test]
async fn no_append_of_a_batch_is_acknowledged_before_its_transaction_commits() {
    let (url, ledger) = one_batch_at_a_time().await;
    ledger
        .append(
            &stream("c/held"),
            ExpectedPosition::Exactly(0),
            vec![probe(0, 0)],
            Durability::Durable,
        )
        .await
        .unwrap();
    // Another session holds the head row of one stream of the batch.
    let holder = connect_url(&url).await;
    holder.batch_execute("BEGIN").await.unwrap();
    holder
        .execute(
            "SELECT 1 FROM ledgerwire_streams WHERE stream = 'c/held' FOR UPDATE",
            &[],
        )
        .await
        .unwrap();
    let first = started(
        &ledger,
        "c/first",
        0,
        vec![probe(1, 0)],
        Durability::Durable,
    );
    let mut batch = [
        started(&ledger, "c/held", 1, vec![probe(2, 0)], Durability::Durable),
        started(
            &ledger,
            "c/free",
            0,
            vec![probe(2, 1)],
            Durability::Buffered,
        ),
        started(&ledger, "c/new", 0, vec![probe(2, 2)], Durability::Durable),
    ];
    first.await.unwrap();
    // The batch's statement now waits for the held row.
    let observer = connect_url(&url).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let waiting: i64 = observer
            .query_one(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE datname = current_database() AND wait_event_type = 'Lock'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if waiting > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the batch never waited for the row"
        );
        tokio::task::yield_now().await;
    }
    for append in &mut batch {
        assert!(
            append.now_or_never().is_none(),
            "acknowledged before its commit"
        );
    }
    let visible: i64 = observer
        .query_one(
            "SELECT count(*) FROM ledgerwire_records WHERE stream IN ('c/free', 'c/new')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(visible, 0, "records of an uncommitted batch are visible");
    holder.batch_execute("ROLLBACK").await.unwrap();
    for append in batch {
        append.await.unwrap();
    }
    let visible: i64 = observer
        .query_one(
            "SELECT count(*) FROM ledgerwire_records WHERE stream IN ('c/held', 'c/free', 'c/new')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(visible, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_batching_on_one_database_keep_positions_and_the_global_order() {
    const WRITERS: u32 = 8;
    const APPENDS: u64 = 40;
    const SHARED: [&str; 3] = ["m/0", "m/1", "m/2"];
    let url = cluster::cluster().fresh_database().await;
    let stores = [open_ledger(&url).await, open_ledger(&url).await];
    let acknowledged = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut writers = Vec::new();
    for writer in 0..WRITERS {
        let ledger = stores[writer as usize % 2].clone();
        let acknowledged = acknowledged.clone();
        writers.push(tokio::spawn(async move {
            let own = stream(&format!("m/own/{writer}"));
            for n in 0..APPENDS {
                // Its own stream at the head it knows; a shared one at the
                // head it reads, again after losing a race.
                let key = stream(SHARED[(n as usize + writer as usize) % SHARED.len()]);
                let durability = if n % 2 == 0 {
                    Durability::Durable
                } else {
                    Durability::Buffered
                };
                let at = ExpectedPosition::Exactly(n);
                ledger
                    .append(&own, at, vec![probe(writer, n)], durability)
                    .await
                    .unwrap();
                loop {
                    let head = ledger.head(&key).await.unwrap();
                    let at = ExpectedPosition::Exactly(head);
                    let records = vec![probe(writer, n), probe(writer, n)];
                    match ledger.append(&key, at, records, durability).await {
                        Ok(_) => break,
                        Err(LedgerError::Conflict { .. }) => continue,
                        Err(error) => panic!("{error}"),
                    }
                }
                acknowledged.lock().unwrap().push((writer, n));
            }
        }));
    }
    for writer in writers {
        writer.await.unwrap();
    }
    let report = stores[0].verify().await.unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let acknowledged = acknowledged.lock().unwrap().len() as u64;
    assert_eq!(acknowledged, u64::from(WRITERS) * APPENDS);
    assert_eq!(report.records, acknowledged * 3, "each append once, whole");
    let mut seen = BTreeSet::new();
    for name in SHARED {
        for pair in stores[1]
            .read_to_end(&stream(name), 0)
            .await
            .unwrap()
            .chunks(2)
        {
            let probe: Probe = pair[0].decode_payload().unwrap();
            assert!(seen.insert((probe.writer, probe.n)), "appended twice");
            assert_eq!(pair[0].payload(), pair[1].payload(), "an append split");
        }
    }
}
