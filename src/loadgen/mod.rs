//! `ledgerwire bench`: the load generator. It drives concurrent
//! pause-and-resume conversations (a turn that pauses on a plan, its
//! approval, the resumed segment to `done`) over the Studio's SSE routes
//! or as `harness-sdk` commands over Statewire, against a server on
//! loopback, and reports conversations per second, latency percentiles
//! and the server's CPU time per conversation (from `/proc/<pid>/stat`).
//!
//! Owns: the run (its bounds, its workers, its report) and, when asked,
//! the server it starts and stops. Must never: run unbounded (every run
//! stops starting conversations at its count or its time limit, whichever
//! comes first, and each conversation has a time limit of its own), hide a
//! failed or unfinished conversation (each is counted, the first few
//! quoted), or measure a server it cannot read the accounting of without
//! saying so.

mod args;
mod instructions;
mod series;
mod server;
mod statewire;
mod studio;
mod syncs;
mod tail;
mod transactions;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub use args::{BenchArgs, main};
pub use args::{DEFAULT_CONCURRENCY, DEFAULT_CONVERSATIONS, DEFAULT_MAX_DURATION_SECS};
pub use instructions::{
    CALLGRIND_CONTROL_TIMEOUT_MS, Callgrind, CountError, STARTUP_UNDER_CALLGRIND_TIMEOUT_MS,
    total_instructions,
};
pub use series::{Build, MAX_RUNS, Summary};
pub use server::{ServerProcess, cpu_seconds, peak_resident_bytes};
pub use syncs::{SLOW_SYNC_SECS, SyncHistogram, SyncReport};
use tail::Timed;
pub use tail::{TAIL_WINDOW_MS, TailBurst};
pub use transactions::{SESSIONS_END_TIMEOUT_MS, TransactionCounter};

/// Most conversations one run may drive.
pub const MAX_CONVERSATIONS: u64 = 1_000_000;
/// Most conversations in flight at once.
pub const MAX_CONCURRENCY: usize = 4_096;
/// Longest a run may last, in seconds.
pub const MAX_DURATION_SECS: u64 = 3_600;
/// Longest one request may take, its whole stream read, in milliseconds.
pub const REQUEST_TIMEOUT_MS: u64 = 30_000;
/// Longest one conversation may take, in milliseconds; past it, it counts
/// as failed.
pub const CONVERSATION_TIMEOUT_MS: u64 = 2 * REQUEST_TIMEOUT_MS;
/// Conversations run (and not counted) before the measured ones, per
/// worker: connections opened, caches warm.
pub const WARMUP_PER_WORKER: u64 = 2;

/// Which door the conversations go through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Door {
    /// `POST /api/studio/turn` and `/interrupt`, read as SSE.
    Studio,
    /// `harness-sdk` `turn` and `answer` commands over a WebSocket attach.
    Statewire,
}

/// Where the server is.
#[derive(Clone, Debug)]
pub enum Target {
    /// A running server at `url`; `pid`, if given, is read for its CPU time.
    Running { url: String, pid: Option<u32> },
    /// Start `binary serve` on a free loopback port over `data` (`None`: a
    /// scratch directory, removed after), with the minimal agent at zero
    /// work, and stop it after; under callgrind, counting its
    /// instructions, when `count_instructions`.
    Spawn {
        binary: PathBuf,
        data: Option<PathBuf>,
        /// A PostgreSQL store (its URL) in place of a directory.
        store: Option<String>,
        count_instructions: bool,
    },
}

/// A run's settings.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    pub target: Target,
    pub door: Door,
    /// Conversations measured (after the warm-up).
    pub conversations: u64,
    /// Conversations in flight at once.
    pub concurrency: usize,
    /// The run stops here even if conversations remain.
    pub max_duration: Duration,
    pub token: String,
}

