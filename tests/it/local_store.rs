//! What only the local store has, through its own API: its files (one
//! sled entry per append, records in the journal), damage to them found
//! by checksum and continuity, the directories it refuses, its offline
//! tools, the background scan, and group commit. The behaviour every
//! store shares is in `conformance`.

use std::future::Future;

use ledgerwire::ledger::local::testing::{parse_record_key, record_key, stream_prefix};
use ledgerwire::ledger::local::{LocalError, LocalStore, OpenMode, StoreProblem};
use ledgerwire::ledger::probe::{Probe, ProbeFold};
use ledgerwire::ledger::{
    Corruption, Durability, ExpectedPosition, FoldCache, LedgerError, LogStore, Payload,
};

use crate::support::{binary, open_local as open, scratch, stream, tear_record};

fn probe(n: u64) -> ledgerwire::ledger::NewRecord {
    Probe::new(0, n, 16).to_record()
}

/// Runs `future` to its end on a runtime of its own (the tests here call
/// the store's blocking API too, which must not run on a runtime's
/// worker).
fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(future)
}

/// The probe fold of `key`, from its first record.
fn fold(
    ledger: &LocalStore,
    key: &ledgerwire::ledger::StreamKey,
) -> Result<ledgerwire::ledger::probe::ProbeTally, LedgerError> {
    block_on(ledger.ledger().fold::<ProbeFold>(key)).map(|folded| folded.state)
}

/// [`append_probes`], each record its own sled entry: the indexer joins
/// the rounds it applies together, so each append waits until the one
/// before it is applied.
fn append_probes_apart(
    ledger: &LocalStore,
    key: &ledgerwire::ledger::StreamKey,
    count: u64,
    durability: Durability,
) {
    for n in 0..count {
        ledger.wait_until_indexed();
        append_probes_from(ledger, key, n, n + 1, durability);
    }
}

/// Appends probe records 0..count to a new stream, one append each.
fn append_probes(
    ledger: &LocalStore,
    key: &ledgerwire::ledger::StreamKey,
    count: u64,
    durability: Durability,
) {
    append_probes_from(ledger, key, 0, count, durability);
}

/// Probes `from..to`, one append each, the stream at `from`.
fn append_probes_from(
    ledger: &LocalStore,
    key: &ledgerwire::ledger::StreamKey,
    from: u64,
    to: u64,
    durability: Durability,
) {
    for n in from..to {
        ledger
            .append_blocking(
                key,
                ExpectedPosition::Exactly(n),
                vec![probe(n)],
                durability,
            )
            .unwrap();
    }
}

#[test]
fn a_snapshot_from_another_history_is_ignored() {
    let dir = scratch();
    let key = stream("t/history");
    {
        let (ledger, _) = open(dir.path());
        append_probes_apart(&ledger, &key, 10, Durability::Buffered);
        let cache = FoldCache::<ProbeFold>::with_limits(ledger.ledger(), 4, 4);
        block_on(cache.state(&key)).unwrap();
        ledger.flush_blocking().unwrap();
    }
    // Rewrite the stream's last record with other (valid) content, as a
    // restored backup or a bug might; the snapshot no longer matches.
    let different = {
        let db = crate::support::open_sled(dir.path());
        let log = db.open_tree("log").unwrap();
        let original = log.get(record_key(&key, 9)).unwrap().unwrap();
        let files = ledgerwire::ledger::local::testing::JournalFiles::new(dir.path());
        let original = ledgerwire::ledger::local::testing::envelopes(original, &files)
            .next()
            .unwrap()
            .unwrap();
        let record = ledgerwire::ledger::Record::decode(original, key.as_str(), 9).unwrap();
        let header = *record.header();
        let payload = Probe::new(7, 9, 16).to_record().payload;
        let bytes = ledgerwire::ledger::record::encode(&header, &key, &payload);
        log.insert(record_key(&key, 9), bytes).unwrap();
        db.flush().unwrap();
        payload
    };
    let (ledger, report) = open(dir.path());
    assert!(report.is_clean());
    let cache = FoldCache::<ProbeFold>::with_limits(ledger.ledger(), 4, 4);
    let state = block_on(cache.state(&key)).unwrap();
    assert!(
        state.state.writers.contains(&7),
        "folded from the log, not the stale snapshot"
    );
    assert_eq!(state.state, fold(&ledger, &key).unwrap());
    assert!(!different.is_empty());
}

