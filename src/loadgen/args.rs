//! The command line of `ledgerwire bench`, and running it from there.
//!
//! Owns: the flags and their defaults. Must never: start a run the
//! settings check refused.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::series::{self, Build, MAX_RUNS, Run};
use super::{Door, LoadConfig, LoadError, Target};

/// Conversations a run measures unless told otherwise.
pub const DEFAULT_CONVERSATIONS: u64 = 2_000;
/// Conversations in flight at once unless told otherwise.
pub const DEFAULT_CONCURRENCY: usize = 200;
/// A run's time limit unless told otherwise, in seconds.
pub const DEFAULT_MAX_DURATION_SECS: u64 = 60;

/// `ledgerwire bench`: pause-and-resume conversations against a server.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// The running server's base URL (not with --spawn).
    #[arg(
        long,
        default_value = "http://127.0.0.1:8080",
        conflicts_with = "spawn"
    )]
    pub url: String,
    /// The running server's process id, read for its CPU time
    /// (/proc/PID/stat); without it the CPU figure is left out.
    #[arg(long, conflicts_with = "spawn")]
    pub server_pid: Option<u32>,
    /// Start the server itself from this binary (`serve --agent minimal
    /// --agent-step-ms 0`, the zero-work agent, on a free 127.0.0.1 port)
    /// and stop it after the run.
    #[arg(long)]
    pub spawn: bool,
    /// With --spawn: the server's data directory (kept after the run).
    /// Without it, a new scratch directory under the system's temporary
    /// directory, removed after the run.
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
    /// With --spawn: run the server on this PostgreSQL store
    /// (postgres://…) instead of a directory.
    #[arg(long, value_name = "URL", conflicts_with = "data")]
    pub store: Option<String>,
    /// Conversations measured (after the warm-up: two per worker).
    #[arg(long, default_value_t = DEFAULT_CONVERSATIONS)]
    pub conversations: u64,
    /// Conversations in flight at once.
    #[arg(long, default_value_t = DEFAULT_CONCURRENCY)]
    pub concurrency: usize,
    /// Stop starting conversations after this many seconds.
    #[arg(long, default_value_t = DEFAULT_MAX_DURATION_SECS)]
    pub max_seconds: u64,
    /// Drive `harness-sdk` commands over Statewire (a WebSocket attach per
    /// conversation) instead of the Studio's SSE routes.
    #[arg(long)]
    pub statewire: bool,
    /// The bearer token.
    #[arg(
        long,
        env = "STUDIO_API_TOKEN",
        default_value = "bench",
        hide_env_values = true
    )]
    pub token: String,
    /// Repeat the run this many times, each on a server started afresh
    /// (with --spawn), and summarise: per figure, the median and range.
    #[arg(long, default_value_t = 1)]
    pub runs: u32,
    /// With --spawn: another `ledgerwire` binary to compare with. Each
    /// run is made against both servers, in the order this, baseline,
    /// baseline, this, …, and the summary gives this build's medians over
    /// the baseline's.
    #[arg(long, value_name = "BINARY", conflicts_with = "data")]
    pub baseline: Option<PathBuf>,
    /// With --spawn: run the server under valgrind's callgrind and report
    /// the instructions it executed per conversation (user space, every
    /// thread): a figure that does not drift with the host's speed, as
    /// CPU time does. The server runs about 50 times slower, so measure a
    /// few hundred conversations, and read this run's latency and
    /// throughput as callgrind's. Needs valgrind.
    #[arg(long)]
    pub instructions: bool,
    /// Print the report as one JSON object (for a series: every run's
    /// report and the summary).
    #[arg(long)]
    pub json: bool,
}

/// Runs `ledgerwire bench` and prints its report (or its series' runs and
/// summary); returns how many conversations asked for did not complete.
pub fn main(args: BenchArgs, out: &mut impl Write) -> Result<u64, LoadError> {
    check_series(&args)?;
    let this = std::env::current_exe()?;
    let config = |binary: &Path| LoadConfig {
        target: if args.spawn {
            Target::Spawn {
                binary: binary.to_owned(),
                data: args.data.clone(),
                store: args.store.clone(),
                count_instructions: args.instructions,
            }
        } else {
            Target::Running {
                url: args.url.clone(),
                pid: args.server_pid,
            }
        },
        door: if args.statewire {
            Door::Statewire
        } else {
            Door::Studio
        },
        conversations: args.conversations,
        concurrency: args.concurrency,
        max_duration: Duration::from_secs(args.max_seconds),
        token: args.token.clone(),
    };
    config(&this).check()?;
    let runtime = tokio::runtime::Runtime::new()?;
    if args.runs == 1 && args.baseline.is_none() {
        let report = runtime.block_on(super::run(config(&this)))?;
        if args.json {
            writeln!(out, "{}", to_json(&report)?)?;
        } else {
            write!(out, "{}", report.human())?;
        }
        return Ok(report.incomplete());
    }
    let mut runs = Vec::new();
    for (number, build) in series::order(args.runs, args.baseline.is_some())
        .into_iter()
        .enumerate()
    {
        let binary = match (build, &args.baseline) {
            (Build::Baseline, Some(baseline)) => baseline.as_path(),
            _ => this.as_path(),
        };
        let report = runtime.block_on(super::run(config(binary)))?;
        let run = Run { build, report };
        if !args.json {
            writeln!(out, "{}", run.line(number + 1))?;
        }
        runs.push(run);
    }
    let summary = series::summarise(&runs);
    if args.json {
        let series = serde_json::json!({ "runs": runs, "summary": summary });
        writeln!(out, "{}", to_json(&series)?)?;
    } else {
        write!(out, "{}", summary.human())?;
    }
    Ok(summary.incomplete())
}

/// Refuses a series outside its bounds, a flag about the server it
/// starts without `--spawn`, or a baseline that is not there.
fn check_series(args: &BenchArgs) -> Result<(), LoadError> {
    // Checked here: clap's `requires` counts a flag's default (`--spawn`
    // false) as given.
    let about_a_started_server = [
        (args.data.is_some(), "--data"),
        (args.store.is_some(), "--store"),
        (args.baseline.is_some(), "--baseline"),
        (args.instructions, "--instructions"),
    ];
    for (given, flag) in about_a_started_server {
        if given && !args.spawn {
            return Err(LoadError::Settings(format!(
                "{flag} is about a server this command starts: add --spawn (and leave out --url)"
            )));
        }
    }
    if args.runs == 0 || args.runs > MAX_RUNS {
        return Err(LoadError::Settings(format!(
            "--runs must be 1 to {MAX_RUNS}"
        )));
    }
    if let Some(baseline) = &args.baseline
        && !baseline.is_file()
    {
        return Err(LoadError::Settings(format!(
            "--baseline {}: no such file; give the path of another ledgerwire binary",
            baseline.display()
        )));
    }
    Ok(())
}

fn to_json(value: &impl serde::Serialize) -> Result<String, LoadError> {
    serde_json::to_string(value).map_err(|error| LoadError::Client(std::io::Error::other(error)))
}
