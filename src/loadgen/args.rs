//! The command line of `ledgerwire bench`, and running it from there.
//!
//! Owns: the flags and their defaults. Must never: start a run the
//! settings check refused.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

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
    #[arg(long, value_name = "DIR", requires = "spawn")]
    pub data: Option<PathBuf>,
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
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Runs `ledgerwire bench` and prints its report.
pub fn main(args: BenchArgs, out: &mut impl Write) -> Result<super::Report, LoadError> {
    let target = if args.spawn {
        Target::Spawn {
            binary: std::env::current_exe()?,
            data: args.data,
        }
    } else {
        Target::Running {
            url: args.url,
            pid: args.server_pid,
        }
    };
    let config = LoadConfig {
        target,
        door: if args.statewire {
            Door::Statewire
        } else {
            Door::Studio
        },
        conversations: args.conversations,
        concurrency: args.concurrency,
        max_duration: Duration::from_secs(args.max_seconds),
        token: args.token,
    };
    config.check()?;
    let runtime = tokio::runtime::Runtime::new()?;
    let report = runtime.block_on(super::run(config))?;
    if args.json {
        let line = serde_json::to_string(&report)
            .map_err(|error| LoadError::Client(std::io::Error::other(error)))?;
        writeln!(out, "{line}")?;
    } else {
        write!(out, "{}", report.human())?;
    }
    Ok(report)
}