/// What a run measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    pub door: &'static str,
    pub concurrency: usize,
    /// Conversations asked for (measured, after the warm-up).
    pub requested: u64,
    /// Conversations that completed (turn, pause, approve, done).
    pub conversations: u64,
    /// Conversations that failed (an error, a refusal, a timeout).
    pub failed: u64,
    /// Conversations never started: the time limit came first.
    pub not_started: u64,
    /// Warm-up conversations run (not measured).
    pub warmup: u64,
    /// Warm-up conversations (not measured) that failed.
    pub warmup_failed: u64,
    pub elapsed_secs: f64,
    pub conversations_per_sec: f64,
    /// Latency of one whole conversation, in milliseconds.
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    /// The server's CPU time (user + system) over the measured part, per
    /// conversation, in milliseconds; `None` without a pid to read.
    pub server_cpu_ms_per_conversation: Option<f64>,
    /// The server's CPU time over the measured part, in seconds (counted
    /// by the kernel in 10 ms ticks).
    pub server_cpu_secs: Option<f64>,
    /// The server's peak resident memory so far (`VmHWM`), in MiB.
    pub server_peak_rss_mib: Option<f64>,
    /// The instructions the server executed over the measured part, per
    /// conversation (callgrind: user space, every thread); `None` unless
    /// asked for (`--instructions`).
    pub server_instructions_per_conversation: Option<f64>,
    /// This load generator's own CPU time per conversation, in
    /// milliseconds: how much of the machine the client took.
    pub client_cpu_ms_per_conversation: Option<f64>,
    /// The server's journal syncs over the measured part, from its
    /// `/metrics`; `None` when its metrics are off or unreadable. A slow
    /// sync holds every conversation in flight, so a run's tail can be
    /// the disk's.
    pub server_syncs: Option<SyncReport>,
    /// How many of the conversations at or over the p99 ended within one
    /// short window (a pause of the whole server) rather than spread over
    /// the run; `None` when none completed.
    pub tail: Option<TailBurst>,
    /// On a PostgreSQL store the run started: the transactions the
    /// database committed from before the server started until after it
    /// stopped (`pg_stat_database.xact_commit`), per conversation run,
    /// warm-up included; `None` otherwise.
    pub database_transactions_per_conversation: Option<f64>,
    /// The first failures, as they were worded.
    pub errors: Vec<String>,
}

/// Failures kept in the report.
const REPORTED_ERRORS: usize = 5;

/// Why a run could not run.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("bad settings: {0}")]
    Settings(String),
    #[error("the server could not be started: {0}")]
    Server(String),
    #[error("the load client could not start: {0}")]
    Client(#[from] std::io::Error),
    #[error("the server's instructions could not be counted: {0}")]
    Count(#[from] CountError),
}

impl LoadConfig {
    /// Refuses settings outside the run's bounds.
    pub fn check(&self) -> Result<(), LoadError> {
        if self.conversations == 0 || self.conversations > MAX_CONVERSATIONS {
            return Err(LoadError::Settings(format!(
                "conversations must be 1 to {MAX_CONVERSATIONS}"
            )));
        }
        if self.concurrency == 0 || self.concurrency > MAX_CONCURRENCY {
            return Err(LoadError::Settings(format!(
                "concurrency must be 1 to {MAX_CONCURRENCY}"
            )));
        }
        if self.max_duration.is_zero() || self.max_duration.as_secs() > MAX_DURATION_SECS {
            return Err(LoadError::Settings(format!(
                "the time limit must be 1 to {MAX_DURATION_SECS} seconds"
            )));
        }
        if let Target::Running { url, .. } = &self.target
            && !is_loopback(url)
        {
            return Err(LoadError::Settings(format!(
                "--url {url}: the load generator drives a server on this machine only: http://127.0.0.1:PORT, http://[::1]:PORT or http://localhost:PORT"
            )));
        }
        Ok(())
    }
}

/// Whether `url` is plain HTTP to a loopback address.
fn is_loopback(url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(url) else {
        return false;
    };
    let host = url.host_str().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|address| address.is_loopback());
    url.scheme() == "http" && loopback
}

/// One conversation's client, for either door.
enum Client {
    Studio(studio::StudioClient),
    Statewire(statewire::StatewireClient),
}

impl Client {
    async fn conversation(&mut self, id: &str) -> Result<(), String> {
        match self {
            Client::Studio(client) => client.conversation(id).await,
            Client::Statewire(client) => client.conversation(id).await,
        }
    }
}

