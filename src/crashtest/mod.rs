//! `ledgerwire crashtest`: the kill-anywhere campaign, built in, against
//! the real binary on a directory the operator names (their own disk and
//! filesystem). Each round starts `ledgerwire serve` on the directory
//! (or several instances on one PostgreSQL database, `--store` and
//! `--instances`), drives Studio conversations and Statewire threads
//! against them (each request to a random live instance), and at a
//! random moment SIGKILLs one instance or all, or restarts the database
//! (`--db-restart-cmd`). Then it checks the store alone: `log verify`
//! clean, every acknowledged item in the log with the content
//! acknowledged, no seq received twice in a turn, no answer changed, no
//! stream ended without a closing frame, and (in the next round) every
//! paused turn able to continue.
//!
//! Owns: the campaign and its report. Its randomness is `rng`'s (seeded,
//! so a run can be repeated), the balancer `routes`', the clients
//! `studio_load`'s, `frames_load`'s and `statewire_load`'s, the checks
//! `check`'s.
//! Must never: run without bounds (rounds, uptime and each request are
//! bounded), or report a clean run with a loss in it.

pub mod check;
mod frames_load;
mod rng;
mod routes;
mod statewire_load;
mod studio_load;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::ledger::local::{LocalStore, OpenMode};
use crate::ledger::{Ledger, LedgerError};

use check::Acks;
use frames_load::FramesDriver;
pub use rng::Rng;
pub use routes::Routes;
use statewire_load::StatewireDriver;
use studio_load::StudioDriver;

/// The token every client of the campaign authenticates with.
pub const CRASHTEST_TOKEN: &str = "crashtest";
/// Longest a server may take to start listening, in milliseconds.
pub const STARTUP_TIMEOUT_MS: u64 = 30_000;
/// Longest the clients take to notice a kill, in milliseconds.
const STOP_TIMEOUT_MS: u64 = 20_000;
/// Most rounds, conversations, threads and instances a campaign runs.
pub const MAX_KILLS: u32 = 10_000;
pub const MAX_CLIENTS: u32 = 256;
pub const MAX_INSTANCES: u32 = 8;
/// Longest `--db-restart-cmd` may run, in milliseconds.
pub const DB_RESTART_TIMEOUT_MS: u64 = 120_000;
/// Bytes of a server's standard error kept to explain a failed start.
const STDERR_KEPT_BYTES: usize = 8 * 1024;

/// The store the servers of a campaign run on.
#[derive(Clone, Debug)]
pub enum CrashStore {
    /// A local store in this directory.
    Local(PathBuf),
    /// A PostgreSQL database (its URL).
    Postgres(String),
}

impl std::fmt::Display for CrashStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CrashStore::Local(directory) => write!(f, "{}", directory.display()),
            CrashStore::Postgres(url) => {
                match crate::ledger::postgres::PostgresSettings::from_url(url) {
                    Ok(settings) => f.write_str(&settings.describe()),
                    Err(_) => f.write_str("a PostgreSQL database"),
                }
            }
        }
    }
}

/// What a campaign runs.
#[derive(Clone, Debug)]
pub struct CrashtestConfig {
    /// The `ledgerwire` binary to run (`serve`).
    pub binary: PathBuf,
    pub store: CrashStore,
    pub kills: u32,
    /// Studio conversations driven over SSE at once.
    pub conversations: u32,
    /// Statewire threads driven over WebSocket at once.
    pub threads: u32,
    /// Statewire threads driven over HTTP at once (`/frames` to random
    /// instances).
    pub http_threads: u32,
    pub seed: u64,
    /// A server runs between these many milliseconds before its kill.
    pub min_uptime_ms: u64,
    pub max_uptime_ms: u64,
    pub lease_ttl_ms: u64,
    pub heartbeat_ms: u64,
    /// Instances on the store at once (more than one needs PostgreSQL).
    pub instances: u32,
    /// A shell command that restarts the database (the campaign does not
    /// own it); `None`: no database restarts.
    pub db_restart_cmd: Option<String>,
}

/// What ends a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// SIGKILL of the instance at this index; the others run on.
    KillOne(usize),
    /// SIGKILL of every instance.
    KillAll,
    /// The database restarted under the running instances.
    RestartDatabase,
}

impl Fault {
    /// One at random: a database restart in a quarter of the rounds when
    /// the campaign may restart it; otherwise a kill, of one instance in
    /// two thirds of those when there are several.
    fn choose(rng: &mut Rng, config: &CrashtestConfig) -> Self {
        if config.db_restart_cmd.is_some() && rng.below(4) == 0 {
            return Fault::RestartDatabase;
        }
        if config.instances > 1 && rng.below(3) != 0 {
            return Fault::KillOne(rng.below(u64::from(config.instances)) as usize);
        }
        Fault::KillAll
    }

