//! `ledgerwire bench`: the load generator. It drives concurrent
//! pause-and-resume conversations (a turn that pauses on a plan, its
//! approval, the resumed segment to `done`) over the Studio's SSE routes
//! or as `harness-sdk` commands over Statewire, against a server on
//! loopback, and reports conversations per second, latency percentiles
//! and the server's CPU time per conversation (from `/proc/<pid>/stat`).
//!
//! Owns: the run (its bounds, its workers, its report) and, when asked,
//! the server it starts and stops. Must never: run unbounded (every run
//! stops at its conversation count or its time limit, whichever is first),
//! or measure a server it cannot read the accounting of without saying so.

mod args;
mod server;
mod statewire;
mod studio;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub use args::{BenchArgs, main};
pub use server::{ServerProcess, cpu_seconds};

/// Most conversations one run may drive.
pub const MAX_CONVERSATIONS: u64 = 1_000_000;
/// Most conversations in flight at once.
pub const MAX_CONCURRENCY: usize = 4_096;
/// Longest a run may last, in seconds.
pub const MAX_DURATION_SECS: u64 = 3_600;
/// Longest one request may take, in milliseconds.
pub const REQUEST_TIMEOUT_MS: u64 = 30_000;
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
    /// Start `binary serve` on a free loopback port over `data` (a new
    /// directory), with the minimal agent at zero work, and stop it after.
    Spawn { binary: PathBuf, data: PathBuf },
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
    /// Conversations that completed (turn, pause, approve, done).
    pub conversations: u64,
    /// Conversations that failed (an error, a refusal, a timeout).
    pub failed: u64,
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
}

impl LoadConfig {
    fn check(&self) -> Result<(), LoadError> {
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
        Ok(())
    }
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
    let (base, pid, process) = match &config.target {
        Target::Running { url, pid } => (url.trim_end_matches('/').to_owned(), *pid, None),
        Target::Spawn { binary, data } => {
            let process = ServerProcess::start(binary, data).map_err(LoadError::Server)?;
            (
                format!("http://{}", process.addr),
                Some(process.pid()),
                Some(process),
            )
        }
    };
    let report = drive(&config, &base, pid).await;
    if let Some(process) = process {
        process.stop();
    }
    report
}

async fn drive(config: &LoadConfig, base: &str, pid: Option<u32>) -> Result<Report, LoadError> {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(config.concurrency)
        .build()
        .map_err(|error| LoadError::Settings(error.to_string()))?;
    let run = format!("{:x}", crate::studio::service::now_ms());
    let timeout = Duration::from_millis(REQUEST_TIMEOUT_MS);
    let mut clients = Vec::with_capacity(config.concurrency);
    for worker in 0..config.concurrency {
        clients.push(match config.door {
            Door::Studio => Client::Studio(studio::StudioClient::new(
                http.clone(),
                base,
                &config.token,
                timeout,
            )),
            Door::Statewire => {
                Client::Statewire(statewire::StatewireClient::new(base, &config.token, timeout))
            }
        });
        let _ = worker;
    }
    // Warm-up: every worker completes a few conversations first.
    let warm = futures_util::future::join_all(clients.iter_mut().enumerate().map(
        |(worker, client)| {
            let run = &run;
            async move {
                for n in 0..WARMUP_PER_WORKER {
                    let _ = client.conversation(&format!("warm-{run}-{worker}-{n}")).await;
                }
            }
        },
    ));
    warm.await;

    let next = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + config.max_duration;
    let cpu_before = pid.and_then(cpu_seconds);
    let started = Instant::now();
    let workers = clients.into_iter().enumerate().map(|(worker, mut client)| {
        let next = Arc::clone(&next);
        let run = run.clone();
        let total = config.conversations;
        tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut errors = Vec::new();
            while Instant::now() < deadline {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= total {
                    break;
                }
                let began = Instant::now();
                match client.conversation(&format!("load-{run}-{n}")).await {
                    Ok(()) => latencies.push(began.elapsed()),
                    Err(error) => errors.push(format!("worker {worker}: {error}")),
                }
            }
            (latencies, errors)
        })
    });
    let results = futures_util::future::join_all(workers).await;
    let elapsed = started.elapsed();
    let cpu_after = pid.and_then(cpu_seconds);
    let mut latencies = Vec::new();
    let mut errors = Vec::new();
    for result in results {
        match result {
            Ok((mut l, mut e)) => {
                latencies.append(&mut l);
                errors.append(&mut e);
            }
            Err(error) => errors.push(format!("a worker failed: {error}")),
        }
    }
    latencies.sort();
    let done = latencies.len() as u64;
    let cpu = match (cpu_before, cpu_after) {
        (Some(before), Some(after)) if done > 0 => Some((after - before) * 1e3 / done as f64),
        _ => None,
    };
    let failed = errors.len() as u64;
    errors.truncate(REPORTED_ERRORS);
    Ok(Report {
        door: match config.door {
            Door::Studio => "studio",
            Door::Statewire => "statewire",
        },
        concurrency: config.concurrency,
        conversations: done,
        failed,
        elapsed_secs: elapsed.as_secs_f64(),
        conversations_per_sec: done as f64 / elapsed.as_secs_f64().max(1e-9),
        p50_ms: percentile(&latencies, 0.50),
        p99_ms: percentile(&latencies, 0.99),
        p999_ms: percentile(&latencies, 0.999),
        max_ms: latencies.last().map_or(0.0, |d| d.as_secs_f64() * 1e3),
        server_cpu_ms_per_conversation: cpu,
        errors,
    })
}

/// The `q` quantile of sorted latencies, in milliseconds (nearest rank).
fn percentile(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1].as_secs_f64() * 1e3
}

impl Report {
    /// The report as people read it.
    pub fn human(&self) -> String {
        let cpu = self
            .server_cpu_ms_per_conversation
            .map_or_else(|| "n/a (no --server-pid)".to_owned(), |ms| format!("{ms:.3} ms"));
        let mut text = format!(
            "door {door}, concurrency {c}: {n} conversations ({failed} failed) in {secs:.2} s\n\
             conversations/s  {rate:.1}\n\
             latency p50 {p50:.2} ms  p99 {p99:.2} ms  p999 {p999:.2} ms  max {max:.2} ms\n\
             server CPU per conversation  {cpu}\n",
            door = self.door,
            c = self.concurrency,
            n = self.conversations,
            failed = self.failed,
            secs = self.elapsed_secs,
            rate = self.conversations_per_sec,
            p50 = self.p50_ms,
            p99 = self.p99_ms,
            p999 = self.p999_ms,
            max = self.max_ms,
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
    fn percentiles_are_nearest_rank() {
        let sorted: Vec<Duration> = (1..=1000).map(Duration::from_millis).collect();
        assert_eq!(percentile(&sorted, 0.5), 500.0);
        assert_eq!(percentile(&sorted, 0.99), 990.0);
        assert_eq!(percentile(&sorted, 0.999), 999.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }
}
