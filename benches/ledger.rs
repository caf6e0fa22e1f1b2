//! Ledger benchmarks, each against a baseline measured in the same run:
//! (a) one writer, durable appends of 300-byte records through the store
//!     contract, against a raw `write` + `fdatasync` loop on the same
//!     disk, appending and into a preallocated file;
//! (b) 64 concurrent durable writers (group commit) as tasks on a
//!     two-worker runtime (how the server's requests append), printing
//!     the process's CPU and the bytes it handed to `write` calls per
//!     append;
//! (c) fold throughput over a 1M-record stream;
//! (d) cold open + fold of a 1M-record store, with and without snapshots.
//! Stores live under Cargo's target tmpdir, on the disk the data would use.

// The allocator the `ledgerwire` binary ships with, so the figures are its.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "support/cpu.rs"]
mod cpu;
use cpu::process_cpu;

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ledgerwire::ledger::LogStore;
use ledgerwire::ledger::local::{LocalStore, OpenMode};
use ledgerwire::ledger::probe::{Probe, ProbeFold};
use ledgerwire::ledger::{
    Durability, ExpectedPosition, Fold, FoldCache, FoldError, Ledger, NewRecord, Payload, Record,
    StreamKey,
};

const FILLER_BYTES: usize = 300;
/// Size of the preallocated raw baseline's file, in bytes (writes wrap).
const PREALLOCATED_BYTES: usize = 64 * 1024 * 1024;
const BIG_STREAM_RECORDS: u64 = 1_000_000;
const CONCURRENT_WRITERS: u64 = 64;

/// The cheapest fold: it measures the ledger's read-check-apply path, not
/// payload decoding (which `ProbeFold` adds).
struct CountFold;

impl Fold for CountFold {
    type State = (u64, u64);
    const NAME: &'static str = "bench-count";
    const VERSION: u32 = 1;

    fn apply(state: &mut (u64, u64), record: &Record) -> Result<(), FoldError> {
        state.0 += 1;
        state.1 += record.payload().len() as u64;
        Ok(())
    }
}

/// Installs the metrics recorder `serve` installs, so that an append
/// records its metrics as the server's do (into handles registered once).
/// Without a recorder every append registered its metrics afresh, as the
/// `metrics` macros do: work the server never does, about 3% of (b)'s
/// CPU an append (5.35–5.57 against 5.17–5.33 µs, docs/performance.md).
fn record_metrics_as_the_server_does() {
    ledgerwire::telemetry::install().expect("the metrics recorder");
}

fn scratch_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch directory")
}

/// The local store itself: (a), (b) and the fills call it directly, as
/// the engine it is (its blocking appends and counters).
fn open(path: &Path) -> LocalStore {
    LocalStore::open(path, OpenMode::CreateIfMissing)
        .expect("open ledger")
        .0
}

/// Opens as `serve` does: the integrity scan runs in the background.
fn open_serving(path: &Path) -> Ledger {
    ledgerwire::ledger::local::open_scrubbing(path, OpenMode::MustExist).expect("open ledger")
}

fn stream(name: &str) -> StreamKey {
    StreamKey::new(name).expect("stream key")
}

fn durable_one_writer(c: &mut Criterion) {
    record_metrics_as_the_server_does();
    let mut group = c.benchmark_group("a_durable_append_one_writer");
    group.throughput(Throughput::Elements(1));
    group.measurement_time(Duration::from_secs(8));

    let raw_dir = scratch_dir();
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(raw_dir.path().join("raw.log"))
        .expect("raw file");
    // The same number of bytes a ledger record of this size occupies.
    let envelope_len = envelope_bytes("bench/one".len());
    let bytes = vec![7u8; envelope_len];
    group.bench_function("raw_write_fdatasync", |b| {
        b.iter(|| {
            file.write_all(&bytes).expect("write");
            file.sync_data().expect("fdatasync");
        })
    });

    // The best the disk does for such a loop: the same writes into a
    // file whose blocks and size are allocated ahead (as the journal's
    // are), so a sync flushes data only, never a new size.
    let mut preallocated = PreallocatedLoop::new(raw_dir.path(), envelope_len);
    group.bench_function("raw_write_fdatasync_preallocated", |b| {
        b.iter(|| preallocated.write_and_sync())
    });

    let dir = scratch_dir();
    let ledger = open(dir.path());
    let mut one = LoneWriter::new();
    group.bench_function("ledger_durable_append", |b| b.iter(|| one.append(&ledger)));
    group.finish();
}

