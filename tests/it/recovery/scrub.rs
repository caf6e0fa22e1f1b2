//! The live integrity scan (the scrubber) racing appends: it must refuse
//! no stream of a store that `log verify` finds clean.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ledgerwire::ledger::local::{LocalStore, OpenMode};
use ledgerwire::ledger::probe::Probe;
use ledgerwire::ledger::{Durability, ExpectedPosition, Payload};

use crate::support::{open, scratch, stream};

/// Streams filled before the scan, and records in each.
const STREAMS: u64 = 64;
const RECORDS_PER_STREAM: u64 = 1_000;
/// Most appends the racing writers make.
const MAX_RACING_APPENDS: u64 = 40_000;

fn probe(writer: u32, n: u64) -> ledgerwire::ledger::NewRecord {
    Probe {
        writer,
        n,
        filler: vec![0; 16],
    }
    .to_record()
}

#[tokio::test]
async fn the_scrubber_refuses_nothing_while_appends_race_it() {
    let dir = scratch();
    {
        let (ledger, _) = open(dir.path());
        for s in 0..STREAMS {
            let key = stream(&format!("m/{s:03}"));
            let records = (0..RECORDS_PER_STREAM).map(|n| probe(0, n)).collect();
            ledger
                .append(&key, ExpectedPosition::Any, records, Durability::Buffered)
                .await
                .unwrap();
        }
        ledger.flush().await.unwrap();
    }
    let ledger = LocalStore::open_scrubbing(dir.path(), OpenMode::MustExist).unwrap();
    // Appends alternate between a stream the scan has passed (it sorts
    // first) and one it has yet to reach (it sorts last), so a scan that
    // judged them would see later global positions without earlier ones.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (ledger, stop) = (ledger.clone(), Arc::clone(&stop));
        std::thread::spawn(move || {
            let (early, late) = (stream("a/early"), stream("z/late"));
            let mut appended = 0;
            while !stop.load(Ordering::Relaxed) && appended < MAX_RACING_APPENDS {
                for key in [&early, &late] {
                    ledger
                        .append_blocking(
                            key,
                            ExpectedPosition::Any,
                            vec![probe(1, appended)],
                            Durability::Buffered,
                        )
                        .unwrap();
                    appended += 1;
                }
            }
            appended
        })
    };
    let report = ledger.wait_for_scrub();
    stop.store(true, Ordering::Relaxed);
    let appended = writer.join().unwrap();
    assert!(appended > 0, "the writers raced the scan");
    assert!(report.is_clean(), "{:?}", report.problems);
    assert!(ledger.corrupt_streams().is_empty());
    assert!(report.records >= STREAMS * RECORDS_PER_STREAM);
    // And the whole store, checked at rest, agrees.
    let full = ledger.ledger().verify().await.unwrap();
    assert!(full.is_clean(), "{:?}", full.problems);
}