    fn describe(self, instances: u32) -> String {
        match self {
            Fault::KillOne(_) if instances == 1 => "the instance killed".to_owned(),
            Fault::KillOne(at) => format!("instance {} of {instances} killed", at + 1),
            Fault::KillAll if instances == 1 => "the instance killed".to_owned(),
            Fault::KillAll => format!("all {instances} instances killed"),
            Fault::RestartDatabase => "the database restarted".to_owned(),
        }
    }
}

/// Why a campaign could not run.
#[derive(Debug, thiserror::Error)]
pub enum CrashtestError {
    #[error("cannot run {binary}: {source}")]
    Spawn {
        binary: String,
        source: std::io::Error,
    },
    #[error("the server did not start: {0}")]
    Startup(String),
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// One round's figures.
#[derive(Clone, Debug, Default)]
pub struct Round {
    pub round: u32,
    pub uptime_ms: u64,
    pub frames: usize,
    pub answers: usize,
    pub edits: usize,
    pub commands: u64,
    pub verify_clean: bool,
    pub lost: usize,
    pub fault: String,
}

/// What a campaign found.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub rounds: Vec<Round>,
    pub continued: u64,
    /// Every loss, as the checks word it.
    pub losses: Vec<String>,
}

/// A running server.
struct Server {
    child: Child,
    addr: String,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl Server {
    fn start(config: &CrashtestConfig) -> Result<Self, CrashtestError> {
        let mut command = Command::new(&config.binary);
        command.args(["serve", "--addr", "127.0.0.1:0", "--agent", "minimal"]);
        command.arg("--statewire-examples");
        match &config.store {
            CrashStore::Local(directory) => command.arg("--data").arg(directory),
            CrashStore::Postgres(url) => command.arg("--store").arg(url),
        };
        let mut child = command
            .args(["--heartbeat", &config.heartbeat_ms.to_string()])
            .args(["--lease-ttl", &config.lease_ttl_ms.to_string()])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| CrashtestError::Spawn {
                binary: config.binary.display().to_string(),
                source,
            })?;
        let stderr = Arc::new(Mutex::new(Vec::new()));
        if let Some(mut pipe) = child.stderr.take() {
            let kept = Arc::clone(&stderr);
            std::thread::spawn(move || {
                let mut buffer = [0u8; 1024];
                while let Ok(n) = pipe.read(&mut buffer) {
                    if n == 0 {
                        break;
                    }
                    if let Ok(mut kept) = kept.lock() {
                        kept.extend_from_slice(&buffer[..n]);
                        let excess = kept.len().saturating_sub(STDERR_KEPT_BYTES);
                        kept.drain(..excess);
                    }
                }
            });
        }
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| CrashtestError::Startup("no standard output".into()))?;
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = sender.send(line);
        });
        let line = receiver
            .recv_timeout(Duration::from_millis(STARTUP_TIMEOUT_MS))
            .unwrap_or_default();
        let Some(addr) = line.trim().strip_prefix("listening on ").map(str::to_owned) else {
            let _ = child.kill();
            let _ = child.wait();
            let said = stderr
                .lock()
                .map(|s| String::from_utf8_lossy(&s).into_owned());
            return Err(CrashtestError::Startup(
                said.unwrap_or_default().trim().to_owned(),
            ));
        };
        Ok(Self {
            child,
            addr,
            stderr,
        })
    }

    /// SIGKILL, and reaped.
    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        drop(self.stderr);
    }
}

/// The clients of a campaign.
struct Clients {
    studio: Vec<StudioDriver>,
    statewire: Vec<StatewireDriver>,
    frames: Vec<FramesDriver>,
}

/// A client of the campaign: it takes one step at a time (a request, an
/// answer awaited) until its round stops.
trait Driver: Send + Sized + 'static {
    fn step<'a>(
        &'a mut self,
        acks: &'a Arc<Mutex<Acks>>,
    ) -> futures_util::future::BoxFuture<'a, Result<(), String>>;
}

impl Driver for StudioDriver {
    fn step<'a>(
        &'a mut self,
        acks: &'a Arc<Mutex<Acks>>,
    ) -> futures_util::future::BoxFuture<'a, Result<(), String>> {
        Box::pin(StudioDriver::step(self, acks))
    }
}