#[test]
fn a_torn_record_is_reported_with_its_stream_and_position_and_never_folded() {
    let dir = scratch();
    let (bad, good) = (stream("t/torn"), stream("t/fine"));
    {
        let (ledger, _) = open(dir.path());
        append_probes(&ledger, &bad, 5, Durability::Buffered);
        ledger
            .append_blocking(
                &good,
                ExpectedPosition::Any,
                vec![probe(0)],
                Durability::Durable,
            )
            .unwrap();
    }
    tear_record(dir.path(), &bad, 3);

    let (ledger, report) = open(dir.path());
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    let problem = &report.problems[0];
    assert_eq!(problem.stream.as_deref(), Some("t/torn"));
    assert_eq!(problem.position, Some(3));
    assert!(matches!(problem.corruption, Corruption::Truncated { .. }));
    assert_eq!(ledger.corrupt_streams(), vec![("t/torn".to_owned(), 3)]);
    // The stream is refused whole: no read, no fold, no append.
    assert!(matches!(
        ledger.read_blocking(&bad, 0),
        Err(LocalError::Ledger(LedgerError::Corrupt { position: 3, .. }))
    ));
    assert!(matches!(
        fold(&ledger, &bad),
        Err(LedgerError::Corrupt { .. })
    ));
    let append = ledger.append_blocking(
        &bad,
        ExpectedPosition::Any,
        vec![probe(5)],
        Durability::Durable,
    );
    assert!(matches!(
        append,
        Err(LocalError::Ledger(LedgerError::Corrupt { .. }))
    ));
    // Other streams are served.
    assert_eq!(fold(&ledger, &good).unwrap().records, 1);
    drop(ledger);

    let output = binary()
        .args(["log", "verify", "--data"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}");
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stdout.contains("CORRUPT stream=t/torn position=3: the record is torn"),
        "{stdout}"
    );
    assert!(stdout.contains("FAILED"));
}

/// A run of one stream's records appended together is one sled entry
/// (`ledger::entry`); with nothing held in memory, a read from any
/// position, the head and verify see every record, and a record torn
/// inside an entry is named at its own position.
#[test]
fn a_run_is_one_sled_entry_and_reads_back_from_any_position() {
    let dir = scratch();
    let key = stream("t/entries");
    let append = |ledger: &LocalStore, from: u64, to: u64| {
        ledger
            .append_blocking(
                &key,
                ExpectedPosition::Exactly(from),
                (from..to).map(probe).collect(),
                Durability::Durable,
            )
            .unwrap();
    };
    {
        let (ledger, _) = open(dir.path());
        append(&ledger, 0, 5);
        // Indexed apart (the indexer joins the rounds of one batch): two
        // appends, two entries.
        ledger.wait_until_indexed();
        append(&ledger, 5, 8);
    }
    {
        let db = crate::support::open_sled(dir.path());
        let log = db.open_tree("log").unwrap();
        let keys: Vec<u64> = log
            .scan_prefix(stream_prefix(&key))
            .keys()
            .map(|k| {
                let k = k.unwrap();
                parse_record_key(&k).unwrap().1
            })
            .collect();
        assert_eq!(keys, vec![0, 5], "one entry per append");
    }
    {
        let (ledger, report) = open(dir.path());
        assert!(report.is_clean(), "{:?}", report.problems);
        assert_eq!(report.records, 8);
        assert_eq!(ledger.head_blocking(&key).unwrap(), 8);
        for from in 0..=8 {
            let positions: Vec<u64> = ledger
                .read_blocking(&key, from)
                .unwrap()
                .map(|record| record.unwrap().position())
                .collect();
            assert_eq!(positions, (from..8).collect::<Vec<_>>(), "from {from}");
        }
        append(&ledger, 8, 9);
        assert_eq!(fold(&ledger, &key).unwrap().records, 9);
    }
    tear_record(dir.path(), &key, 2);
    let (ledger, report) = open(dir.path());
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert_eq!(report.problems[0].position, Some(2));
    assert!(matches!(
        report.problems[0].corruption,
        Corruption::Truncated { .. }
    ));
    assert!(matches!(
        ledger.read_blocking(&key, 0),
        Err(LocalError::Ledger(LedgerError::Corrupt { position: 2, .. }))
    ));
}