fn durable_many_writers(c: &mut Criterion) {
    record_metrics_as_the_server_does();
    let mut group = c.benchmark_group("b_durable_append_64_writers");
    group.throughput(Throughput::Elements(1));
    group.measurement_time(Duration::from_secs(8));
    let dir = scratch_dir();
    let ledger = open(dir.path());
    let (keys, payloads) = concurrent_writers();
    // The same load as the server makes it: 64 tasks on a runtime with
    // one worker per core, each awaiting its append.
    let runtime = two_worker_runtime();
    let handle = ledger.ledger();
    // The process's CPU, the bytes it handed to `write` calls (if the
    // kernel reports them) and the appends, over every iteration.
    let cpu = std::cell::Cell::new((Duration::ZERO, Some(0u64), 0u64));
    group.bench_function("ledger_durable_append_tasks", |b| {
        b.iter_custom(|iters| {
            let per_writer = iters.div_ceil(CONCURRENT_WRITERS);
            let cpu_before = process_cpu();
            let written_before = bytes_handed_to_write();
            let elapsed = tasks_burst(&runtime, &handle, &keys, &payloads, per_writer);
            let (spent, written, appends) = cpu.get();
            let written_now = bytes_handed_to_write()
                .zip(written_before)
                .map(|(now, before)| now.saturating_sub(before));
            cpu.set((
                spent + process_cpu().saturating_sub(cpu_before),
                written.zip(written_now).map(|(sum, more)| sum + more),
                appends + per_writer * CONCURRENT_WRITERS,
            ));
            elapsed.mul_f64(iters as f64 / (per_writer * CONCURRENT_WRITERS) as f64)
        })
    });
    group.finish();
    let (spent, written, appends) = cpu.get();
    let written = written.map_or("not reported by this kernel".to_owned(), |bytes| {
        format!("{:.0}", bytes as f64 / appends.max(1) as f64)
    });
    eprintln!(
        "64 writer tasks: {:.2} us of the process's CPU an append (user and system, all threads); \
         bytes handed to write calls an append (journal, sled, spare): {written}, of which the \
         journal takes about {}",
        spent.as_secs_f64() * 1e6 / appends.max(1) as f64,
        // The envelope and its length in the journal entry.
        envelope_bytes("bench/w00".len()) + 4,
    );
    let stats = LogStore::stats(&ledger);
    let engine = |name: &str| stats.engine.get(name).copied().unwrap_or(0);
    eprintln!(
        "64 writers: {} durable appends in {} flushes, {} writer rounds and {} index batches: \
         {:.1} appends per flush, {:.1} per round, {:.1} rounds per index batch, \
         {:.1} records per sled insert; a sync took {:.0} us on average",
        stats.synced_appends,
        stats.syncs,
        engine("rounds"),
        engine("index_batches"),
        stats.synced_appends as f64 / stats.syncs.max(1) as f64,
        stats.synced_appends as f64 / engine("rounds").max(1) as f64,
        engine("rounds") as f64 / engine("index_batches").max(1) as f64,
        stats.records_appended as f64 / engine("index_entries").max(1) as f64,
        stats.sync_micros as f64 / stats.syncs.max(1) as f64,
    );
}