/// Runs the load and reports it.
pub async fn run(config: LoadConfig) -> Result<Report, LoadError> {
    config.check()?;
    let mut counter = None;
    let mut committed_before = None;
    let (base, pid, process, callgrind) = match &config.target {
        Target::Running { url, pid } => (url.trim_end_matches('/').to_owned(), *pid, None, None),
        Target::Spawn {
            binary,
            data,
            store,
            count_instructions,
        } => {
            let callgrind = count_instructions.then(Callgrind::new).transpose()?;
            if let Some(url) = store {
                counter = Some(
                    TransactionCounter::connect(url)
                        .await
                        .map_err(LoadError::Server)?,
                );
                committed_before = Some(counted(&counter).await?);
            }
            let place = match store {
                Some(url) => server::Place::Postgres(url),
                None => server::Place::Directory(data.as_deref()),
            };
            let process = ServerProcess::start(binary, place, callgrind.as_ref())
                .map_err(LoadError::Server)?;
            (
                format!("http://{}", process.addr),
                Some(process.pid()),
                Some(process),
                callgrind,
            )
        }
    };
    let counting = pid.zip(callgrind.as_ref());
    let report = drive(&config, &base, pid, counting).await;
    if let Some(process) = process {
        process.stop();
    }
    let mut report = report?;
    if let (Some(counter), Some(before)) = (&counter, committed_before) {
        let after = counter
            .committed_after_sessions_end()
            .await
            .map_err(LoadError::Server)?;
        let conversations = report.conversations + report.warmup;
        report.database_transactions_per_conversation =
            (conversations > 0).then(|| after.saturating_sub(before) as f64 / conversations as f64);
    }
    Ok(report)
}

/// The database's committed transactions, read through `counter`.
async fn counted(counter: &Option<TransactionCounter>) -> Result<u64, LoadError> {
    match counter {
        Some(counter) => counter.committed().await.map_err(LoadError::Server),
        None => Ok(0),
    }
}