#[test]
fn a_flipped_byte_is_caught_by_the_checksum() {
    let dir = scratch();
    let key = stream("t/flip");
    {
        let (ledger, _) = open(dir.path());
        ledger
            .append_blocking(
                &key,
                ExpectedPosition::Any,
                vec![probe(0)],
                Durability::Durable,
            )
            .unwrap();
    }
    // The record lives in the journal; sled's entry points at it.
    let (file, offset) = crate::support::record_in_journal(dir.path(), &key, 0);
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[offset as usize + 40] ^= 0x20;
    std::fs::write(&file, bytes).unwrap();
    let (_, report) = open(dir.path());
    assert!(matches!(
        report.problems[0].corruption,
        Corruption::Checksum { .. }
    ));
}

/// The index is derived: an entry missing from sled is no loss. The
/// open finds the stream's entries do not follow on, sets sled's files
/// aside and rebuilds them from the journal, and serves every record.
#[test]
fn a_missing_index_entry_is_rebuilt_from_the_journal() {
    let dir = scratch();
    let key = stream("t/gap");
    {
        let (ledger, _) = open(dir.path());
        append_probes_apart(&ledger, &key, 3, Durability::Durable);
    }
    {
        let db = crate::support::open_sled(dir.path());
        db.open_tree("log")
            .unwrap()
            .remove(record_key(&key, 1))
            .unwrap();
        db.flush().unwrap();
    }
    let (ledger, report) = open(dir.path());
    assert!(report.is_clean(), "{:?}", report.problems);
    let rebuilt = ledger.index_rebuilt().expect("the index was rebuilt");
    assert!(rebuilt.found.contains("t/gap"), "{}", rebuilt.found);
    assert_eq!(rebuilt.records, 3);
    let set_aside = rebuilt.set_aside.clone().expect("sled's files set aside");
    assert!(set_aside.join("db").exists(), "set aside, not deleted");
    let positions: Vec<u64> = ledger
        .read_blocking(&key, 0)
        .unwrap()
        .map(|record| record.unwrap().position())
        .collect();
    assert_eq!(positions, vec![0, 1, 2]);
}

fn store_problem(
    result: Result<(LocalStore, ledgerwire::ledger::VerifyReport), LocalError>,
) -> StoreProblem {
    match result {
        Err(LocalError::Store { problem, .. }) => problem,
        Err(other) => panic!("expected a store problem, got {other}"),
        Ok(_) => panic!("expected a store problem, the store opened"),
    }
}

#[test]
fn a_directory_that_is_not_a_store_is_refused_and_left_untouched() {
    let dir = scratch();
    std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
    let problem = store_problem(LocalStore::open(dir.path(), OpenMode::CreateIfMissing));
    assert!(matches!(problem, StoreProblem::Foreign));
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("notes.txt")]);

    let output = binary()
        .args(["log", "verify", "--data"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("not a ledgerwire store"), "{stderr}");
    assert!(
        stderr.contains(&dir.path().display().to_string()),
        "{stderr}"
    );
}