impl Driver for StatewireDriver {
    fn step<'a>(
        &'a mut self,
        acks: &'a Arc<Mutex<Acks>>,
    ) -> futures_util::future::BoxFuture<'a, Result<(), String>> {
        Box::pin(StatewireDriver::step(self, acks))
    }
}

impl Driver for FramesDriver {
    fn step<'a>(
        &'a mut self,
        acks: &'a Arc<Mutex<Acks>>,
    ) -> futures_util::future::BoxFuture<'a, Result<(), String>> {
        Box::pin(FramesDriver::step(self, acks))
    }
}

/// Steps `drivers` in tasks of their own until `stop` is set; hands back
/// those whose task ended.
async fn run_drivers<D: Driver>(
    drivers: Vec<D>,
    acks: &Arc<Mutex<Acks>>,
    stop: &tokio::sync::watch::Receiver<bool>,
) -> Vec<D> {
    let tasks: Vec<_> = drivers
        .into_iter()
        .map(|mut driver| {
            let (acks, mut stop) = (Arc::clone(acks), stop.clone());
            tokio::spawn(async move {
                while !*stop.borrow() {
                    tokio::select! {
                        _ = stop.changed() => break,
                        stepped = driver.step(&acks) => {
                            if stepped.is_err() {
                                tokio::time::sleep(Duration::from_millis(50)).await;
                            }
                        }
                    }
                }
                driver
            })
        })
        .collect();
    let mut returned = Vec::new();
    for task in tasks {
        if let Ok(driver) = task.await {
            returned.push(driver);
        }
    }
    returned
}

