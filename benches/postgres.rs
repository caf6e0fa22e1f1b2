//! Durable appends on the PostgreSQL store against `pgbench` on the same
//! throwaway cluster, in the same run: one writer and 64 writers, each
//! `ROUNDS` times with the two sides alternating who goes first.
//!
//! The baseline is `pgbench -n` running a one-row `INSERT` transaction
//! (a 300-byte `bytea` into a table with a `bigserial` key) with the same
//! number of clients, in its default protocol (each statement parsed),
//! and again with `-M prepared` (as the store sends its statements),
//! reported beside it; its rate excludes its connection time. Ours is
//! `Ledger::append` of one 300-byte probe record at the expected head,
//! durable, from tasks on a two-worker runtime (as the server's requests
//! append); each writer's first append opens its connection and is not
//! timed. Every run gets a fresh database on both sides.
//!
//! Printed per run: appends (or transactions) per second, the client's
//! and the machine's CPU per append; then the medians and their ratios.
//! Target: ≥ 0.8× the default protocol's.

// The allocator the `ledgerwire` binary ships with, so the figures are its.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[allow(dead_code)]
#[path = "../tests/it/postgres/cluster.rs"]
mod cluster;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ledgerwire::ledger::probe::Probe;
use ledgerwire::ledger::{Durability, ExpectedPosition, Ledger, Payload, StreamKey};

const ROUNDS: usize = 5;
const FILLER_BYTES: usize = 300;
/// (writers, appends per writer): about three seconds a run here.
const CASES: [(usize, u64); 2] = [(1, 8_000), (64, 500)];
const TARGET_RATIO: f64 = 0.8;

/// Who appends: the store, or pgbench in one of its protocols.
#[derive(Clone, Copy, PartialEq)]
enum Side {
    Ledgerwire,
    Pgbench,
    PgbenchPrepared,
}

impl Side {
    const ALL: [Side; 3] = [Side::Ledgerwire, Side::Pgbench, Side::PgbenchPrepared];

    fn name(self) -> &'static str {
        match self {
            Side::Ledgerwire => "ledgerwire",
            Side::Pgbench => "pgbench",
            Side::PgbenchPrepared => "pgbench -M prepared",
        }
    }
}

/// One side's run: operations per second, and the client's and the
/// whole machine's CPU per operation (the machine's holds the server's).
#[derive(Clone, Copy)]
struct Run {
    per_second: f64,
    cpu_per_op: Duration,
    machine_cpu_per_op: Duration,
}

fn main() {
    let cluster = cluster::cluster();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let insert = write_insert_script();
    let mut failed = false;
    for (writers, count) in CASES {
        let mut runs: Vec<(Side, Run)> = Vec::new();
        for round in 0..ROUNDS {
            // Each round starts with the next side: none always goes first.
            for turn in 0..Side::ALL.len() {
                let side = Side::ALL[(round + turn) % Side::ALL.len()];
                let run = match side {
                    Side::Ledgerwire => runtime.block_on(ledgerwire_run(cluster, writers, count)),
                    Side::Pgbench | Side::PgbenchPrepared => runtime.block_on(pgbench_run(
                        cluster,
                        &insert,
                        side == Side::PgbenchPrepared,
                        writers,
                        count,
                    )),
                };
                println!(
                    "{writers:>2} writers, round {}, {:<19}: {:>8.0}/s, CPU per append: client {:>5.1} µs, machine {:>5.1} µs",
                    round + 1,
                    side.name(),
                    run.per_second,
                    run.cpu_per_op.as_secs_f64() * 1e6,
                    run.machine_cpu_per_op.as_secs_f64() * 1e6
                );
                runs.push((side, run));
            }
        }
        let median_of = |wanted: Side| {
            let of_side: Vec<Run> = runs
                .iter()
                .filter(|(side, _)| *side == wanted)
                .map(|(_, run)| *run)
                .collect();
            median(&of_side)
        };
        let ours = median_of(Side::Ledgerwire);
        let (simple, prepared) = (median_of(Side::Pgbench), median_of(Side::PgbenchPrepared));
        let ratio = ours / simple;
        println!(
            "{writers:>2} writers: median {ours:.0}/s against pgbench {simple:.0}/s: {ratio:.2}x (target >= {TARGET_RATIO}x); against pgbench -M prepared {prepared:.0}/s: {:.2}x",
            ours / prepared
        );
        failed |= ratio < TARGET_RATIO;
    }
    let _ = std::fs::remove_file(&insert);
    if failed {
        println!("target not met");
    }
}