/// The raw baseline of (a): `write` + `fdatasync` of one envelope's bytes
/// at a time into a file whose blocks were written and synced ahead, the
/// writes wrapping at its end.
struct PreallocatedLoop {
    file: std::fs::File,
    bytes: Vec<u8>,
    offset: usize,
}

impl PreallocatedLoop {
    fn new(dir: &Path, envelope_len: usize) -> Self {
        let mut file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(dir.join("preallocated.log"))
            .expect("raw file");
        file.write_all(&vec![0u8; PREALLOCATED_BYTES])
            .and_then(|()| file.sync_all())
            .expect("preallocate");
        Self {
            file,
            bytes: vec![7u8; envelope_len],
            offset: 0,
        }
    }

    fn write_and_sync(&mut self) {
        if self.offset + self.bytes.len() > PREALLOCATED_BYTES {
            self.offset = 0;
        }
        self.file
            .write_all_at(&self.bytes, self.offset as u64)
            .expect("write");
        self.offset += self.bytes.len();
        self.file.sync_data().expect("fdatasync");
    }
}

/// One writer appending probe records to its own stream through the
/// store contract, as every caller of the ledger does, each durable
/// before the next.
struct LoneWriter {
    key: StreamKey,
    position: Option<u64>,
    runtime: tokio::runtime::Runtime,
}

impl LoneWriter {
    fn new() -> Self {
        Self {
            key: stream("bench/one"),
            position: None,
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime"),
        }
    }

    fn append(&mut self, ledger: &LocalStore) {
        let position = match self.position {
            Some(position) => position,
            None => ledger.head_blocking(&self.key).expect("head"),
        };
        let record = Probe::new(0, position, FILLER_BYTES).to_record();
        let outcome = self
            .runtime
            .block_on(LogStore::append(
                ledger,
                &self.key,
                ExpectedPosition::Exactly(position),
                vec![record],
                Durability::Durable,
            ))
            .expect("append");
        self.position = Some(outcome.next_position);
    }
}

/// A runtime with one worker per core of the development machine, as
/// the server's.
fn two_worker_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// The 64 writers' streams and records. Each record is encoded once: a
/// caller hands the ledger an encoded payload, and encoding it (a probe's
/// filler goes through serde byte by byte) is the caller's work, not the
/// ledger's. Encoded in the loop, it took about a tenth of (b)'s CPU.
fn concurrent_writers() -> (Vec<StreamKey>, Vec<NewRecord>) {
    (0..CONCURRENT_WRITERS)
        .map(|w| {
            (
                stream(&format!("bench/w{w}")),
                Probe::new(w as u32, 0, FILLER_BYTES).to_record(),
            )
        })
        .unzip()
}