#[test]
fn a_missing_directory_is_not_created_by_the_log_tools() {
    let dir = scratch();
    let missing = dir.path().join("absent");
    let problem = store_problem(LocalStore::open(&missing, OpenMode::MustExist));
    assert!(matches!(problem, StoreProblem::Missing));
    assert!(!missing.exists());
}

#[test]
fn a_store_from_a_newer_format_is_refused() {
    let dir = scratch();
    drop(open(dir.path()));
    std::fs::write(
        dir.path().join("LEDGERWIRE"),
        "ledgerwire store\nformat = 99\n",
    )
    .unwrap();
    let problem = store_problem(LocalStore::open(dir.path(), OpenMode::MustExist));
    assert!(matches!(
        problem,
        StoreProblem::NewerFormat {
            found: 99,
            supported: 4
        }
    ));
    assert!(problem.to_string().contains("upgrade ledgerwire"));
}

#[test]
fn a_store_in_use_by_another_process_is_refused() {
    let dir = scratch();
    let (_ledger, _) = open(dir.path());
    let output = binary()
        .args(["log", "stats", "--data"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr.contains("in use by another ledgerwire process"),
        "{stderr}"
    );
}

#[test]
fn dump_prints_one_decoded_json_line_per_record() {
    let dir = scratch();
    {
        let (ledger, _) = open(dir.path());
        ledger
            .append_blocking(
                &stream("t/a"),
                ExpectedPosition::Any,
                vec![probe(0), probe(1)],
                Durability::Buffered,
            )
            .unwrap();
        ledger
            .append_blocking(
                &stream("t/b"),
                ExpectedPosition::Any,
                vec![probe(0)],
                Durability::Durable,
            )
            .unwrap();
    }
    let mut out = Vec::new();
    let ledger = block_on(
        ledgerwire::store::StoreChoice::Local(dir.path().to_path_buf())
            .open(ledgerwire::store::Opening::Existing),
    )
    .unwrap();
    block_on(ledgerwire::log_commands::dump(&ledger, None, 1, &mut out)).unwrap();
    let lines: Vec<serde_json::Value> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "global positions 1 and 2");
    assert_eq!(lines[0]["stream"], "t/a");
    assert_eq!(lines[0]["position"], 1);
    assert_eq!(lines[1]["stream"], "t/b");
    assert_eq!(lines[1]["kind_name"], "probe");
    assert_eq!(lines[1]["payload"]["n"], 0);

    let mut out = Vec::new();
    block_on(ledgerwire::log_commands::dump(
        &ledger,
        Some("t/a"),
        1,
        &mut out,
    ))
    .unwrap();
    assert_eq!(String::from_utf8(out).unwrap().lines().count(), 1);
    drop(ledger);

    let mut out = Vec::new();
    ledgerwire::log_commands::stats(dir.path(), &mut out).unwrap();
    let stats = String::from_utf8(out).unwrap();
    assert!(stats.contains("records          3"), "{stats}");
    assert!(stats.contains("streams          2"), "{stats}");
    assert!(
        stats
            .lines()
            .any(|l| l.starts_with("kind probe") && l.contains(" 3 records")),
        "{stats}"
    );
}

#[test]
fn the_background_scrub_finds_a_torn_record_and_refuses_its_stream() {
    let dir = scratch();
    let key = stream("t/scrub");
    {
        let (ledger, _) = open(dir.path());
        append_probes(&ledger, &key, 4, Durability::Buffered);
        ledger.flush_blocking().unwrap();
    }
    tear_record(dir.path(), &key, 2);
    let ledger = LocalStore::open_scrubbing(dir.path(), OpenMode::MustExist).unwrap();
    let report = ledger.wait_for_scrub();
    assert_eq!(report.problems.len(), 1);
    assert_eq!(report.problems[0].position, Some(2));
    assert_eq!(ledger.corrupt_streams(), vec![("t/scrub".to_owned(), 2)]);
    assert!(matches!(
        ledger.read_blocking(&key, 0),
        Err(LocalError::Ledger(LedgerError::Corrupt { position: 2, .. }))
    ));
}