/// Runs the clients until `stop` is set; hands them back.
async fn run_clients(
    clients: Clients,
    acks: &Arc<Mutex<Acks>>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Clients {
    let (studio, statewire, frames) = tokio::join!(
        run_drivers(clients.studio, acks, &stop),
        run_drivers(clients.statewire, acks, &stop),
        run_drivers(clients.frames, acks, &stop),
    );
    Clients {
        studio,
        statewire,
        frames,
    }
}

fn commands_of(acks: &Acks) -> u64 {
    let harness: u64 = acks
        .threads
        .values()
        .filter_map(|t| t.session.lanes.get(crate::harness_sdk::HARNESS_SDK))
        .map(|lane| lane.watermark)
        .sum();
    harness + acks.frames_answered.values().sum::<u64>()
}

/// Runs a campaign, printing progress and a summary to `out`.
pub async fn run(
    config: &CrashtestConfig,
    out: &mut impl Write,
) -> Result<Summary, CrashtestError> {
    if config.kills == 0 || config.kills > MAX_KILLS {
        return Err(CrashtestError::Config(format!(
            "--kills must be 1 to {MAX_KILLS}"
        )));
    }
    if config.conversations + config.threads + config.http_threads == 0
        || config.conversations > MAX_CLIENTS
        || config.threads > MAX_CLIENTS
        || config.http_threads > MAX_CLIENTS
    {
        return Err(CrashtestError::Config(format!(
            "run at least one conversation or thread, and at most {MAX_CLIENTS} of each"
        )));
    }
    if config.min_uptime_ms > config.max_uptime_ms {
        return Err(CrashtestError::Config(
            "--min-uptime is above --max-uptime".into(),
        ));
    }
    check_instances(config)?;
    writeln!(
        out,
        "crashtest: {} kills of `ledgerwire serve` on {} ({} instance(s)), {} conversation(s) and {} thread(s), seed {}",
        config.kills,
        config.store,
        config.instances,
        config.conversations,
        config.threads,
        config.seed
    )?;
    let acks = Arc::new(Mutex::new(Acks::default()));
    let mut rng = Rng::new(config.seed);
    let campaign = Rng::new(config.seed).next_u64() % 1_000_000;
    let routes = Routes::new(rng.next_u64());
    let mut clients = Clients {
        studio: (0..config.conversations)
            .map(|n| {
                let name = format!("crash-{campaign}-c{n}");
                StudioDriver::new(name, routes.clone(), CRASHTEST_TOKEN)
            })
            .collect(),
        statewire: (0..config.threads)
            .map(|n| {
                let name = format!("crash-{campaign}-t{n}");
                StatewireDriver::new(name, routes.clone(), CRASHTEST_TOKEN)
            })
            .collect(),
        frames: (0..config.http_threads)
            .map(|n| {
                let name = format!("crash-{campaign}-h{n}");
                FramesDriver::new(name, routes.clone(), CRASHTEST_TOKEN)
            })
            .collect(),
    };
    let mut servers: Vec<Option<Server>> = (0..config.instances).map(|_| None).collect();
    let mut summary = Summary::default();
    let mut before = Round::default();
    'rounds: for round in 1..=config.kills {
        for slot in servers.iter_mut().filter(|slot| slot.is_none()) {
            match Server::start(config) {
                Ok(server) => *slot = Some(server),
                Err(error) => {
                    summary.losses.push(format!("round {round}: {error}"));
                    writeln!(out, "round {round}: a server did not restart: {error}")?;
                    break 'rounds;
                }
            }
        }
        routes.set(
            servers
                .iter()
                .flatten()
                .map(|server| format!("http://{}", server.addr))
                .collect(),
        );
        for (n, driver) in clients.studio.iter_mut().enumerate() {
            let seed = rng.next_u64() ^ (n as u64 + 1).wrapping_mul(0x9E37_79B9);
            driver.restarted(round, rng.below(3) == 0, seed);
        }
        for driver in &mut clients.statewire {
            driver.restarted();
        }
        for driver in &mut clients.frames {
            driver.restarted();
        }
        let uptime_ms = rng.between(config.min_uptime_ms, config.max_uptime_ms);
        let fault = Fault::choose(&mut rng, config);
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let running = run_clients(clients, &acks, stopped);
        let started = Instant::now();
        let mut fault_failed = None;
        let faulting = async {
            tokio::time::sleep(Duration::from_millis(uptime_ms)).await;
            // The fault lands in whatever the clients were doing; then
            // they stop.
            fault_failed = strike(fault, &mut servers, config).await.err();
            let _ = stop.send(true);
        };
        let (returned, ()) = tokio::join!(
            tokio::time::timeout(
                Duration::from_millis(uptime_ms + STOP_TIMEOUT_MS + DB_RESTART_TIMEOUT_MS),
                running
            ),
            faulting
        );
        clients = returned.map_err(|_| {
            CrashtestError::Startup("the clients did not stop after the fault".into())
        })?;
        let uptime_ms = started.elapsed().as_millis() as u64;
        let snapshot = acks.lock().map(|a| a.clone()).unwrap_or_default();
        let (verify_clean, mut losses) = check_store(config, &snapshot).await;
        losses.extend(fault_failed);
        let now = Round {
            round,
            uptime_ms,
            frames: snapshot.frames.len(),
            answers: snapshot.answers.len(),
            edits: snapshot.mutations.len(),
            commands: commands_of(&snapshot),
            verify_clean,
            lost: losses.len(),
            fault: fault.describe(config.instances),
        };
        writeln!(
            out,
            "kill {round}/{} ({}): after {uptime_ms} ms; acknowledged +{} frames, +{} answers, +{} edits, +{} commands; log verify {}; lost {}",
            config.kills,
            now.fault,
            now.frames - before.frames,
            now.answers - before.answers,
            now.edits - before.edits,
            now.commands - before.commands,
            if verify_clean { "ok" } else { "FAILED" },
            losses.len()
        )?;
        for loss in &losses {
            writeln!(out, "  LOST: {loss}")?;
        }
        summary.continued = snapshot.continued;
        // A loss stays a loss in later checks: report each once.
        for loss in losses {
            if !summary.losses.contains(&loss) {
                summary.losses.push(loss);
            }
        }
        summary.rounds.push(now.clone());
        before = now;
    }
    for server in servers.into_iter().flatten() {
        server.kill();
    }
    print_summary(config, &summary, out)?;
    Ok(summary)
}

/// Several instances share only a PostgreSQL store; a database restart
/// needs one too.
fn check_instances(config: &CrashtestConfig) -> Result<(), CrashtestError> {
    if config.instances == 0 || config.instances > MAX_INSTANCES {
        return Err(CrashtestError::Config(format!(
            "--instances must be 1 to {MAX_INSTANCES}"
        )));
    }
    let local = matches!(config.store, CrashStore::Local(_));
    if local && config.instances > 1 {
        return Err(CrashtestError::Config(
            "several instances share only a PostgreSQL store: give --store postgres://…".into(),
        ));
    }
    if local && config.db_restart_cmd.is_some() {
        return Err(CrashtestError::Config(
            "--db-restart-cmd needs a PostgreSQL store (--store)".into(),
        ));
    }
    Ok(())
}