/// The baseline's transaction, in a file of the temporary directory.
fn write_insert_script() -> std::path::PathBuf {
    let body = "00".repeat(FILLER_BYTES);
    let script = format!(
        "INSERT INTO t (stream, pos, body) VALUES ('s' || :client_id, 0, '\\x{body}'::bytea);\n"
    );
    let path = std::env::temp_dir().join(format!("ledgerwire-pgbench-{}.sql", std::process::id()));
    std::fs::write(&path, script).expect("write the pgbench script");
    // pgbench runs as the cluster's user.
    let readable = std::os::unix::fs::PermissionsExt::from_mode(0o644);
    std::fs::set_permissions(&path, readable).expect("let pgbench read its script");
    path
}

async fn pgbench_run(
    cluster: &cluster::Cluster,
    script: &std::path::Path,
    prepared: bool,
    clients: usize,
    count: u64,
) -> Run {
    let url = cluster.fresh_database().await;
    let database = url.rsplit('/').next().expect("a database name").to_owned();
    let client = cluster::connect_url(&url).await;
    client
        .batch_execute(
            "CREATE TABLE t (id bigserial PRIMARY KEY, stream text, pos bigint, body bytea)",
        )
        .await
        .expect("create the pgbench table");
    let (cpu, machine) = (children_cpu(), machine_busy());
    let output = cluster
        .command("pgbench")
        .args(["-n", "-h", "127.0.0.1", "-U", "postgres"])
        .args(["-p", &cluster.port.to_string()])
        .args([
            "-c",
            &clients.to_string(),
            "-j",
            &clients.min(2).to_string(),
        ])
        .args(["-M", if prepared { "prepared" } else { "simple" }])
        .args(["-t", &count.to_string(), "-f"])
        .arg(script)
        .arg(&database)
        .output()
        .expect("run pgbench");
    let (cpu, machine) = (children_cpu() - cpu, machine_busy() - machine);
    let operations = (clients as u64 * count) as u32;
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "pgbench failed: {text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let per_second = text
        .lines()
        .find_map(|line| line.strip_prefix("tps = "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|tps| tps.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no tps in pgbench's output: {text}"));
    Run {
        per_second,
        cpu_per_op: cpu / operations,
        machine_cpu_per_op: machine / operations,
    }
}

async fn ledgerwire_run(cluster: &cluster::Cluster, writers: usize, count: u64) -> Run {
    let url = cluster.fresh_database().await;
    let ledger = cluster::open_ledger(&url).await;
    let opened = Arc::new(tokio::sync::Barrier::new(writers + 1));
    let tasks: Vec<_> = (0..writers)
        .map(|writer| {
            let (ledger, opened) = (ledger.clone(), opened.clone());
            tokio::spawn(async move { write(&ledger, writer, count, &opened).await })
        })
        .collect();
    opened.wait().await;
    let (started, cpu, machine) = (Instant::now(), process_cpu(), machine_busy());
    for task in tasks {
        task.await.expect("a writer");
    }
    let elapsed = started.elapsed();
    let (cpu, machine) = (process_cpu() - cpu, machine_busy() - machine);
    let timed = writers as u64 * (count - 1);
    Run {
        per_second: timed as f64 / elapsed.as_secs_f64(),
        cpu_per_op: cpu / timed as u32,
        machine_cpu_per_op: machine / timed as u32,
    }
}

/// One writer's appends to a stream of its own; waits at `opened` after
/// the first, which opened its connection.
async fn write(ledger: &Ledger, writer: usize, count: u64, opened: &tokio::sync::Barrier) {
    let stream = StreamKey::new(format!("probe/{writer}")).expect("a stream key");
    for position in 0..count {
        let record = Probe::new(writer as u32, position, FILLER_BYTES).to_record();
        let appended = ledger
            .append(
                &stream,
                ExpectedPosition::Exactly(position),
                vec![record],
                Durability::Durable,
            )
            .await;
        // Past the barrier before a failure panics, or the others wait on.
        if position == 0 {
            opened.wait().await;
        }
        appended.expect("a durable append");
    }
}

fn median(runs: &[Run]) -> f64 {
    let mut rates: Vec<f64> = runs.iter().map(|run| run.per_second).collect();
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}

fn rusage(who: libc::c_int) -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut usage);
        usage
    };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

fn process_cpu() -> Duration {
    rusage(libc::RUSAGE_SELF)
}

/// CPU time every core spent busy since boot (`/proc/stat`: user, nice,
/// system, irq and softirq).
fn machine_busy() -> Duration {
    let stat = std::fs::read_to_string("/proc/stat").expect("read /proc/stat");
    let ticks: u64 = stat
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("cpu "))
        .expect("the cpu line of /proc/stat")
        .split_whitespace()
        .enumerate()
        .filter(|(column, _)| [0, 1, 2, 5, 6].contains(column))
        .filter_map(|(_, value)| value.parse::<u64>().ok())
        .sum();
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_micros(ticks * 1_000_000 / per_second)
}

/// CPU of the waited-for children (pgbench under runuser).
fn children_cpu() -> Duration {
    rusage(libc::RUSAGE_CHILDREN)
}