#[test]
fn a_read_stops_at_a_bad_record_even_before_the_scrub_reaches_it() {
    let dir = scratch();
    let key = stream("t/read-check");
    {
        let (ledger, _) = open(dir.path());
        append_probes(&ledger, &key, 3, Durability::Buffered);
        ledger.flush_blocking().unwrap();
    }
    tear_record(dir.path(), &key, 1);
    let ledger = LocalStore::open_scrubbing(dir.path(), OpenMode::MustExist).unwrap();
    // Whatever the scrubber has done so far, a read never yields record 1.
    let read: Vec<_> = match ledger.read_blocking(&key, 0) {
        Ok(reader) => reader.collect(),
        Err(error) => vec![Err(error)],
    };
    assert!(
        read.iter()
            .all(|r| r.as_ref().map_or(true, |record| record.position() == 0))
    );
    assert!(matches!(
        read.last(),
        Some(Err(LocalError::Ledger(LedgerError::Corrupt {
            position: 1,
            ..
        })))
    ));
    assert_eq!(
        ledger.corrupt_streams(),
        vec![("t/read-check".to_owned(), 1)]
    );
}

#[test]
fn group_commit_shares_flushes_between_concurrent_durable_writers() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    const WRITERS: u32 = 16;
    const APPENDS: u64 = 20;
    std::thread::scope(|scope| {
        for writer in 0..WRITERS {
            let ledger = &ledger;
            scope.spawn(move || {
                let key = stream(&format!("t/group/{writer}"));
                for n in 0..APPENDS {
                    ledger
                        .append_blocking(
                            &key,
                            ExpectedPosition::Exactly(n),
                            vec![probe(n)],
                            Durability::Durable,
                        )
                        .unwrap();
                }
            });
        }
    });
    let stats = LogStore::stats(&ledger);
    assert_eq!(stats.records_appended, u64::from(WRITERS) * APPENDS);
    assert_eq!(stats.synced_appends, u64::from(WRITERS) * APPENDS);
    // One flush per append would be 320 flushes; shared flushes are fewer.
    assert!(stats.syncs < stats.synced_appends, "{stats:?}");
    assert!(
        stats.engine["records_unindexed"] <= stats.records_appended,
        "{stats:?}"
    );
    ledger.wait_until_indexed();
    assert_eq!(LogStore::stats(&ledger).engine["records_unindexed"], 0);
}

/// Copies of `CountedState` made so far (by `Clone`).
static STATE_COPIES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

#[derive(Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct CountedState {
    records: u64,
}

impl Clone for CountedState {
    fn clone(&self) -> Self {
        STATE_COPIES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Self {
            records: self.records,
        }
    }
}

struct CountedFold;

impl ledgerwire::ledger::Fold for CountedFold {
    type State = CountedState;
    const NAME: &'static str = "test-counted";
    const VERSION: u32 = 1;

    fn apply(
        state: &mut Self::State,
        _record: &ledgerwire::ledger::Record,
    ) -> Result<(), ledgerwire::ledger::FoldError> {
        state.records += 1;
        Ok(())
    }
}