/// One task per key on `runtime`, each making `per_writer` durable
/// appends of its payload, one after the other; the time until all are
/// done.
fn tasks_burst(
    runtime: &tokio::runtime::Runtime,
    ledger: &Ledger,
    keys: &[StreamKey],
    payloads: &[NewRecord],
    per_writer: u64,
) -> Duration {
    let start = Instant::now();
    runtime.block_on(async {
        let tasks: Vec<_> = keys
            .iter()
            .zip(payloads)
            .map(|(key, payload)| {
                let (ledger, key, payload) = (ledger.clone(), key.clone(), payload.clone());
                tokio::spawn(async move {
                    for _ in 0..per_writer {
                        ledger
                            .append(
                                &key,
                                ExpectedPosition::Any,
                                vec![payload.clone()],
                                Durability::Durable,
                            )
                            .await
                            .expect("append");
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("writer task");
        }
    });
    start.elapsed()
}

/// Rounds of the paired measurements below.
const PAIRED_ROUNDS: u32 = 20;
/// Appends (or raw syncs) each side makes in a round of paired (a), and
/// the lone writer in a round of paired (b).
const PAIRED_LONE_APPENDS: u32 = 200;
/// Appends each of the 64 tasks makes in a round of paired (b).
const PAIRED_TASK_APPENDS: u64 = 400;

/// (a) and (b) measured in pairs, on one store: each round times the 64
/// tasks (and the indexer's catching up after them), then the raw loop
/// and the lone writer, the two in turn first. A drift of the disk or the
/// host (a sync here swings between about 100 and 270 µs from one minute
/// to the next) then falls on both sides of a ratio alike, where
/// criterion's groups above time each side over 8 s apart. Printed, not
/// timed by criterion: whole-run ratios and the range of the rounds' own.
fn paired_ratios(_: &mut Criterion) {
    record_metrics_as_the_server_does();
    let dir = scratch_dir();
    let ledger = open(dir.path());
    let mut raw = PreallocatedLoop::new(dir.path(), envelope_bytes("bench/one".len()));
    let mut one = LoneWriter::new();
    let (keys, payloads) = concurrent_writers();
    let runtime = two_worker_runtime();
    let handle = ledger.ledger();
    // Warm-up: the store's first file, the runtime's threads.
    tasks_burst(&runtime, &handle, &keys, &payloads, PAIRED_TASK_APPENDS);
    one.append(&ledger);
    let (mut totals, mut a_rounds, mut b_rounds) = ([Duration::ZERO; 3], vec![], vec![]);
    for round in 0..PAIRED_ROUNDS {
        // The indexer's backlog is charged to the burst that made it, so
        // the lone sides that follow find the store as quiet as the burst
        // found it.
        let start = Instant::now();
        tasks_burst(&runtime, &handle, &keys, &payloads, PAIRED_TASK_APPENDS);
        ledger.wait_until_indexed();
        let tasks_each = start.elapsed() / (PAIRED_TASK_APPENDS * CONCURRENT_WRITERS) as u32;
        // Which of the two goes first alternates, so neither always meets
        // what is left of the burst's background work.
        let (raw_each, one_each) = if round % 2 == 0 {
            let raw_each = each_of(PAIRED_LONE_APPENDS, || raw.write_and_sync());
            (
                raw_each,
                each_of(PAIRED_LONE_APPENDS, || one.append(&ledger)),
            )
        } else {
            let one_each = each_of(PAIRED_LONE_APPENDS, || one.append(&ledger));
            (
                each_of(PAIRED_LONE_APPENDS, || raw.write_and_sync()),
                one_each,
            )
        };
        for (total, each) in totals.iter_mut().zip([raw_each, one_each, tasks_each]) {
            *total += each;
        }
        a_rounds.push(raw_each.as_secs_f64() / one_each.as_secs_f64());
        b_rounds.push(one_each.as_secs_f64() / tasks_each.as_secs_f64());
    }
    let [raw_total, one_total, tasks_total] = totals.map(|t| t.as_secs_f64());
    let range = |rounds: &[f64]| {
        let (low, high) = rounds
            .iter()
            .fold((f64::MAX, f64::MIN), |(l, h), &r| (l.min(r), h.max(r)));
        format!("{low:.2}-{high:.2}")
    };
    let per = |total: f64| total * 1e6 / f64::from(PAIRED_ROUNDS);
    eprintln!(
        "paired, {PAIRED_ROUNDS} rounds: raw (preallocated) {:.1} us, one writer {:.1} us, \
         64 tasks {:.2} us an append; paired (a) {:.2}x (rounds {}), paired (b) {:.1}x (rounds {})",
        per(raw_total),
        per(one_total),
        per(tasks_total),
        raw_total / one_total,
        range(&a_rounds),
        one_total / tasks_total,
        range(&b_rounds),
    );
}

/// The mean time of `n` calls of `step`.
fn each_of(n: u32, mut step: impl FnMut()) -> Duration {
    let start = Instant::now();
    for _ in 0..n {
        step();
    }
    start.elapsed() / n
}

/// Bytes of a probe record's envelope on a stream whose key has
/// `key_len` bytes: the header (34 bytes, the key's length included),
/// the key, the payload and the CRC (4 bytes).
fn envelope_bytes(key_len: usize) -> usize {
    34 + key_len + Probe::new(0, 0, FILLER_BYTES).to_record().payload.len() + 4
}

/// Bytes the process has handed to `write` calls so far (`wchar` of
/// /proc/self/io: every thread, every file, whether or not they reached
/// the disk yet); `None` where the kernel does not report it.
fn bytes_handed_to_write() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines()
        .find_map(|line| line.strip_prefix("wchar:"))
        .and_then(|n| n.trim().parse().ok())
}

/// Fills one stream with `records` probe records, buffered in batches.
fn fill(ledger: &LocalStore, key: &StreamKey, records: u64) {
    let mut position = ledger.head_blocking(key).expect("head");
    while position < records {
        let batch: Vec<_> = (position..(position + 1000).min(records))
            .map(|n| Probe::new(0, n, FILLER_BYTES).to_record())
            .collect();
        let outcome = ledger
            .append_blocking(
                key,
                ExpectedPosition::Exactly(position),
                batch,
                Durability::Buffered,
            )
            .expect("fill");
        position = outcome.next_position;
    }
    ledger.flush_blocking().expect("flush");
}

fn fold_and_cold_open(c: &mut Criterion) {
    let dir = scratch_dir();
    let key = stream("bench/big");
    let runtime = two_worker_runtime();
    {
        let store = open(dir.path());
        fill(&store, &key, BIG_STREAM_RECORDS);
        let ledger = store.ledger();
        let mut group = c.benchmark_group("c_fold_1m_records");
        group.throughput(Throughput::Elements(BIG_STREAM_RECORDS));
        group.sample_size(10);
        group.bench_function("count_fold", |b| {
            b.iter(|| {
                let folded = runtime
                    .block_on(ledger.fold::<CountFold>(&key))
                    .expect("fold");
                assert_eq!(folded.state.0, BIG_STREAM_RECORDS);
            })
        });
        group.bench_function("probe_fold_decoding_payloads", |b| {
            b.iter(|| {
                let folded = runtime
                    .block_on(ledger.fold::<ProbeFold>(&key))
                    .expect("fold");
                assert_eq!(folded.state.records, BIG_STREAM_RECORDS);
            })
        });
        group.finish();
        runtime
            .block_on(ledger.drop_snapshots())
            .expect("drop snapshots");
    }

    let mut group = c.benchmark_group("d_cold_open_and_fold_1m_records");
    group.sample_size(10);
    group.bench_function("without_snapshots", |b| {
        b.iter(|| {
            let ledger = open_serving(dir.path());
            let cache = FoldCache::<ProbeFold>::with_limits(ledger, 0, 16);
            let state = runtime.block_on(cache.state(&key)).expect("state");
            assert_eq!(state.position, BIG_STREAM_RECORDS);
        })
    });
    {
        // Write the snapshot once, then time opens that use it.
        let cache = FoldCache::<ProbeFold>::new(open(dir.path()).ledger());
        runtime.block_on(cache.state(&key)).expect("state");
    }
    group.bench_function("with_snapshots", |b| {
        b.iter(|| {
            let ledger = open_serving(dir.path());
            let cache = FoldCache::<ProbeFold>::new(ledger);
            let state = runtime.block_on(cache.state(&key)).expect("state");
            assert_eq!(state.position, BIG_STREAM_RECORDS);
        })
    });
    // For reference: an open that scans every record before returning
    // (what `ledgerwire log verify` does).
    group.bench_function("open_with_full_verify", |b| b.iter(|| open(dir.path())));
    group.finish();
}

criterion_group!(
    benches,
    durable_one_writer,
    durable_many_writers,
    paired_ratios,
    fold_and_cold_open
);
criterion_main!(benches);