/// Carries out a round's fault; `Err` says why a database restart failed.
async fn strike(
    fault: Fault,
    servers: &mut [Option<Server>],
    config: &CrashtestConfig,
) -> Result<(), String> {
    match fault {
        Fault::KillOne(at) => {
            if let Some(server) = servers.get_mut(at).and_then(Option::take) {
                server.kill();
            }
            Ok(())
        }
        Fault::KillAll => {
            for server in servers.iter_mut().filter_map(Option::take) {
                server.kill();
            }
            Ok(())
        }
        Fault::RestartDatabase => {
            let command = config.db_restart_cmd.clone().unwrap_or_default();
            restart_database(command).await
        }
    }
}

/// Runs the operator's restart command through `sh -c`, bounded by
/// [`DB_RESTART_TIMEOUT_MS`].
async fn restart_database(command: String) -> Result<(), String> {
    let mut child = tokio::process::Command::new("sh")
        .args(["-c", &command])
        // Not piped: a database started by the command inherits them.
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| format!("--db-restart-cmd cannot run: {error}"))?;
    let waited =
        tokio::time::timeout(Duration::from_millis(DB_RESTART_TIMEOUT_MS), child.wait()).await;
    match waited {
        Ok(Ok(status)) if status.success() => Ok(()),
        Ok(Ok(status)) => Err(format!("--db-restart-cmd failed ({status})")),
        Ok(Err(error)) => Err(format!("--db-restart-cmd failed: {error}")),
        Err(_) => Err(format!(
            "--db-restart-cmd ran past {DB_RESTART_TIMEOUT_MS} ms"
        )),
    }
}

/// Opens the store after a kill: whether it verifies, and every loss.
async fn check_store(config: &CrashtestConfig, acks: &Acks) -> (bool, Vec<String>) {
    let directory = match &config.store {
        CrashStore::Local(directory) => directory,
        CrashStore::Postgres(url) => return check_postgres(url, acks).await,
    };
    match LocalStore::open(directory, OpenMode::MustExist) {
        Ok((store, report)) => {
            let ledger = Ledger::new(std::sync::Arc::new(store));
            let mut losses: Vec<String> = report
                .problems
                .iter()
                .map(|p| format!("log verify: {}", p.problem))
                .collect();
            losses.extend(check::check(&ledger, acks, CRASHTEST_TOKEN).await);
            (report.is_clean(), losses)
        }
        Err(error) => (false, vec![format!("the store does not open: {error}")]),
    }
}

/// [`check_store`] on a PostgreSQL database: its global order verified
/// (the records of a server killed mid-statement were committed whole or
/// not at all), then every acknowledged item.
async fn check_postgres(url: &str, acks: &Acks) -> (bool, Vec<String>) {
    let settings = match crate::ledger::postgres::PostgresSettings::from_url(url) {
        Ok(settings) => settings,
        Err(error) => return (false, vec![error.to_string()]),
    };
    let ledger = match crate::ledger::postgres::PostgresStore::open_ledger(&settings).await {
        Ok(ledger) => ledger,
        Err(error) => return (false, vec![format!("the store does not open: {error}")]),
    };
    let (clean, mut losses) = match ledger.verify().await {
        Ok(report) => (
            report.is_clean(),
            report
                .problems
                .iter()
                .map(|p| format!("log verify: {}", p.problem))
                .collect(),
        ),
        Err(error) => (false, vec![format!("log verify: {error}")]),
    };
    losses.extend(check::check(&ledger, acks, CRASHTEST_TOKEN).await);
    (clean, losses)
}

fn print_summary(
    config: &CrashtestConfig,
    summary: &Summary,
    out: &mut impl Write,
) -> std::io::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "{:>5} {:>9} {:>7} {:>7} {:>5} {:>8} {:>6} {:>4}",
        "kill", "uptime_ms", "frames", "answers", "edits", "commands", "verify", "lost"
    )?;
    for round in &summary.rounds {
        writeln!(
            out,
            "{:>5} {:>9} {:>7} {:>7} {:>5} {:>8} {:>6} {:>4}",
            round.round,
            round.uptime_ms,
            round.frames,
            round.answers,
            round.edits,
            round.commands,
            if round.verify_clean { "ok" } else { "FAILED" },
            round.lost
        )?;
    }
    let last = summary.rounds.last().cloned().unwrap_or_default();
    writeln!(
        out,
        "\n{} kills of {}; {} conversation(s), {} thread(s); acknowledged {} pausing and closing frames, {} answers, {} canvas edits, {} Statewire commands; {} paused turns continued after a kill; lost: {}",
        summary.rounds.len(),
        config.kills,
        config.conversations,
        config.threads,
        last.frames,
        last.answers,
        last.edits,
        last.commands,
        summary.continued,
        summary.losses.len()
    )
}