#[test]
fn a_cached_state_is_folded_further_in_place_unless_a_caller_holds_it() {
    let dir = scratch();
    let (ledger, _) = open(dir.path());
    let key = stream("t/in-place");
    let cache = FoldCache::<CountedFold>::with_limits(ledger.ledger(), 0, 4);
    let append_one = |at: u64| {
        ledger
            .append_blocking(
                &key,
                ExpectedPosition::Exactly(at),
                vec![probe(at)],
                Durability::Buffered,
            )
            .unwrap();
    };
    for at in 0..20 {
        append_one(at);
        assert_eq!(block_on(cache.state(&key)).unwrap().state.records, at + 1);
    }
    assert_eq!(STATE_COPIES.load(std::sync::atomic::Ordering::SeqCst), 0);
    // A caller still holding the state it read: folding further copies it,
    // and the caller's copy stays as it was.
    let held = block_on(cache.state(&key)).unwrap();
    append_one(20);
    assert_eq!(block_on(cache.state(&key)).unwrap().state.records, 21);
    assert_eq!(held.state.records, 20);
    assert_eq!(STATE_COPIES.load(std::sync::atomic::Ordering::SeqCst), 1);
}

/// `serve` listens while the index is rebuilt at open: `/readyz` is 503
/// with its sentence and the Studio refuses as retryable until the store
/// is open (the test holds the rebuild at its first read of the journal,
/// a test-only gate: a FIFO);
/// then, once the integrity scan after it is done, `/readyz` is 200, and
/// every record is served.
#[test]
fn serve_answers_503_while_the_index_is_rebuilt_then_serves_every_record() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    use std::sync::mpsc;
    use std::time::Duration;

    use ledgerwire::ledger::local::testing::READ_GATE_ENV;
    use serde_json::{Value, json};

    use crate::support::{StudioClient, quick_studio, start_stoppable_studio};

    const TOKEN: &str = "operator-token-of-the-test";
    let dir = scratch();
    let data = dir.path().join("data");
    {
        let (store, _) = open(&data);
        block_on(async {
            let (addr, server) = start_stoppable_studio(store.ledger(), quick_studio()).await;
            let client = StudioClient::new(addr, "operator");
            for n in 0..3 {
                let body = json!({"kind": "turn.request", "conversation_id": format!("c{n}"), "message": "hello"});
                let frames = client.stream("/api/studio/turn", &body).await;
                assert_eq!(frames.last().expect("frames")["event"], "done");
            }
            server.stop().await;
        });
    }
    let expected = crate::support::ledgerwire_ok(&["log", "dump"], &data);
    assert!(expected.lines().count() > 10, "{expected}");
    // The index deleted: sled's data file and its settings.
    for file in ["db", "conf"] {
        std::fs::remove_file(data.join(file)).unwrap();
    }
    let gate = dir.path().join("gate");
    let path = std::ffi::CString::new(gate.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) on a NUL-terminated path the test owns.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0, "mkfifo");

    let child = binary()
        .args(["--log-format", "json", "serve", "--addr", "127.0.0.1:0"])
        .args(["--agent", "minimal", "--data"])
        .arg(&data)
        .env("RUST_LOG", "info")
        .env("LEDGERWIRE_ADMIN_TOKEN", TOKEN)
        .env(READ_GATE_ENV, &gate)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ledgerwire serve");
    let mut server = Killed(child);
    let child = &mut server.0;
    // Both outputs line by line, waited for with a bound.
    let (lines, said) = mpsc::channel::<(bool, String)>();
    for (is_log, output) in [
        (
            false,
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        ),
        (true, Box::new(child.stderr.take().unwrap())),
    ] {
        let lines = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(output).lines().map_while(Result::ok) {
                let _ = lines.send((is_log, line));
            }
        });
    }
    // The log line or printed line `wanted` picks, with what came before.
    let await_line = |wanted: &dyn Fn(bool, &Value, &str) -> bool| -> (Value, String) {
        loop {
            let (is_log, line) = said
                .recv_timeout(Duration::from_secs(120))
                .expect("the server said what the test waits for");
            let entry: Value = serde_json::from_str(&line).unwrap_or_default();
            if wanted(is_log, &entry, &line) {
                return (entry, line);
            }
        }
    };
    let message = |entry: &Value| entry["fields"]["message"].as_str().unwrap_or("").to_owned();
    // The address, and the rebuild saying it starts (then waiting at the
    // gate), in either order: the store opens while the server binds.
    let (mut addr, mut rebuilding): (Option<std::net::SocketAddr>, bool) = (None, false);
    while addr.is_none() || !rebuilding {
        let (entry, _) = await_line(&|is_log, entry, _| {
            let said = message(entry);
            is_log && (said.starts_with("listening") || said.contains("rebuilding it from"))
        });
        match entry["fields"]["addr"].as_str() {
            Some(bound) => addr = bound.parse().ok(),
            None => rebuilding = true,
        }
    }
    let addr = addr.expect("the address");
    let get = |route: &str| {
        let url = format!("http://{addr}{route}");
        block_on(async move {
            let response = reqwest::Client::new()
                .get(url)
                .bearer_auth(TOKEN)
                .send()
                .await
                .unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        })
    };
    let (status, body) = get("/readyz");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("still opening"), "{body}");
    block_on(async {
        let client = StudioClient::new(addr, "operator");
        let turn = json!({"kind": "turn.request", "conversation_id": "c9", "message": "hello"});
        let (status, refusal) = client.json("/api/studio/turn", &turn).await;
        assert_eq!(status, 409, "{refusal}");
        assert_eq!(refusal["code"], "transient_unavailable", "{refusal}");
    });
    // Let the rebuild go: the server says it serves once the store is
    // open, and the log when the integrity scan after it is done.
    drop(std::fs::OpenOptions::new().write(true).open(&gate).unwrap());
    let (mut printed, mut scanned) = (None, false);
    while printed.is_none() || !scanned {
        let (entry, line) =
            await_line(&|is_log, entry, _| !is_log || message(entry) == "integrity scan finished");
        if entry.is_null() {
            printed = Some(line);
        } else {
            scanned = true;
        }
    }
    assert_eq!(printed.unwrap(), format!("listening on {addr}"));
    let (status, body) = get("/readyz");
    assert_eq!(status, 200, "{body}");
    assert_eq!(get("/api/admin/log/dump"), (200, expected));
}