/// Drives the warm-up and then the measured conversations; `counting`,
/// the server's pid and callgrind, counts its instructions over the
/// measured part.
async fn drive(
    config: &LoadConfig,
    base: &str,
    pid: Option<u32>,
    counting: Option<(u32, &Callgrind)>,
) -> Result<Report, LoadError> {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(config.concurrency)
        .build()
        .map_err(|error| LoadError::Settings(error.to_string()))?;
    let run = format!("{:x}", crate::ledger::record::now_ms());
    let timeout = Duration::from_millis(REQUEST_TIMEOUT_MS);
    let clients = (0..config.concurrency).map(|_| match config.door {
        Door::Studio => Client::Studio(studio::StudioClient::new(
            http.clone(),
            base,
            &config.token,
            timeout,
        )),
        Door::Statewire => Client::Statewire(statewire::StatewireClient::new(
            base,
            &config.token,
            timeout,
        )),
    });
    let mut clients: Vec<Client> = clients.collect();
    // One limit for the whole run, warm-up included.
    let deadline = Instant::now() + config.max_duration;
    // Warm-up: every worker completes a few conversations first
    // (connections opened, caches warm); counted apart.
    let warm =
        futures_util::future::join_all(clients.iter_mut().enumerate().map(|(worker, client)| {
            let run = &run;
            async move {
                let (mut ran, mut failed) = (0u64, 0u64);
                for n in 0..WARMUP_PER_WORKER {
                    if Instant::now() >= deadline {
                        break;
                    }
                    let id = format!("warm-{run}-{worker}-{n}");
                    ran += 1;
                    if bounded(client, &id).await.is_err() {
                        failed += 1;
                    }
                }
                (ran, failed)
            }
        }));
    let (warmup, warmup_failed) = warm
        .await
        .into_iter()
        .fold((0, 0), |(ran, failed), (r, f)| (ran + r, failed + f));

    let next = Arc::new(AtomicU64::new(0));
    let syncs_before = syncs::read(&http, base).await;
    let cpu_before = pid.and_then(cpu_seconds);
    let own_cpu_before = cpu_seconds(std::process::id());
    // Last before the measured part: the reads above cost the server
    // instructions too.
    if let Some((pid, callgrind)) = counting {
        callgrind.zero(pid).await?;
    }
    let started = Instant::now();
    let workers = clients.into_iter().enumerate().map(|(worker, mut client)| {
        let next = Arc::clone(&next);
        let run = run.clone();
        let total = config.conversations;
        tokio::spawn(async move {
            let mut timed = Vec::new();
            let mut errors = Vec::new();
            while Instant::now() < deadline {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= total {
                    break;
                }
                let began = Instant::now();
                match bounded(&mut client, &format!("load-{run}-{n}")).await {
                    Ok(()) => timed.push(Timed {
                        started: began.duration_since(started),
                        latency: began.elapsed(),
                    }),
                    Err(error) => errors.push(format!("worker {worker}: {error}")),
                }
            }
            (timed, errors)
        })
    });
    let results = futures_util::future::join_all(workers).await;
    let elapsed = started.elapsed();
    let instructions = match counting {
        Some((pid, callgrind)) => Some(callgrind.instructions_since_zero(pid).await?),
        None => None,
    };
    let cpu_after = pid.and_then(cpu_seconds);
    let own_cpu_after = cpu_seconds(std::process::id());
    let syncs_after = syncs::read(&http, base).await;
    let mut timed = Vec::new();
    let mut errors = Vec::new();
    let mut failed = 0u64;
    for result in results {
        match result {
            Ok((mut t, e)) => {
                timed.append(&mut t);
                failed += e.len() as u64;
                errors.extend(e);
            }
            Err(error) => {
                failed += 1;
                errors.push(format!("a worker failed: {error}"));
            }
        }
    }
    let mut latencies: Vec<Duration> = timed.iter().map(|t| t.latency).collect();
    latencies.sort();
    let done = latencies.len() as u64;
    let tail = nearest_rank(&latencies, 0.99).and_then(|p99| tail::busiest_window(&timed, p99));
    let per_conversation = |before: Option<f64>, after: Option<f64>| match (before, after) {
        (Some(before), Some(after)) if done > 0 => Some((after - before) * 1e3 / done as f64),
        _ => None,
    };
    errors.truncate(REPORTED_ERRORS);
    Ok(Report {
        door: match config.door {
            Door::Studio => "studio",
            Door::Statewire => "statewire",
        },
        concurrency: config.concurrency,
        requested: config.conversations,
        conversations: done,
        failed,
        not_started: config.conversations.saturating_sub(done + failed),
        warmup,
        warmup_failed,
        elapsed_secs: elapsed.as_secs_f64(),
        conversations_per_sec: done as f64 / elapsed.as_secs_f64().max(1e-9),
        p50_ms: percentile(&latencies, 0.50),
        p99_ms: percentile(&latencies, 0.99),
        p999_ms: percentile(&latencies, 0.999),
        max_ms: latencies.last().map_or(0.0, |d| d.as_secs_f64() * 1e3),
        server_cpu_ms_per_conversation: per_conversation(cpu_before, cpu_after),
        server_cpu_secs: cpu_before.zip(cpu_after).map(|(b, a)| a - b),
        server_peak_rss_mib: pid
            .and_then(peak_resident_bytes)
            .map(|bytes| bytes as f64 / f64::from(1u32 << 20)),
        server_instructions_per_conversation: instructions
            .filter(|_| done > 0)
            .map(|count| count as f64 / done as f64),
        client_cpu_ms_per_conversation: per_conversation(own_cpu_before, own_cpu_after),
        server_syncs: syncs_before
            .zip(syncs_after)
            .and_then(|(before, after)| before.until(&after)),
        tail,
        database_transactions_per_conversation: None,
        errors,
    })
}

/// One conversation within [`CONVERSATION_TIMEOUT_MS`].
async fn bounded(client: &mut Client, id: &str) -> Result<(), String> {
    let limit = Duration::from_millis(CONVERSATION_TIMEOUT_MS);
    match tokio::time::timeout(limit, client.conversation(id)).await {
        Ok(outcome) => outcome,
        Err(_) => Err(format!(
            "{id}: not finished within {CONVERSATION_TIMEOUT_MS} ms"
        )),
    }
}