/// A child process killed when the test ends, however it ends.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A state the store decided on that does not hold when it is about to
/// write stops the process rather than writing (`local::invariant!`).
/// Through the test seam the open reads the newest journal file stale
/// (its last entry as zeros) while the index and the watermark are gone,
/// so it would go on writing where that entry lies; the first write
/// checks the bytes it would land on, finds them written, and aborts.
/// The journal is untouched, and an open without the fault serves every
/// record.
#[test]
fn a_failed_invariant_stops_the_process_before_it_writes() {
    use std::os::unix::process::ExitStatusExt;

    use ledgerwire::ledger::local::testing::{self, STALE_READ_ENV};

    let dir = scratch();
    crate::support::ledgerwire_ok(&["log", "probe", "--count", "5"], dir.path());
    let scans = testing::scan(dir.path()).unwrap();
    let newest = scans.last().unwrap();
    let last = newest.entries.last().unwrap().offset;
    let name = newest
        .path
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    for derived in ["db", "conf", "DURABLE"] {
        std::fs::remove_file(dir.path().join(derived)).unwrap();
    }
    let journal = || -> Vec<Vec<u8>> {
        testing::files(dir.path())
            .unwrap()
            .into_iter()
            .map(|(_, path)| std::fs::read(path).unwrap())
            .collect()
    };
    let before = journal();
    let output = binary()
        .args(["log", "probe", "--count", "1", "--data"])
        .arg(dir.path())
        .env(STALE_READ_ENV, format!("{name}:{last}"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.signal(), Some(libc::SIGABRT), "{stderr}");
    assert!(
        stderr.contains("an invariant of the local store failed"),
        "{stderr}"
    );
    assert!(stderr.contains("would overwrite"), "{stderr}");
    assert!(journal() == before, "the journal was written to");
    let (ledger, report) = open(dir.path());
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!(ledger.head_blocking(&stream("probe/0")).unwrap(), 5);
}