/// The `q` quantile of sorted latencies, in milliseconds (nearest rank).
fn percentile(sorted: &[Duration], q: f64) -> f64 {
    nearest_rank(sorted, q).map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

/// The `q` quantile of sorted latencies (nearest rank); `None` if empty.
fn nearest_rank(sorted: &[Duration], q: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

impl Report {
    /// Conversations asked for that did not complete.
    pub fn incomplete(&self) -> u64 {
        self.requested.saturating_sub(self.conversations)
    }

    /// The server's syncs in words.
    pub fn syncs_text(&self) -> String {
        self.server_syncs.map_or_else(
            || "n/a (the server's /metrics is off or unreadable)".to_owned(),
            |syncs| syncs.sentence(),
        )
    }

    /// The database's transactions a conversation, in words.
    pub fn transactions_text(&self) -> String {
        self.database_transactions_per_conversation.map_or_else(
            || "n/a (counted on a PostgreSQL store the run starts: --spawn --store)".to_owned(),
            |per| {
                format!(
                    "{per:.2} a conversation (pg_stat_database.xact_commit from before the server started to after it stopped, over {} conversations, warm-up included)",
                    self.conversations + self.warmup
                )
            },
        )
    }

    /// Where the tail ended, in words.
    pub fn tail_text(&self) -> String {
        self.tail.map_or_else(
            || "n/a (nothing completed)".to_owned(),
            |tail| tail.sentence(),
        )
    }

    /// The report as people read it.
    pub fn human(&self) -> String {
        let ms =
            |value: Option<f64>| value.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.3} ms"));
        let server_cpu = match (self.server_cpu_ms_per_conversation, self.server_cpu_secs) {
            (Some(per), Some(total)) => format!("{per:.3} ms ({total:.2} s in all)"),
            _ => "n/a (no --server-pid, or /proc unreadable)".to_owned(),
        };
        let rss = self
            .server_peak_rss_mib
            .map_or_else(|| "n/a".to_owned(), |mib| format!("{mib:.1} MiB"));
        let instructions = self.server_instructions_per_conversation.map_or_else(
            || "n/a (counted with --spawn --instructions)".to_owned(),
            |count| {
                format!(
                    "{:.1} thousand per conversation (callgrind: user space, every thread; this run's latency and throughput are callgrind's, not the server's)",
                    count / 1e3
                )
            },
        );
        let mut text = format!(
            "door {door}, concurrency {c}: {n} of {requested} conversations completed, {failed} failed, {not_started} not started, in {secs:.2} s ({warm} warm-up failures)\n\
             conversations/s               {rate:.1}\n\
             latency per conversation      p50 {p50:.2} ms  p99 {p99:.2} ms  p999 {p999:.2} ms  max {max:.2} ms\n\
             server CPU per conversation   {server_cpu}\n\
             server peak memory            {rss}\n\
             server instructions           {instructions}\n\
             client CPU per conversation   {client_cpu}\n\
             journal syncs                 {syncs}\n\
             p99 tail                      {tail}\n\
             database transactions         {transactions}\n",
            door = self.door,
            c = self.concurrency,
            n = self.conversations,
            requested = self.requested,
            failed = self.failed,
            not_started = self.not_started,
            warm = self.warmup_failed,
            secs = self.elapsed_secs,
            rate = self.conversations_per_sec,
            p50 = self.p50_ms,
            p99 = self.p99_ms,
            p999 = self.p999_ms,
            max = self.max_ms,
            client_cpu = ms(self.client_cpu_ms_per_conversation),
            syncs = self.syncs_text(),
            tail = self.tail_text(),
            transactions = self.transactions_text(),
        );
        for error in &self.errors {
            text.push_str(&format!("error: {error}\n"));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_servers_are_driven() {
        for url in [
            "http://127.0.0.1:8080",
            "http://127.0.0.2:1/",
            "http://[::1]:8080",
            "http://localhost:8080",
        ] {
            assert!(is_loopback(url), "{url}");
        }
        for url in [
            "http://10.0.0.1:8080",
            "http://example.com",
            "https://127.0.0.1:8080",
            "http://localhost.example.com",
            "not a url",
        ] {
            assert!(!is_loopback(url), "{url}");
        }
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let sorted: Vec<Duration> = (1..=1000).map(Duration::from_millis).collect();
        assert_eq!(percentile(&sorted, 0.5), 500.0);
        assert_eq!(percentile(&sorted, 0.99), 990.0);
        assert_eq!(percentile(&sorted, 0.999), 999.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }
}
